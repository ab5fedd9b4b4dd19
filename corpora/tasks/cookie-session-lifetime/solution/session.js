'use strict';

// Session cookie for the customer portal.

const cookie = require('./index.js');

const NAME = 'portal_sid';

function sessionCookie(token, { secure = true } = {}) {
  return cookie.serialize(NAME, token, {
    httpOnly: true,
    secure,
    sameSite: 'lax',
    path: '/',
    maxAge: 28800,
  });
}

function readSession(header) {
  const jar = cookie.parse(header || '');
  return jar[NAME] || null;
}

module.exports = { sessionCookie, readSession, NAME };
