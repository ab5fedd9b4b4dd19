"""Judged apart: the command runs in the jail (node over the workspace); its status and output come
back here and are compared with literals."""

import unittest

from jail import WORKSPACE, run


def semtag(*args: str) -> tuple[int, str]:
    status, out, _ = run(["node", f"{WORKSPACE}/bin/semtag.js", *args])
    return status, out.strip()


class ReleaseCandidatesTest(unittest.TestCase):
    def test_the_first_candidate_of_the_next_release(self) -> None:
        self.assertEqual(semtag("next", "v1.4.2", "--pre"), (0, "v1.4.3-cand.1"))
        self.assertEqual(semtag("next", "1.4.2", "--minor", "--pre")[1], "v1.5.0-cand.1")

    def test_the_next_candidate_of_a_candidate(self) -> None:
        self.assertEqual(semtag("next", "v1.4.3-cand.1", "--pre")[1], "v1.4.3-cand.2")
        self.assertEqual(semtag("next", "v1.4.3-cand.9", "--pre")[1], "v1.4.3-cand.10")

    def test_promoting_a_candidate_gives_the_final_release(self) -> None:
        self.assertEqual(semtag("promote", "v1.4.3-cand.2"), (0, "v1.4.3"))
        self.assertEqual(semtag("promote", "v1.4.3")[0], 2)

    def test_plain_bumps_are_unchanged(self) -> None:
        self.assertEqual(semtag("next", "v1.4.2")[1], "v1.4.3")


if __name__ == "__main__":
    unittest.main()
