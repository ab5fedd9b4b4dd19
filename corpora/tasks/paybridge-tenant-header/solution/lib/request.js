'use strict';

const { BillingError } = require('./errors');

const USER_AGENT = 'paybridge-client/0.9.2';

function buildRequest(config, method, path, body) {
  const headers = {
    'accept': 'application/json',
    'authorization': `Bearer ${config.token}`,
    'user-agent': USER_AGENT,
  };
  if (config.tenant) headers['x-org-scope'] = config.tenant;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return {
    method,
    url: config.baseUrl.replace(/\/+$/, '') + path,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  };
}

async function fetchTransport(request) {
  const response = await fetch(request.url, request);
  const text = await response.text();
  return { status: response.status, body: text ? JSON.parse(text) : null };
}

async function send(config, method, path, body) {
  const transport = config.transport || fetchTransport;
  const response = await transport(buildRequest(config, method, path, body));
  if (response.status >= 400) {
    const error = (response.body && response.body.error) || {};
    throw new BillingError(response.status, error.code || 'unknown', error.message || 'request failed');
  }
  return response.body;
}

module.exports = { buildRequest, send, USER_AGENT };
