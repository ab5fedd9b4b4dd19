"""Parsing durations such as `45s`, `2h` or `1h30m`."""

from __future__ import annotations

import re

UNIT_SECONDS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_PART = re.compile(r"(\d+)([dhms])")


def parse_duration(text: str) -> int:
    """Return the number of seconds in `text`; raise ValueError for anything malformed."""
    compact = text.strip().lower()
    if not compact or _PART.sub("", compact):
        raise ValueError(f"not a duration: {text!r}")
    seconds = 0
    for number, unit in _PART.findall(compact):
        seconds += int(number) * UNIT_SECONDS[unit]
    if seconds <= 0:
        raise ValueError(f"duration must be positive: {text!r}")
    return seconds
