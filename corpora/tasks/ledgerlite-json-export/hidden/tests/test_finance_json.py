import io
import json
import re
import tempfile
import unittest
from collections import Counter
from pathlib import Path

from ledgerlite.cli import main
from tests.samples import INVOICES, LEDGER

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
        self._tmp = tempfile.TemporaryDirectory()
        root = Path(self._tmp.name)
        self.ledger = root / "ledger.csv"
        self.ledger.write_text(LEDGER)
        self.invoices = root / "invoices.csv"
        self.invoices.write_text(INVOICES)

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def document(self, *argv: str):
        out = io.StringIO()
        self.assertEqual(main([*argv, "--json"], out=out), 0)
        return json.loads(out.getvalue())

    def assert_money_in_cents(self, doc, expected: list[int]) -> None:
        scalars = list(walk(doc))
        for key, value in scalars:
            self.assertNotIsInstance(value, float, f"{key} is a float")
            if isinstance(value, str):
                self.assertIsNone(AMOUNT_TEXT.match(value), f"{key} holds an amount as text")
        in_cents = Counter(v for k, v in scalars if isinstance(k, str) and k.endswith("_cents") and type(v) is int)
        missing = Counter(expected) - in_cents
        self.assertFalse(missing, f"amounts not found as integer cents: {sorted(missing)}")

    def test_balance_json(self) -> None:
        self.assert_money_in_cents(self.document("balance", "--ledger", str(self.ledger)), [123991, 24010, 1999])

    def test_aging_json(self) -> None:
        doc = self.document("aging", "--invoices", str(self.invoices), "--as-of", "2024-06-30")
        self.assert_money_in_cents(doc, [30000, 12050, 7525, 8000])

    def test_tables_are_still_the_default(self) -> None:
        out = io.StringIO()
        main(["balance", "--ledger", str(self.ledger)], out=out)
        self.assertTrue(out.getvalue().startswith("account"))


if __name__ == "__main__":
    unittest.main()
