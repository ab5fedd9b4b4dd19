"""JSON documents for finance's importer: money as integer cents."""

from __future__ import annotations

import json
from datetime import date
from decimal import ROUND_HALF_UP, Decimal

from ledgerlite.reports import BUCKETS


def to_cents(value: Decimal) -> int:
    return int((value * 100).quantize(Decimal("1"), rounding=ROUND_HALF_UP))


def _bucket_key(bucket: str) -> str:
    return {"current": "current", "90+": "over_90"}.get(bucket, "days_" + bucket.replace("-", "_")) + "_cents"


def balance_json(totals: dict[str, Decimal]) -> str:
    accounts = [{"account": a, "balance_cents": to_cents(t)} for a, t in totals.items()]
    return json.dumps({"accounts": accounts}, indent=2)


def aging_json(report: dict[str, dict[str, Decimal]], as_of: date) -> str:
    customers = []
    for customer, row in report.items():
        item = {"customer": customer}
        item.update({_bucket_key(b): to_cents(row[b]) for b in BUCKETS})
        item["total_cents"] = to_cents(sum(row.values(), Decimal("0")))
        customers.append(item)
    return json.dumps({"as_of": as_of.isoformat(), "customers": customers}, indent=2)
