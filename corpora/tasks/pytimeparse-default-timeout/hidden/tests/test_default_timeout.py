import unittest

from batch.jobconf import parse_block, timeout_seconds


class DefaultTimeoutTests(unittest.TestCase):
    def test_job_without_timeout_gets_the_platform_default(self):
        self.assertEqual(timeout_seconds(parse_block("name: compact-logs\n")), 2700)

    def test_explicit_timeout_still_wins(self):
        self.assertEqual(timeout_seconds(parse_block("name: a\ntimeout: 10m\n")), 600)


if __name__ == "__main__":
    unittest.main()
