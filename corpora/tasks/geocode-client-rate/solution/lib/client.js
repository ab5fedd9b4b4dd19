'use strict';

const { RateLimiter } = require('./limiter');

const DEFAULT_REQUESTS_PER_SECOND = 14;

class GeocodeClient {
  constructor({ apiKey, transport, requestsPerSecond = DEFAULT_REQUESTS_PER_SECOND, clock } = {}) {
    if (!apiKey) throw new Error('apiKey is required');
    if (!transport) throw new Error('transport is required');
    this.apiKey = apiKey;
    this.transport = transport;
    this.limiter = new RateLimiter(requestsPerSecond, clock);
  }

  async geocode(address) {
    await this.limiter.acquire();
    const response = await this.transport({ path: '/v1/geocode', query: { q: address, key: this.apiKey } });
    if (response.status !== 200) throw new Error(`geocode failed with status ${response.status}`);
    return response.body.results.map((r) => ({ lat: r.lat, lon: r.lon, label: r.label }));
  }
}

module.exports = { GeocodeClient, DEFAULT_REQUESTS_PER_SECOND };
