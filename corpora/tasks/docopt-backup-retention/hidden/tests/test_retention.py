"""Judged apart: the backups CLI runs in the jail over dumps made here; what it prints comes back
here and is counted here."""

import datetime as dt
import os
import unittest

from jail import call_printing, folder


def _prune(*extra):
    target = folder()
    today = dt.date.today()
    for age in (10, 34, 36, 60):
        day = today - dt.timedelta(days=age)
        open(os.path.join(target, f"db-{day:%Y%m%d}.dump"), "w").close()
    code, printed = call_printing("backups.cli:main", ["prune", f"--target={target}", "--dry-run", *extra])
    return code, len(printed.splitlines())


class RetentionTests(unittest.TestCase):
    def test_default_retention_follows_the_policy(self):
        self.assertEqual(_prune(), (0, 2))

    def test_retention_option(self):
        self.assertEqual(_prune("--retention=5"), (0, 4))
        self.assertEqual(_prune("--retention=50"), (0, 1))


if __name__ == "__main__":
    unittest.main()
