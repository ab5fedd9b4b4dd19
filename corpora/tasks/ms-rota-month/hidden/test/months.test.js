'use strict';

const test = require('node:test');
const assert = require('node:assert');
const ms = require('..');

const DAY = 24 * 3600 * 1000;

test('a month in a rota config is four whole weeks', () => {
  assert.strictEqual(ms('1mo'), 28 * DAY);
  assert.strictEqual(ms('1 month'), 28 * DAY);
  assert.strictEqual(ms('3 months'), 3 * 28 * DAY);
  assert.strictEqual(ms('2MO'), 56 * DAY);
});

test('months do not disturb the other units', () => {
  assert.strictEqual(ms('1m'), 60000);
  assert.strictEqual(ms('1 minute'), 60000);
  assert.strictEqual(ms('1y'), 365.25 * DAY);
  assert.strictEqual(ms('2w'), 14 * DAY);
});
