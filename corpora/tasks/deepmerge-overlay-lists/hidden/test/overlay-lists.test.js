'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { loadConfig } = require('../config.js');

test('a list in the overlay replaces the base list', () => {
  const merged = loadConfig({ allowedHosts: ['localhost', 'staging.internal'], tls: { ciphers: ['a', 'b'] } },
                            { allowedHosts: ['portal.example.com'], tls: { ciphers: ['b'] } });
  assert.deepStrictEqual(merged.allowedHosts, ['portal.example.com']);
  assert.deepStrictEqual(merged.tls.ciphers, ['b']);
});

test('a list the overlay does not name is kept', () => {
  assert.deepStrictEqual(loadConfig({ hosts: ['a'] }, { debug: true }).hosts, ['a']);
});
