"""Judged apart: shiplog and the project's own export helper run in the jail; the printed lines come
back here and are compared here."""

import unittest

from jail import call, folder, get, new


class CsvExportTest(unittest.TestCase):
    def run_cli(self, *args: str) -> list[str]:
        export = call("builtins:str", call("tests.helpers:write_export", new("pathlib:Path", folder())))
        out = new("io:StringIO")
        self.assertEqual(call("shiplog.cli:main", [args[0], export, *args[1:]], stdout=out), 0)
        return call(get(out, "getvalue")).splitlines()

    def test_list_csv_for_the_ops_sheet(self) -> None:
        lines = self.run_cli("list", "--csv")
        self.assertEqual(lines[0], "id;carrier;shipped;weight_kg;destination")
        self.assertEqual(lines[1], "S-1;ups;2024-06-01;10,0;Graz")

    def test_stats_csv_the_same_way(self) -> None:
        lines = self.run_cli("stats", "--csv")
        self.assertEqual(lines, ["carrier;shipments;total_weight_kg", "dhl;2;3,8", "ups;1;10,0"])

    def test_table_stays_the_default(self) -> None:
        self.assertTrue(self.run_cli("stats")[0].startswith("carrier "))


if __name__ == "__main__":
    unittest.main()
