'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { consentCookie, readConsent } = require('../consent.js');

test('the consent cookie carries the name the edge forwards', () => {
  assert.match(consentCookie('all'), /^edge_consent=all;/);
  assert.strictEqual(readConsent('theme=dark; edge_consent=necessary'), 'necessary');
});

test('the old names are not used', () => {
  assert.doesNotMatch(consentCookie('all'), /^(consent|cdn_consent)=/);
  assert.strictEqual(readConsent('cdn_consent=all'), null);
});
