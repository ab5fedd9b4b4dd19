'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { BillingClient } = require('../lib/client');

function header(request, name) {
  const key = Object.keys(request.headers || {}).find((k) => k.toLowerCase() === name);
  return key === undefined ? undefined : request.headers[key];
}

test('every request is scoped to the configured tenant at the gateway', async () => {
  const calls = [];
  const transport = async (request) => {
    calls.push(request);
    return { status: 200, body: {} };
  };
  const client = new BillingClient({ baseUrl: 'https://gw.test/billing/v2', token: 't', tenant: 'acme-eu', transport });
  await client.getInvoice('inv_1');
  await client.listInvoices({ status: 'open' });
  await client.refund('inv_1', 100, 'goodwill');
  assert.strictEqual(calls.length, 3);
  for (const request of calls) {
    assert.strictEqual(header(request, 'x-org-scope'), 'acme-eu');
  }
});
