'use strict';

const test = require('node:test');
const assert = require('node:assert');
const { slugify, sitemap } = require('../src');

test('accented letters fold to ASCII', () => {
  assert.strictEqual(slugify('Crème Brûlée à la carte'), 'creme-brulee-a-la-carte');
  assert.strictEqual(slugify('Über Straßen in Łódź'), 'uber-strassen-in-lodz');
  assert.strictEqual(slugify('Ærø og Søren'), 'aero-og-soren');
});

test('plain titles are unchanged', () => {
  assert.strictEqual(slugify('Getting Started: The Basics'), 'getting-started-the-basics');
});

test('the sitemap uses folded slugs', () => {
  assert.match(sitemap([{ section: 'recettes', title: 'Pâte à choux' }], 'https://docs.test'), /recettes\/pate-a-choux</);
});
