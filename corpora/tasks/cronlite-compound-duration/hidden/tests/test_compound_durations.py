"""Judged apart: cronlite runs in the jail; this test compares its answers here."""

import unittest

from jail import call, const, get, new


def parse_duration(text):
    return call("cronlite:parse_duration", text)


class CompoundDurationTest(unittest.TestCase):
    def test_parts_add_up(self) -> None:
        self.assertEqual(parse_duration("1h30m"), 5400)
        self.assertEqual(parse_duration("2d4h"), 187200)
        self.assertEqual(parse_duration("1m30s"), 90)
        self.assertEqual(parse_duration("1d1h1m1s"), 90061)

    def test_zero_parts_are_fine_when_the_total_is_positive(self) -> None:
        self.assertEqual(parse_duration("0h15m"), 900)

    def test_scheduler_uses_the_full_interval(self) -> None:
        scheduler = new("cronlite:Scheduler", clock=const(0.0))
        job = call(get(scheduler, "every"), "1h30m", const(None))
        self.assertEqual(get(job, "interval"), 5400)


if __name__ == "__main__":
    unittest.main()
