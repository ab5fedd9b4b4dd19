'use strict';

const { loadCatalog } = require('./catalog');

function chain(config, locale) {
  const order = [locale, ...(config.fallbacks[locale] || []), config.default];
  return order.filter((item, index) => order.indexOf(item) === index);
}

function createTranslator(catalog = loadCatalog()) {
  const { config, messages } = catalog;
  return function translate(locale, key) {
    for (const candidate of chain(config, locale)) {
      const table = messages[candidate] || {};
      if (key in table) return table[key];
    }
    return key;
  };
}

module.exports = { createTranslator };
