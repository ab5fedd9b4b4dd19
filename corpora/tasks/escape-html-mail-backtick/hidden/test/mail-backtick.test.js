'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { escapeForMail, invoiceMail } = require('../mail.js');

test('backticks are escaped for the mail renderer', () => {
  assert.strictEqual(escapeForMail('run `rm`'), 'run &#96;rm&#96;');
  assert.match(invoiceMail({ customer: 'x', amount: '1', note: '`a`' }), /title="&#96;a&#96;"/);
});

test('the usual escapes are unchanged', () => {
  assert.strictEqual(escapeForMail('<&>'), '&lt;&amp;&gt;');
  assert.strictEqual(escapeForMail(42), '42');
});
