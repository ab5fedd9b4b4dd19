'use strict';

// Renders the plain-HTML notification e-mails sent by the billing service.

const escapeHtml = require('./index.js');

function escapeForMail(text) {
  return escapeHtml(String(text)).replace(/`/g, '&#96;');
}

function invoiceMail({ customer, amount, note }) {
  return [
    '<p>Dear ' + escapeForMail(customer) + ',</p>',
    '<p>Your invoice of ' + escapeForMail(amount) + ' is ready.</p>',
    note ? '<p title="' + escapeForMail(note) + '">' + escapeForMail(note) + '</p>' : '',
  ].join('\n');
}

module.exports = { escapeForMail, invoiceMail };
