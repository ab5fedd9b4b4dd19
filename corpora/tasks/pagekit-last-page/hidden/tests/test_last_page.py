"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call

ITEMS = list(range(45))


class LastPageTest(unittest.TestCase):
    def test_a_partial_last_page_is_counted_and_reachable(self) -> None:
        self.assertEqual(call("lib/paginate:paginate", ITEMS, {"size": "20"})["pages"], 3)
        self.assertIs(call("lib/paginate:paginate", ITEMS, {"page": "2", "size": "20"})["hasNext"], True)
        last = call("lib/paginate:paginate", ITEMS, {"page": "3", "size": "20"})
        self.assertEqual(last["items"], [40, 41, 42, 43, 44])
        self.assertIs(last["hasNext"], False)

    def test_fewer_items_than_one_page_is_one_page_none_is_zero(self) -> None:
        self.assertEqual(call("lib/paginate:paginate", [1, 2, 3])["pages"], 1)
        self.assertEqual(call("lib/paginate:paginate", [])["pages"], 0)


if __name__ == "__main__":
    unittest.main()
