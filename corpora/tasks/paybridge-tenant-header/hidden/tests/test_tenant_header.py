"""Judged apart: the Node module runs in the jail (harness/shim.cjs); its answers come back as JSON
and are compared here with literals (never asking the jail to compare)."""

import unittest

from jail import call, get, new, recorder, value


def header(request: dict, name: str) -> object:
    headers = request.get("headers") or {}
    return next((v for k, v in headers.items() if k.lower() == name), None)


class TenantHeaderTest(unittest.TestCase):
    def test_every_request_is_scoped_to_the_configured_tenant_at_the_gateway(self) -> None:
        calls = recorder(returns={"status": 200, "body": {}})
        client = new("lib/client:BillingClient", {"baseUrl": "https://gw.test/billing/v2", "token": "t", "tenant": "acme-eu",
                                                  "transport": get(calls, "send")})
        call(get(client, "getInvoice"), "inv_1")
        call(get(client, "listInvoices"), {"status": "open"})
        call(get(client, "refund"), "inv_1", 100, "goodwill")
        requests = [c["args"][0] for c in value(calls)]
        self.assertEqual(len(requests), 3)
        for request in requests:
            self.assertEqual(header(request, "x-org-scope"), "acme-eu")


if __name__ == "__main__":
    unittest.main()
