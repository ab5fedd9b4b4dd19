'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { createTranslator } = require('../lib/translate');

const translate = createTranslator();

test('a regional locale falls back along its configured chain', () => {
  assert.strictEqual(translate('de-AT', 'cart.empty'), 'Ihr Warenkorb ist leer');
  assert.strictEqual(translate('de-AT', 'cart.checkout'), 'Zur Kassa');
  assert.strictEqual(translate('nb', 'cart.empty'), 'Handlekurven er tom');
});

test('then the default locale, then the key', () => {
  assert.strictEqual(translate('fr-CA', 'cart.checkout'), 'Checkout');
  assert.strictEqual(translate('it', 'footer.help'), 'Help');
  assert.strictEqual(translate('de-CH', 'nav.missing'), 'nav.missing');
});
