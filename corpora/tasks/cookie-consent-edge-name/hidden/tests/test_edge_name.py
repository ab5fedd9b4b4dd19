"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call


class EdgeNameTest(unittest.TestCase):
    def test_the_consent_cookie_carries_the_name_the_edge_forwards(self) -> None:
        self.assertRegex(call("consent.js:consentCookie", "all"), r"^edge_consent=all;")
        self.assertEqual(call("consent.js:readConsent", "theme=dark; edge_consent=necessary"), "necessary")

    def test_the_old_names_are_not_used(self) -> None:
        self.assertNotRegex(call("consent.js:consentCookie", "all"), r"^(consent|cdn_consent)=")
        self.assertIsNone(call("consent.js:readConsent", "cdn_consent=all"))


if __name__ == "__main__":
    unittest.main()
