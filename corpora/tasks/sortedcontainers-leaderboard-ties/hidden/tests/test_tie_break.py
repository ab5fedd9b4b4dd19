"""Judged apart: the leaderboard runs in the jail; its ranking comes back here."""

import unittest

from jail import call, get, new


class TieBreakTests(unittest.TestCase):
    def test_equal_scores_rank_by_the_contest_rule(self):
        board = new("contest.board:Leaderboard")
        for team, score, at in (("zebras", 50, 200.0), ("ants", 50, 300.0), ("moles", 50, 100.0), ("yaks", 90, 400.0)):
            call(get(board, "submit"), new("contest.board:Entry", team, score, at))
        self.assertEqual(call(get(board, "top"), 4), ["yaks", "moles", "zebras", "ants"])


if __name__ == "__main__":
    unittest.main()
