import io
import tempfile
import unittest
from pathlib import Path

from logship.cli import main
from tests.helpers import ScriptedTransport, write_spool


class PartialDeliveryTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.root = Path(self._tmp.name)
        self.spool = self.root / "spool"
        self.spool.mkdir()
        self.stderr = io.StringIO()

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def send(self, transport: ScriptedTransport, *extra: str) -> int:
        argv = ["send", "--spool", str(self.spool), "--collector", str(self.root / "out"), *extra]
        return main(argv, transport_factory=transport, stderr=self.stderr)

    def test_partial_acknowledgement_exits_17(self) -> None:
        write_spool(self.spool, "a.ndjson", [{"msg": "ok"}, {"msg": "bad"}, {"msg": "ok"}])
        self.assertEqual(self.send(ScriptedTransport(reject={"bad"})), 17)
        self.assertIn("1", self.stderr.getvalue())

    def test_full_success_still_exits_0(self) -> None:
        write_spool(self.spool, "a.ndjson", [{"msg": "ok"}])
        self.assertEqual(self.send(ScriptedTransport()), 0)

    def test_total_failure_still_exits_1(self) -> None:
        write_spool(self.spool, "a.ndjson", [{"msg": "bad"}])
        self.assertEqual(self.send(ScriptedTransport(reject={"bad"})), 1)


if __name__ == "__main__":
    unittest.main()
