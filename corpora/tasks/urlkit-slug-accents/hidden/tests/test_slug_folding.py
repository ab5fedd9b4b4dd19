"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call


class SlugFoldingTest(unittest.TestCase):
    def test_accented_letters_fold_to_ascii(self) -> None:
        self.assertEqual(call("src:slugify", "Crème Brûlée à la carte"), "creme-brulee-a-la-carte")
        self.assertEqual(call("src:slugify", "Über Straßen in Łódź"), "uber-strassen-in-lodz")
        self.assertEqual(call("src:slugify", "Ærø og Søren"), "aero-og-soren")

    def test_plain_titles_are_unchanged(self) -> None:
        self.assertEqual(call("src:slugify", "Getting Started: The Basics"), "getting-started-the-basics")

    def test_the_sitemap_uses_folded_slugs(self) -> None:
        self.assertRegex(call("src:sitemap", [{"section": "recettes", "title": "Pâte à choux"}], "https://docs.test"),
                         r"recettes/pate-a-choux<")


if __name__ == "__main__":
    unittest.main()
