"""Judged apart: the job configuration code runs in the jail; the seconds come back here."""

import unittest

from jail import call


def timeout_of(block: str):
    return call("batch.jobconf:timeout_seconds", call("batch.jobconf:parse_block", block))


class DefaultTimeoutTests(unittest.TestCase):
    def test_job_without_timeout_gets_the_platform_default(self):
        self.assertEqual(timeout_of("name: compact-logs\n"), 2700)

    def test_explicit_timeout_still_wins(self):
        self.assertEqual(timeout_of("name: a\ntimeout: 10m\n"), 600)


if __name__ == "__main__":
    unittest.main()
