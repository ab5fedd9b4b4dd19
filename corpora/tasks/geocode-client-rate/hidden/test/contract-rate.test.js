'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { GeocodeClient } = require('../lib/client');

test('by default the client stays within the contracted rate per key', async () => {
  let t = 0;
  const clock = { now: () => t, sleep: async (ms) => { t += ms; } };
  const calls = [];
  const transport = async () => { calls.push(t); return { status: 200, body: { results: [] } }; };
  const client = new GeocodeClient({ apiKey: 'k', transport, clock });
  for (let i = 0; i < 30; i += 1) await client.geocode(`street ${i}`);
  const firstSecond = calls.filter((stamp) => stamp < 1000).length;
  assert.strictEqual(firstSecond, 14);
  assert.strictEqual(client.limiter.perSecond, 14);
});
