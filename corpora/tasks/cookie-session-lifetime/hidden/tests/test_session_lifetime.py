"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import re
import unittest

from jail import call


class SessionLifetimeTest(unittest.TestCase):
    def test_the_session_cookie_expires_after_the_approved_lifetime(self) -> None:
        header = call("session.js:sessionCookie", "abc123")
        match = re.search(r"Max-Age=(\d+)", header)
        self.assertIsNotNone(match, header)
        self.assertEqual(int(match.group(1)), 8 * 3600)
        self.assertNotRegex(header, r"Expires=")

    def test_other_attributes_stay(self) -> None:
        self.assertRegex(call("session.js:sessionCookie", "t", {"secure": False}), r"HttpOnly")
        self.assertNotRegex(call("session.js:sessionCookie", "t", {"secure": False}), r"Secure")


if __name__ == "__main__":
    unittest.main()
