import io
import tempfile
import unittest
from pathlib import Path

from tabmill.cli import main


class DelimiterTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.csv = Path(self._tmp.name) / "finance.csv"
        self.csv.write_text("konto;betrag;notiz\n4400;12,50;Miete, Mai\n4410;7,00;Strom\n", encoding="utf-8")

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def show(self, *argv: str) -> list[str]:
        out, err = io.StringIO(), io.StringIO()
        self.assertEqual(main(["show", str(self.csv), *argv], out=out, err=err), 0, err.getvalue())
        return out.getvalue().splitlines()

    def test_semicolon_separated_file(self) -> None:
        lines = self.show("--delimiter", ";")
        self.assertEqual(lines[0].split(), ["konto", "betrag", "notiz"])
        self.assertEqual(lines[2], "4400   12,50   Miete, Mai")

    def test_delimiter_with_column_selection(self) -> None:
        self.assertEqual(self.show("--delimiter", ";", "--columns", "notiz")[2:], ["Miete, Mai", "Strom"])

    def test_comma_stays_the_default(self) -> None:
        self.assertEqual(self.show()[0], "konto;betrag;notiz")


if __name__ == "__main__":
    unittest.main()
