import io
import tempfile
import unittest
from pathlib import Path

from stockroom import journal
from stockroom.cli import main
from stockroom.events import ItemReceived, StockAdjusted
from stockroom.projector import project


class AdjustmentTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.path = Path(self._tmp.name) / "stock.jsonl"

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def test_adjustments_survive_the_journal(self) -> None:
        journal.append(self.path, ItemReceived("A", 10))
        journal.append(self.path, StockAdjusted("A", -3, "cycle count"))
        journal.append(self.path, StockAdjusted("B", 2, "found on shelf"))
        events = list(journal.replay(self.path))
        self.assertIn(StockAdjusted("A", -3, "cycle count"), events)
        self.assertEqual(project(events), {"A": 7, "B": 2})

    def test_adjust_command(self) -> None:
        self.assertEqual(main(["receive", "--journal", str(self.path), "A", "5"]), 0)
        self.assertEqual(main(["adjust", "--journal", str(self.path), "A", "-2", "--reason", "damaged"]), 0)
        out = io.StringIO()
        main(["levels", "--journal", str(self.path)], out=out)
        self.assertEqual(out.getvalue(), "A\t3\n")


if __name__ == "__main__":
    unittest.main()
