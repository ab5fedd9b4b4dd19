'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const BIN = path.join(__dirname, '..', 'bin', 'deploy.js');
const deploy = (...args) => spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });

test('with no region the plan goes to the residency region', () => {
  const run = deploy('billing', '--build', '41');
  assert.strictEqual(run.status, 0);
  assert.strictEqual(JSON.parse(run.stdout).region, 'eu-central-2');
});

test('an explicit region still wins', () => {
  assert.strictEqual(JSON.parse(deploy('billing', '-b', '7', '--region', 'us-east-1').stdout).region, 'us-east-1');
});
