"""Channels alertfan knows, and the route file format."""

from __future__ import annotations

import json
from pathlib import Path

CHANNELS = ("email", "slack", "sms")
"""Channel names a route may use; a route naming any other channel is skipped."""


def load_routes(path: Path) -> dict[str, list[str]]:
    """Severity -> channel names, from a JSON route file; unknown channels are dropped."""
    raw = json.loads(path.read_text(encoding="utf-8"))
    return {severity: [c for c in channels if c in CHANNELS] for severity, channels in raw.items()}
