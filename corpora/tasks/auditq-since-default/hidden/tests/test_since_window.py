"""Judged apart: auditq runs in the jail over a log written here; its output is compared here."""

import json
import os
import unittest
from datetime import datetime, timedelta, timezone

from jail import call, folder, get, new

NOW = datetime(2024, 5, 2, 12, 0, tzinfo=timezone.utc)


def line(hours_ago: float, action: str) -> str:
    at = (NOW - timedelta(hours=hours_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")
    return json.dumps({"at": at, "actor": "jdoe", "action": action, "target": "t"}) + "\n"


class SinceWindowTest(unittest.TestCase):
    def setUp(self) -> None:
        self.log = os.path.join(folder(), "audit.jsonl")
        hours = [0.5, 2.5, 35.5, 36.5, 50, 80]
        with open(self.log, "w", encoding="utf-8") as handle:
            handle.write("".join(line(h, f"a{h}") for h in hours))

    def actions(self, *extra: str) -> list[str]:
        out = new("io:StringIO")
        now = new("datetime:datetime", 2024, 5, 2, 12, 0, tzinfo=get("datetime:timezone.utc"))
        self.assertEqual(call("auditq.cli:main", ["search", "--log", self.log, *extra], now=now, out=out), 0)
        return [json.loads(r)["action"] for r in call(get(out, "getvalue")).splitlines()]

    def test_default_window_is_36_hours(self) -> None:
        self.assertEqual(self.actions(), ["a0.5", "a2.5", "a35.5"])

    def test_explicit_windows(self) -> None:
        self.assertEqual(self.actions("--since", "90m"), ["a0.5"])
        self.assertEqual(self.actions("--since", "12h"), ["a0.5", "a2.5"])
        self.assertEqual(self.actions("--since", "3d"), ["a0.5", "a2.5", "a35.5", "a36.5", "a50"])


if __name__ == "__main__":
    unittest.main()
