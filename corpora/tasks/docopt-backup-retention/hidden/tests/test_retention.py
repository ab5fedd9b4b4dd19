import datetime as dt
import io
import os
import tempfile
import unittest
from contextlib import redirect_stdout

from backups.cli import main


def _prune(*extra):
    with tempfile.TemporaryDirectory() as folder:
        today = dt.date.today()
        for age in (10, 34, 36, 60):
            day = today - dt.timedelta(days=age)
            open(os.path.join(folder, f"db-{day:%Y%m%d}.dump"), "w").close()
        out = io.StringIO()
        with redirect_stdout(out):
            code = main(["prune", f"--target={folder}", "--dry-run", *extra])
        return code, len(out.getvalue().splitlines())


class RetentionTests(unittest.TestCase):
    def test_default_retention_follows_the_policy(self):
        self.assertEqual(_prune(), (0, 2))

    def test_retention_option(self):
        self.assertEqual(_prune("--retention=5"), (0, 4))
        self.assertEqual(_prune("--retention=50"), (0, 1))


if __name__ == "__main__":
    unittest.main()
