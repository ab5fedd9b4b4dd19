import io
import json
import tempfile
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path

from auditq.cli import main

NOW = datetime(2024, 5, 2, 12, 0, tzinfo=timezone.utc)


def line(hours_ago: float, action: str) -> str:
    at = (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({"at": at, "actor": "jdoe", "action": action, "target": "t"}) + "\n"


class SinceWindowTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.log = Path(self._tmp.name) / "audit.jsonl"
        hours = [0.5, 2.5, 35.5, 36.5, 50, 80]
        self.log.write_text("".join(line(h, f"a{h}") for h in hours))

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def actions(self, *extra: str) -> list[str]:
        out = io.StringIO()
        self.assertEqual(main(["search", "--log", str(self.log), *extra], now=NOW, out=out), 0)
        return [json.loads(r)["action"] for r in out.getvalue().splitlines()]

    def test_default_window_is_36_hours(self) -> None:
        self.assertEqual(self.actions(), ["a0.5", "a2.5", "a35.5"])

    def test_explicit_windows(self) -> None:
        self.assertEqual(self.actions("--since", "90m"), ["a0.5"])
        self.assertEqual(self.actions("--since", "12h"), ["a0.5", "a2.5"])
        self.assertEqual(self.actions("--since", "3d"), ["a0.5", "a2.5", "a35.5", "a36.5", "a50"])


if __name__ == "__main__":
    unittest.main()
