import io
import json
import tempfile
import unittest
from pathlib import Path

from ticketq.cli import main

FEEDBACK = "ticket ids are shown as TQ- plus six zero-padded digits (TQ-000042), the form the support desk searches for"


def run(db: Path, *argv: str) -> str:
    """The command's output; empty when the command does not exist yet or exits with an error."""
    out = io.StringIO()
    try:
        main([argv[0], "--db", str(db), *argv[1:]], stdout=out)
    except SystemExit:
        return ""
    return out.getvalue()


class ExportTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.db = Path(self._tmp.name) / "t.json"
        self.db.write_text(json.dumps([{"id": 42, "title": "Printer on fire", "status": "open"},
                                       {"id": 7, "title": "Wifi down", "status": "closed"}]))

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def test_export_prints_csv_ordered_by_id(self) -> None:
        lines = run(self.db, "export").strip().splitlines()
        self.assertEqual(lines[0], "id,title,status")
        self.assertEqual(lines[1:], ["TQ-000007,Wifi down,closed", "TQ-000042,Printer on fire,open"], FEEDBACK)


if __name__ == "__main__":
    unittest.main()
