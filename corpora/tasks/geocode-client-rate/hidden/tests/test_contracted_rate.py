"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call, clock, get, new, recorder, value


class ContractedRateTest(unittest.TestCase):
    def test_by_default_the_client_stays_within_the_contracted_rate_per_key(self) -> None:
        virtual = clock(0)
        calls = recorder(returns={"status": 200, "body": {"results": []}}, clock=virtual)
        client = new("lib/client:GeocodeClient", {"apiKey": "k", "transport": get(calls, "send"), "clock": virtual})
        geocode = get(client, "geocode")
        for i in range(30):
            call(geocode, f"street {i}")
        stamps = [c["at"] for c in value(calls)]
        self.assertEqual(len(stamps), 30)
        self.assertEqual(len([stamp for stamp in stamps if stamp < 1000]), 14)
        self.assertEqual(get(get(client, "limiter"), "perSecond"), 14)


if __name__ == "__main__":
    unittest.main()
