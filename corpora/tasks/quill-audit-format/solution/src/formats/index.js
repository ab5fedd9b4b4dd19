'use strict';

const audit = require('./audit');
const json = require('./json');
const logfmt = require('./logfmt');

const registry = new Map([
  ['json', json],
  ['logfmt', logfmt],
  ['audit', audit],
]);

function get(name) {
  const format = registry.get(name);
  if (!format) {
    throw new Error(`unknown format: ${name} (known: ${[...registry.keys()].join(', ')})`);
  }
  return format;
}

module.exports = { get, names: () => [...registry.keys()] };
