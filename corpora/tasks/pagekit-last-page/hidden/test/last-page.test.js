'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { paginate } = require('../lib/paginate');

const items = Array.from({ length: 45 }, (_, i) => i);

test('a partial last page is counted and reachable', () => {
  const first = paginate(items, { size: '20' });
  assert.strictEqual(first.pages, 3);
  const second = paginate(items, { page: '2', size: '20' });
  assert.strictEqual(second.hasNext, true);
  const last = paginate(items, { page: '3', size: '20' });
  assert.deepStrictEqual(last.items, [40, 41, 42, 43, 44]);
  assert.strictEqual(last.hasNext, false);
});

test('fewer items than one page is one page, none is zero', () => {
  assert.strictEqual(paginate([1, 2, 3]).pages, 1);
  assert.strictEqual(paginate([]).pages, 0);
});
