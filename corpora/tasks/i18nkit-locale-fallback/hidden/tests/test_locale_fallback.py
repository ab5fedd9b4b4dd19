"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call


class LocaleFallbackTest(unittest.TestCase):
    def setUp(self) -> None:
        self.translate = call("lib/translate:createTranslator")

    def test_a_regional_locale_falls_back_along_its_configured_chain(self) -> None:
        self.assertEqual(call(self.translate, "de-AT", "cart.empty"), "Ihr Warenkorb ist leer")
        self.assertEqual(call(self.translate, "de-AT", "cart.checkout"), "Zur Kassa")
        self.assertEqual(call(self.translate, "nb", "cart.empty"), "Handlekurven er tom")

    def test_then_the_default_locale_then_the_key(self) -> None:
        self.assertEqual(call(self.translate, "fr-CA", "cart.checkout"), "Checkout")
        self.assertEqual(call(self.translate, "it", "footer.help"), "Help")
        self.assertEqual(call(self.translate, "de-CH", "nav.missing"), "nav.missing")


if __name__ == "__main__":
    unittest.main()
