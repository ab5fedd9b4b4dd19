"""Journal line encoding: a short tag plus the event's fields."""

from __future__ import annotations

import dataclasses
import json

from stockroom.events import ItemReceived, ItemShipped, StockAdjusted

TAGS: dict[str, type] = {
    "rcv": ItemReceived,
    "shp": ItemShipped,
    "adj": StockAdjusted,
}
_TAG_OF = {cls: tag for tag, cls in TAGS.items()}


class CodecError(ValueError):
    """A line is not a journal entry this version understands."""


def encode(event: object) -> str:
    try:
        tag = _TAG_OF[type(event)]
    except KeyError:
        raise CodecError(f"no journal tag for {type(event).__name__}") from None
    return json.dumps({"t": tag, **dataclasses.asdict(event)}, sort_keys=True)


def decode(line: str) -> object | None:
    """Return the event on `line`, or None for an entry written by a newer version."""
    try:
        raw = json.loads(line)
    except json.JSONDecodeError as error:
        raise CodecError(f"not JSON: {error.msg}") from None
    cls = TAGS.get(raw.pop("t", None))
    if cls is None:
        return None
    return cls(**raw)
