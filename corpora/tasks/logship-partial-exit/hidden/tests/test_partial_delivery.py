"""Judged apart: logship and the project's own test helpers run in the jail; statuses and stderr
come back here and are compared here."""

import os
import unittest

from jail import call, folder, get, new


class PartialDeliveryTest(unittest.TestCase):
    def setUp(self) -> None:
        self.root = folder()
        self.spool = os.path.join(self.root, "spool")
        os.mkdir(self.spool)
        os.chmod(self.spool, 0o777)
        self.stderr = new("io:StringIO")

    def write_spool(self, payloads: list[dict]) -> None:
        call("tests.helpers:write_spool", new("pathlib:Path", self.spool), "a.ndjson", payloads)

    def send(self, transport) -> int:
        argv = ["send", "--spool", self.spool, "--collector", os.path.join(self.root, "out")]
        return call("logship.cli:main", argv, transport_factory=transport, stderr=self.stderr)

    def test_partial_acknowledgement_exits_17(self) -> None:
        self.write_spool([{"msg": "ok"}, {"msg": "bad"}, {"msg": "ok"}])
        self.assertEqual(self.send(new("tests.helpers:ScriptedTransport", reject=["bad"])), 17)
        self.assertIn("1", call(get(self.stderr, "getvalue")))

    def test_full_success_still_exits_0(self) -> None:
        self.write_spool([{"msg": "ok"}])
        self.assertEqual(self.send(new("tests.helpers:ScriptedTransport")), 0)

    def test_total_failure_still_exits_1(self) -> None:
        self.write_spool([{"msg": "bad"}])
        self.assertEqual(self.send(new("tests.helpers:ScriptedTransport", reject=["bad"])), 1)


if __name__ == "__main__":
    unittest.main()
