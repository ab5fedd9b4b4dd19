"""The provenance marker that wraps delivered memory, and its parser.

A delivered block looks like

    <!-- recalled-memory channel=prompt-time ids=1f2e3d4c5b6a7980,0a1b2c3d4e5f6071 -->
    ...recalled memories...
    <!-- /recalled-memory -->

The marker holds no quote or backslash, so it survives JSON string escaping unchanged and can
be found in a raw transcript file as well as in decoded text. Only complete blocks (opening
marker, then a closing marker) count as delivered. The wording is neutral on purpose: it is what
any memory system's hook might print, and names neither memtrial nor an arm.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

CHANNELS = ("prompt-time", "session-start")
"""Delivery channels: retrieval at each prompt, and the briefing at session start."""

_ID = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
TAG = "recalled-memory"
"""The marker's name: neutral, the same in every arm (an agent must not learn it is measured)."""
_OPEN = re.compile(rf"<!-- {TAG} channel=([a-z][a-z0-9-]{{0,31}}) ids=({_ID}(?:,{_ID})*) -->")
_CLOSE = f"<!-- /{TAG} -->"


def open_marker(channel: str, ids: Sequence[str]) -> str:
    """The opening marker for `channel` naming `ids`; raises ValueError for an unknown channel or bad id."""
    if channel not in CHANNELS:
        raise ValueError(f"channel: {channel!r} is not one of {', '.join(CHANNELS)}")
    if not ids or not all(re.fullmatch(_ID, i) for i in ids):
        raise ValueError(f"ids: need at least one id of letters, digits, '.', '_', ':' or '-', got {list(ids)!r}")
    return f"<!-- {TAG} channel={channel} ids={','.join(ids)} -->"


def wrap_block(channel: str, ids: Sequence[str], body: str) -> str:
    """`body` between the opening marker and the closing marker."""
    return f"{open_marker(channel, ids)}\n{body.strip()}\n{_CLOSE}"


def find_provenance(text: str) -> list[tuple[str, tuple[str, ...]]]:
    """Every complete delivered block in `text`, in order, as (channel, ids)."""
    found = []
    matches = list(_OPEN.finditer(text))
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        if _CLOSE in text[match.end() : end]:
            found.append((match.group(1), tuple(match.group(2).split(","))))
    return found
