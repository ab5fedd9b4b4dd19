"""Judged apart: the parser runs in the jail; this test compares its answers here."""

import unittest

from jail import call


class EqualsInValuesTest(unittest.TestCase):
    def test_values_keep_their_equals_signs(self) -> None:
        text = 'DATABASE_URL=postgres://app@db/main?sslmode=require\nTOKEN="abc==="\nEMPTY=\nQUERY=a=1&b=2 # tracking\n'
        self.assertEqual(call("envload.parser:parse", text), {
            "DATABASE_URL": "postgres://app@db/main?sslmode=require",
            "TOKEN": "abc===",
            "EMPTY": "",
            "QUERY": "a=1&b=2",
        })


if __name__ == "__main__":
    unittest.main()
