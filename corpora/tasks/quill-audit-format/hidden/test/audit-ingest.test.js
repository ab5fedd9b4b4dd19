'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { createLogger, sinks } = require('../src');

const clock = () => new Date('2024-03-01T08:30:00.000Z');

test('audit lines use the ingest layout', () => {
  const sink = sinks.memorySink();
  createLogger({ format: 'audit', sink, clock }).info('role.grant', { actor: 'jdoe', target: 'acct-42' });
  assert.strictEqual(sink.lines[0], 'AUD1|2024-03-01T08:30:00.000Z|jdoe|role.grant|acct-42');
});

test('missing audit fields are written as a dash', () => {
  const sink = sinks.memorySink();
  createLogger({ format: 'audit', sink, clock }).warn('login.failed', { actor: 'mallory' });
  assert.strictEqual(sink.lines[0], 'AUD1|2024-03-01T08:30:00.000Z|mallory|login.failed|-');
});
