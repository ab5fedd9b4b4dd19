"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call, const, get, new


class AuditFormatTest(unittest.TestCase):
    def setUp(self) -> None:
        self.sink = call("src:sinks.memorySink")
        clock = const(new("globalThis:Date", "2024-03-01T08:30:00.000Z"))
        self.logger = call("src:createLogger", {"format": "audit", "sink": self.sink, "clock": clock})

    def test_audit_lines_use_the_ingest_layout(self) -> None:
        call(get(self.logger, "info"), "role.grant", {"actor": "jdoe", "target": "acct-42"})
        self.assertEqual(get(self.sink, "lines")[0], "AUD1|2024-03-01T08:30:00.000Z|jdoe|role.grant|acct-42")

    def test_missing_audit_fields_are_written_as_a_dash(self) -> None:
        call(get(self.logger, "warn"), "login.failed", {"actor": "mallory"})
        self.assertEqual(get(self.sink, "lines")[0], "AUD1|2024-03-01T08:30:00.000Z|mallory|login.failed|-")


if __name__ == "__main__":
    unittest.main()
