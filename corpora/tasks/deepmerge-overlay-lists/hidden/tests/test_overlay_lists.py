"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call


class OverlayListsTest(unittest.TestCase):
    def test_a_list_in_the_overlay_replaces_the_base_list(self) -> None:
        merged = call("config.js:loadConfig", {"allowedHosts": ["localhost", "staging.internal"], "tls": {"ciphers": ["a", "b"]}},
                      {"allowedHosts": ["portal.example.com"], "tls": {"ciphers": ["b"]}})
        self.assertEqual(merged["allowedHosts"], ["portal.example.com"])
        self.assertEqual(merged["tls"]["ciphers"], ["b"])

    def test_a_list_the_overlay_does_not_name_is_kept(self) -> None:
        self.assertEqual(call("config.js:loadConfig", {"hosts": ["a"]}, {"debug": True})["hosts"], ["a"])


if __name__ == "__main__":
    unittest.main()
