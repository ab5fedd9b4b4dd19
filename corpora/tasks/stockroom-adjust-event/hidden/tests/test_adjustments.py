"""Judged apart: stockroom runs in the jail over a journal in a folder both sides share; events come
back as their type name and field values and are compared here with literals (never asking the
jail to compare)."""

import os
import unittest

from jail import call, folder, get, new


class AdjustmentTest(unittest.TestCase):
    def setUp(self) -> None:
        self.path = os.path.join(folder(), "stock.jsonl")
        self.journal = new("pathlib:Path", self.path)

    def test_adjustments_survive_the_journal(self) -> None:
        call("stockroom.journal:append", self.journal, new("stockroom.events:ItemReceived", "A", 10))
        call("stockroom.journal:append", self.journal, new("stockroom.events:StockAdjusted", "A", -3, "cycle count"))
        call("stockroom.journal:append", self.journal, new("stockroom.events:StockAdjusted", "B", 2, "found on shelf"))
        events = new("builtins:list", call("stockroom.journal:replay", self.journal))
        seen = []
        for index in range(call("builtins:len", events)):
            event = call(get(events, "__getitem__"), index)
            fields = call("dataclasses:asdict", event)
            seen.append((get(get(event, "__class__"), "__name__"), sorted(map(repr, fields.values()))))
        self.assertIn(("StockAdjusted", sorted(map(repr, ["A", -3, "cycle count"]))), seen)
        self.assertEqual(call("stockroom.projector:project", events), {"A": 7, "B": 2})

    def test_adjust_command(self) -> None:
        self.assertEqual(call("stockroom.cli:main", ["receive", "--journal", self.path, "A", "5"]), 0)
        self.assertEqual(call("stockroom.cli:main", ["adjust", "--journal", self.path, "A", "-2", "--reason", "damaged"]), 0)
        out = new("io:StringIO")
        call("stockroom.cli:main", ["levels", "--journal", self.path], out=out)
        self.assertEqual(call(get(out, "getvalue")), "A\t3\n")


if __name__ == "__main__":
    unittest.main()
