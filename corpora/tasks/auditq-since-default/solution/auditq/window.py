"""Relative time windows such as `90m`, `12h` or `3d`."""

from __future__ import annotations

import argparse
import re
from datetime import timedelta

DEFAULT_WINDOW = "36h"
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def parse_window(text: str) -> timedelta:
    match = re.fullmatch(r"(\d+)([mhd])", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"not a window like 90m, 12h or 3d: {text!r}")
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
