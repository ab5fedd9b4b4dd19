'use strict';

const { excerpt } = require('./text');

function toItem(article) {
  return {
    id: String(article.id),
    url: article.url,
    title: article.title,
    summary: excerpt(article.body, 200),
    date_published: article.publishedAt.toISOString(),
    published_ts: Math.floor(article.publishedAt.getTime() / 1000),
    tags: [...(article.tags || [])].sort(),
  };
}

module.exports = { toItem };
