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
    def test_prod_retry_budget(self) -> None:
        answer = read_answer()
        self.assertEqual(answer.get("attempts"), "6")
        self.assertIn(answer.get("total_backoff_seconds"), {"60", "60.0"})


if __name__ == "__main__":
    unittest.main()
