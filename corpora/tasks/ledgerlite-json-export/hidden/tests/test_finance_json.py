"""Judged apart: ledgerlite runs in the jail over files written here (from the project's own samples,
read through the jail); the JSON it prints comes back here and is checked here."""

import json
import os
import re
import unittest
from collections import Counter

from jail import call, folder, get, new

AMOUNT_TEXT = re.compile(r"^-?[\d,]+\.\d+$")


def walk(node, key=None):
    """Yield (key, value) for every scalar in a JSON document."""
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, k)
    elif isinstance(node, list):
        for v in node:
            yield from walk(v, key)
    else:
        yield key, node


class FinanceJsonTest(unittest.TestCase):
    def setUp(self) -> None:
        root = folder()
        self.ledger = os.path.join(root, "ledger.csv")
        self.invoices = os.path.join(root, "invoices.csv")
        for path, name in ((self.ledger, "LEDGER"), (self.invoices, "INVOICES")):
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(get(f"tests.samples:{name}"))

    def main(self, argv: list[str]) -> tuple[int, str]:
        out = new("io:StringIO")
        status = call("ledgerlite.cli:main", argv, out=out)
        return status, call(get(out, "getvalue"))

    def document(self, *argv: str):
        status, text = self.main([*argv, "--json"])
        self.assertEqual(status, 0)
        return json.loads(text)

    def assert_money_in_cents(self, doc, expected: list[int], totals: tuple[int, ...] = ()) -> None:
        """Every expected amount appears as integer cents under a `*_cents` key, and no other non-zero
        integer cents does except the named totals (a document listing every integer passes nothing)."""
        scalars = list(walk(doc))
        for key, value in scalars:
            self.assertNotIsInstance(value, float, f"{key} is a float")
            if isinstance(value, str):
                self.assertIsNone(AMOUNT_TEXT.match(value), f"{key} holds an amount as text")
        in_cents = Counter(v for k, v in scalars if isinstance(k, str) and k.endswith("_cents") and type(v) is int)
        missing = Counter(expected) - in_cents
        self.assertFalse(missing, f"amounts not found as integer cents: {sorted(missing)}")
        extra = sorted(set(in_cents) - set(expected) - set(totals) - {0, sum(expected)})
        self.assertFalse(extra, f"integer cents the ledger does not hold: {extra[:10]}")

    def test_balance_json(self) -> None:
        self.assert_money_in_cents(self.document("balance", "--ledger", self.ledger), [123991, 24010, 1999])

    def test_aging_json(self) -> None:
        doc = self.document("aging", "--invoices", self.invoices, "--as-of", "2024-06-30")
        self.assert_money_in_cents(doc, [30000, 12050, 7525, 8000], totals=(30000 + 12050,))

    def test_tables_are_still_the_default(self) -> None:
        _, text = self.main(["balance", "--ledger", self.ledger])
        self.assertTrue(text.startswith("account"))


if __name__ == "__main__":
    unittest.main()
