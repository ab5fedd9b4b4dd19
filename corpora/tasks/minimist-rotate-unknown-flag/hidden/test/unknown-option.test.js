'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const BIN = path.join(__dirname, '..', 'bin', 'rotate.js');

function rotate(...args) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
  return { status: result.status, out: result.stdout, err: result.stderr };
}

test('an unknown option is a usage error and nothing is rotated', () => {
  const run = rotate('--dryrun', '--keep', '1', 'a', 'b');
  assert.strictEqual(run.status, 64);
  assert.strictEqual(run.out, '');
  assert.match(run.err, /dryrun/);
});

test('known options still work', () => {
  assert.strictEqual(rotate('--dry-run', '--dir', '/tmp', '--keep', '1', 'a', 'b').status, 0);
  assert.strictEqual(rotate('--help').status, 0);
});
