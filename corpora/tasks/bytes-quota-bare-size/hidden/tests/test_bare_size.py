"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call, get


class BareSizeTest(unittest.TestCase):
    def test_a_size_with_no_unit_is_read_in_the_quota_files_unit(self) -> None:
        limit = get(call("quota.js:parseQuota", "alice 300\nbob 1.5\ncarol 20b\n"), "get")
        self.assertEqual(call(limit, "alice"), 300 * 1024 * 1024)
        self.assertEqual(call(limit, "bob"), 1572864)
        self.assertEqual(call(limit, "carol"), 20)

    def test_sizes_with_units_are_unchanged(self) -> None:
        limit = get(call("quota.js:parseQuota", "dave 2GB\nerin 64kb\n"), "get")
        self.assertEqual(call(limit, "dave"), 2 * 1024 ** 3)
        self.assertEqual(call(limit, "erin"), 64 * 1024)


if __name__ == "__main__":
    unittest.main()
