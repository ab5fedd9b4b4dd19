'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { buildFeed } = require('../lib/feed');

test('every item carries the publication time in epoch seconds for the partner', () => {
  const publishedAt = new Date('2024-05-01T08:00:00Z');
  const feed = buildFeed({
    title: 'News',
    homePageUrl: 'https://news.test',
    articles: [{ id: 7, url: 'https://news.test/x', title: 'X', body: 'b', status: 'published', publishedAt }],
  });
  const [item] = feed.items;
  assert.strictEqual(item.published_ts, 1714550400);
  assert.strictEqual(typeof item.published_ts, 'number');
  assert.strictEqual(item.date_published, '2024-05-01T08:00:00.000Z');
});
