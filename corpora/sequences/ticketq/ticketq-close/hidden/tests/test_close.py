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


class CloseTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.db = Path(self._tmp.name) / "t.json"
        self.db.write_text(json.dumps([{"id": 42, "title": "Printer on fire", "status": "open"},
                                       {"id": 7, "title": "Wifi down", "status": "closed"}]))

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def test_close_confirms_with_the_ticket_id(self) -> None:
        self.assertEqual(run(self.db, "close", "42").strip(), "closed TQ-000042", FEEDBACK)
        self.assertEqual(json.loads(self.db.read_text())[0]["status"], "closed")


if __name__ == "__main__":
    unittest.main()
