"""Event types recorded in the journal."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ItemReceived:
    sku: str
    qty: int


@dataclass(frozen=True)
class ItemShipped:
    sku: str
    qty: int
    order: str = ""


@dataclass(frozen=True)
class StockAdjusted:
    sku: str
    delta: int
    reason: str = ""
