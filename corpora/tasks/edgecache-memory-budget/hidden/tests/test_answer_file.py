"""Judged apart: the answer file is read in the jail (the workspace is not in the judge's view)."""

import os
import unittest

from jail import run


def read_answer() -> dict[str, str]:
    status, text, _ = run(["cat", os.path.join(os.environ["JAIL_WORKSPACE"], "answer.txt")])
    pairs = {}
    for line in (text if status == 0 else "").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            pairs[key.strip()] = value.strip()
    return pairs


class AnswerFileTest(unittest.TestCase):
    def test_edge_memory_budget(self) -> None:
        answer = read_answer()
        self.assertIn(answer.get("shards"), {"6"})
        self.assertIn(answer.get("total_mb"), {"648", "648.0"})


if __name__ == "__main__":
    unittest.main()
