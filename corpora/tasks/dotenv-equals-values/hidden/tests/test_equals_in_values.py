import unittest

from envload.parser import parse


class EqualsInValuesTest(unittest.TestCase):
    def test_values_keep_their_equals_signs(self) -> None:
        text = 'DATABASE_URL=postgres://app@db/main?sslmode=require\nTOKEN="abc==="\nEMPTY=\nQUERY=a=1&b=2 # tracking\n'
        self.assertEqual(parse(text), {
            "DATABASE_URL": "postgres://app@db/main?sslmode=require",
            "TOKEN": "abc===",
            "EMPTY": "",
            "QUERY": "a=1&b=2",
        })


if __name__ == "__main__":
    unittest.main()
