"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call

DAY = 24 * 3600 * 1000


def ms(text: str) -> object:
    return call(".:", text)


class RotaMonthTest(unittest.TestCase):
    def test_a_month_in_a_rota_config_is_four_whole_weeks(self) -> None:
        self.assertEqual(ms("1mo"), 28 * DAY)
        self.assertEqual(ms("1 month"), 28 * DAY)
        self.assertEqual(ms("3 months"), 3 * 28 * DAY)
        self.assertEqual(ms("2MO"), 56 * DAY)

    def test_months_do_not_disturb_the_other_units(self) -> None:
        self.assertEqual(ms("1m"), 60000)
        self.assertEqual(ms("1 minute"), 60000)
        self.assertEqual(ms("1y"), 365.25 * DAY)
        self.assertEqual(ms("2w"), 14 * DAY)


if __name__ == "__main__":
    unittest.main()
