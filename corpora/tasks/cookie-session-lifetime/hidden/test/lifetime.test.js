'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { sessionCookie } = require('../session.js');

test('the session cookie expires after the approved lifetime', () => {
  const header = sessionCookie('abc123');
  const match = /Max-Age=(\d+)/.exec(header);
  assert.ok(match, header);
  assert.strictEqual(Number(match[1]), 8 * 3600);
  assert.doesNotMatch(header, /Expires=/);
});

test('other attributes stay', () => {
  assert.match(sessionCookie('t', { secure: false }), /HttpOnly/);
  assert.doesNotMatch(sessionCookie('t', { secure: false }), /Secure/);
});
