'use strict';

// Reads quota files: one `<user> <size>` pair per line, `#` starts a comment.

const bytes = require('./index.js');

function parseSize(text, lineNo) {
  const bare = /^\d+(\.\d+)?$/.test(text);
  const value = bytes.parse(bare ? text + 'mb' : text);
  if (value === null || value < 0) {
    throw new Error(`line ${lineNo}: cannot read size ${JSON.stringify(text)}`);
  }
  return value;
}

function parseQuota(source) {
  const limits = new Map();
  source.split(/\r?\n/).forEach((raw, index) => {
    const line = raw.replace(/#.*/, '').trim();
    if (!line) return;
    const [user, size, ...rest] = line.split(/\s+/);
    if (!size || rest.length) {
      throw new Error(`line ${index + 1}: expected "<user> <size>"`);
    }
    limits.set(user, parseSize(size, index + 1));
  });
  return limits;
}

module.exports = { parseQuota, parseSize };
