"""Judged apart: mailq and the project's own test helpers run in the jail over a queue folder both
sides share; statuses, stderr and what stayed queued are compared here."""

import os
import unittest

from jail import call, folder, get, new


class DeferredExitTest(unittest.TestCase):
    def setUp(self) -> None:
        self.queue = os.path.join(folder(), "queue")
        os.mkdir(self.queue)
        os.chmod(self.queue, 0o777)
        self.stderr = new("io:StringIO")

    def enqueue(self, name: str, to: str) -> None:
        call("tests.helpers:enqueue", new("pathlib:Path", self.queue), name, to)

    def flush(self, **relay: list[str]) -> int:
        argv = ["flush", "--queue", self.queue, "--pickup", "/nonexistent"]
        return call("mailq.cli:main", argv, relay_factory=new("tests.helpers:ScriptedRelay", **relay), stderr=self.stderr)

    def test_a_deferred_message_exits_13_and_stays_queued(self) -> None:
        self.enqueue("a", "ops@example.org")
        self.enqueue("b", "sales@greylist.test")
        self.assertEqual(self.flush(deferred=["greylist.test"]), 13)
        self.assertTrue(os.path.isfile(os.path.join(self.queue, "b.json")))
        self.assertIn("1", call(get(self.stderr, "getvalue")))

    def test_rejected_still_wins_over_deferred(self) -> None:
        self.enqueue("a", "x@bounce.test")
        self.enqueue("b", "y@greylist.test")
        self.assertEqual(self.flush(deferred=["greylist.test"], rejected=["bounce.test"]), 1)

    def test_everything_sent_still_exits_0(self) -> None:
        self.enqueue("a", "ops@example.org")
        self.assertEqual(self.flush(), 0)


if __name__ == "__main__":
    unittest.main()
