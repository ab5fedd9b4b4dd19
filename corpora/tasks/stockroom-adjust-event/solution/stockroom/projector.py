"""Stock levels from a stream of events."""

from __future__ import annotations

from typing import Callable, Iterable

from stockroom.events import ItemReceived, ItemShipped, StockAdjusted

Levels = dict[str, int]


def _received(levels: Levels, event: ItemReceived) -> None:
    levels[event.sku] = levels.get(event.sku, 0) + event.qty


def _shipped(levels: Levels, event: ItemShipped) -> None:
    levels[event.sku] = levels.get(event.sku, 0) - event.qty


def _adjusted(levels: Levels, event: StockAdjusted) -> None:
    levels[event.sku] = levels.get(event.sku, 0) + event.delta


HANDLERS: dict[type, Callable[[Levels, object], None]] = {
    ItemReceived: _received,
    ItemShipped: _shipped,
    StockAdjusted: _adjusted,
}


def project(events: Iterable[object]) -> Levels:
    levels: Levels = {}
    for event in events:
        handler = HANDLERS.get(type(event))
        if handler is not None:
            handler(levels, event)
    return levels
