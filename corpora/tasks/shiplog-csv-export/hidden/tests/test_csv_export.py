import io
import tempfile
import unittest
from pathlib import Path

from shiplog.cli import main
from tests.helpers import write_export


class CsvExportTest(unittest.TestCase):
    def run_cli(self, *args: str) -> list[str]:
        with tempfile.TemporaryDirectory() as tmp:
            out = io.StringIO()
            self.assertEqual(main([args[0], str(write_export(Path(tmp))), *args[1:]], stdout=out), 0)
            return out.getvalue().splitlines()

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
