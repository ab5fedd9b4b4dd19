"""Judged apart: the command runs in the jail (node over the workspace); its status and output come
back here and are compared with literals."""

import unittest

from jail import WORKSPACE, run


def rotate(*args: str) -> tuple[int, str, str]:
    return run(["node", f"{WORKSPACE}/bin/rotate.js", *args])


class UnknownOptionTest(unittest.TestCase):
    def test_an_unknown_option_is_a_usage_error_and_nothing_is_rotated(self) -> None:
        status, out, err = rotate("--dryrun", "--keep", "1", "a", "b")
        self.assertEqual(status, 64)
        self.assertEqual(out, "")
        self.assertRegex(err, r"dryrun")

    def test_known_options_still_work(self) -> None:
        self.assertEqual(rotate("--dry-run", "--dir", "/tmp", "--keep", "1", "a", "b")[0], 0)
        self.assertEqual(rotate("--help")[0], 0)


if __name__ == "__main__":
    unittest.main()
