'use strict';

function field(value) {
  return value === undefined || value === null || value === '' ? '-' : String(value);
}

module.exports = function audit(record) {
  return ['AUD1', record.time, field(record.actor), field(record.msg), field(record.target)].join('|');
};
