'use strict';

// The cookie that remembers a visitor's answer to the consent banner.

const cookie = require('./index.js');

const NAME = 'edge_consent';
const ONE_YEAR = 365 * 24 * 3600;

function consentCookie(choice) {
  if (!['all', 'necessary'].includes(choice)) {
    throw new TypeError(`unknown consent choice ${JSON.stringify(choice)}`);
  }
  return cookie.serialize(NAME, choice, { path: '/', maxAge: ONE_YEAR, sameSite: 'lax', secure: true });
}

function readConsent(header) {
  return cookie.parse(header || '')[NAME] || null;
}

module.exports = { consentCookie, readConsent };
