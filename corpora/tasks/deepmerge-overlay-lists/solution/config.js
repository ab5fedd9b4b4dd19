'use strict';

// Service configuration: the base file, with the environment's overlay merged over it.

const deepmerge = require('./dist/cjs.js');

function loadConfig(base, overlay) {
  return deepmerge(base, overlay || {}, { arrayMerge: (_target, source) => source });
}

module.exports = { loadConfig };
