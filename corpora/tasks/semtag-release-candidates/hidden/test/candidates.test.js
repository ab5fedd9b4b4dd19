'use strict';

const test = require('node:test');
const assert = require('node:assert');
const path = require('node:path');
const { spawnSync } = require('node:child_process');

const BIN = path.join(__dirname, '..', 'bin', 'semtag.js');

function semtag(...args) {
  const result = spawnSync(process.execPath, [BIN, ...args], { encoding: 'utf8' });
  return { status: result.status, out: result.stdout.trim() };
}

test('the first candidate of the next release', () => {
  assert.deepStrictEqual(semtag('next', 'v1.4.2', '--pre'), { status: 0, out: 'v1.4.3-cand.1' });
  assert.strictEqual(semtag('next', '1.4.2', '--minor', '--pre').out, 'v1.5.0-cand.1');
});

test('the next candidate of a candidate', () => {
  assert.strictEqual(semtag('next', 'v1.4.3-cand.1', '--pre').out, 'v1.4.3-cand.2');
  assert.strictEqual(semtag('next', 'v1.4.3-cand.9', '--pre').out, 'v1.4.3-cand.10');
});

test('promoting a candidate gives the final release', () => {
  assert.deepStrictEqual(semtag('promote', 'v1.4.3-cand.2'), { status: 0, out: 'v1.4.3' });
  assert.strictEqual(semtag('promote', 'v1.4.3').status, 2);
});

test('plain bumps are unchanged', () => {
  assert.strictEqual(semtag('next', 'v1.4.2').out, 'v1.4.3');
});
