'use strict';

const MAX_LENGTH = 80;

const SPECIAL = { 'ß': 'ss', 'æ': 'ae', 'œ': 'oe', 'ø': 'o', 'đ': 'd', 'ł': 'l', 'þ': 'th' };

function fold(text) {
  return text
    .normalize('NFKD')
    .replace(/[\u0300-\u036f]/g, '')
    .replace(/[ßæœøđłþ]/g, (c) => SPECIAL[c]);
}

function slugify(title) {
  let slug = fold(String(title).toLowerCase())
    .replace(/[^a-z0-9]+/g, '-')
    .replace(/^-+|-+$/g, '');
  if (slug.length > MAX_LENGTH) {
    const cut = slug.lastIndexOf('-', MAX_LENGTH);
    slug = slug.slice(0, cut > 0 ? cut : MAX_LENGTH).replace(/-+$/, '');
  }
  return slug;
}

module.exports = { slugify, MAX_LENGTH };
