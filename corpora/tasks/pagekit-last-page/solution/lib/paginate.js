'use strict';

const { parsePageParams } = require('./params');

function pageCount(total, size) {
  return Math.ceil(total / size);
}

function paginate(items, query = {}) {
  const { page, size } = parsePageParams(query);
  const pages = pageCount(items.length, size);
  const start = (page - 1) * size;
  return {
    items: items.slice(start, start + size),
    page,
    size,
    pages,
    total: items.length,
    hasNext: page < pages,
  };
}

module.exports = { paginate, pageCount };
