"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call


class MailBacktickTest(unittest.TestCase):
    def test_backticks_are_escaped_for_the_mail_renderer(self) -> None:
        self.assertEqual(call("mail.js:escapeForMail", "run `rm`"), "run &#96;rm&#96;")
        self.assertRegex(call("mail.js:invoiceMail", {"customer": "x", "amount": "1", "note": "`a`"}), r'title="&#96;a&#96;"')

    def test_the_usual_escapes_are_unchanged(self) -> None:
        self.assertEqual(call("mail.js:escapeForMail", "<&>"), "&lt;&amp;&gt;")
        self.assertEqual(call("mail.js:escapeForMail", 42), "42")


if __name__ == "__main__":
    unittest.main()
