import io
import tempfile
import unittest
from pathlib import Path

from mailq.cli import main
from tests.helpers import ScriptedRelay, enqueue


class DeferredExitTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.queue = Path(self._tmp.name) / "queue"
        self.queue.mkdir()
        self.stderr = io.StringIO()

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def flush(self, relay: ScriptedRelay) -> int:
        return main(["flush", "--queue", str(self.queue), "--pickup", "/nonexistent"], relay_factory=relay, stderr=self.stderr)

    def test_a_deferred_message_exits_13_and_stays_queued(self) -> None:
        enqueue(self.queue, "a", "ops@example.org")
        enqueue(self.queue, "b", "sales@greylist.test")
        self.assertEqual(self.flush(ScriptedRelay(deferred={"greylist.test"})), 13)
        self.assertTrue((self.queue / "b.json").is_file())
        self.assertIn("1", self.stderr.getvalue())

    def test_rejected_still_wins_over_deferred(self) -> None:
        enqueue(self.queue, "a", "x@bounce.test")
        enqueue(self.queue, "b", "y@greylist.test")
        self.assertEqual(self.flush(ScriptedRelay(deferred={"greylist.test"}, rejected={"bounce.test"})), 1)

    def test_everything_sent_still_exits_0(self) -> None:
        enqueue(self.queue, "a", "ops@example.org")
        self.assertEqual(self.flush(ScriptedRelay()), 0)


if __name__ == "__main__":
    unittest.main()
