import unittest

from contest.board import Entry, Leaderboard


class TieBreakTests(unittest.TestCase):
    def test_equal_scores_rank_by_the_contest_rule(self):
        board = Leaderboard()
        board.submit(Entry("zebras", 50, 200.0))
        board.submit(Entry("ants", 50, 300.0))
        board.submit(Entry("moles", 50, 100.0))
        board.submit(Entry("yaks", 90, 400.0))
        self.assertEqual(board.top(4), ["yaks", "moles", "zebras", "ants"])


if __name__ == "__main__":
    unittest.main()
