import unittest
from pathlib import Path


def read_answer() -> dict[str, str]:
    pairs = {}
    for line in Path("answer.txt").read_text(encoding="utf-8").splitlines():
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
