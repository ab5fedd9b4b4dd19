'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { parseQuota } = require('../quota.js');

test('a size with no unit is read in the quota files unit', () => {
  const limits = parseQuota('alice 300\nbob 1.5\ncarol 20b\n');
  assert.strictEqual(limits.get('alice'), 300 * 1024 * 1024);
  assert.strictEqual(limits.get('bob'), Math.floor(1.5 * 1024 * 1024));
  assert.strictEqual(limits.get('carol'), 20);
});

test('sizes with units are unchanged', () => {
  const limits = parseQuota('dave 2GB\nerin 64kb\n');
  assert.strictEqual(limits.get('dave'), 2 * 1024 ** 3);
  assert.strictEqual(limits.get('erin'), 64 * 1024);
});
