"""Judged apart: tabmill runs in the jail over a file written here; its output is compared here."""

import os
import unittest

from jail import call, folder, get, new


class DelimiterTest(unittest.TestCase):
    def setUp(self) -> None:
        self.csv = os.path.join(folder(), "finance.csv")
        with open(self.csv, "w", encoding="utf-8") as handle:
            handle.write("konto;betrag;notiz\n4400;12,50;Miete, Mai\n4410;7,00;Strom\n")

    def show(self, *argv: str) -> list[str]:
        out, err = new("io:StringIO"), new("io:StringIO")
        status = call("tabmill.cli:main", ["show", self.csv, *argv], out=out, err=err)
        self.assertEqual(status, 0, call(get(err, "getvalue")))
        return call(get(out, "getvalue")).splitlines()

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
