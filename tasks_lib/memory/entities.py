"""Deterministic entity extraction for the graph lane.

An entity is any of: a quoted string ("...", '...' or `...`, 1-80 characters); a long flag
(`--dry-run`); a dotted name (`tasks_lib.memory`, `config.yaml`); a snake_case or
SCREAMING_CASE identifier; a CamelCase or camelCase identifier; a run of capitalised words
(`Ravi`, `New York`) unless it is a single common word (`The`, `Always`, ...) or a single
sentence-initial word ending in -ed, -ing or -ly (`Owned`, `Running`, `Usually`). Entities are
compared casefolded. The same function reads memories and queries, so a query's entities meet
the memories' entities without any model.
"""

from __future__ import annotations

import re

_QUOTED = re.compile(r"\"([^\"\n]{1,80})\"|'([^'\n]{1,80})'|`([^`\n]{1,80})`")
_FLAG = re.compile(r"(?<![\w-])--[A-Za-z0-9][A-Za-z0-9-]*")
_DOTTED = re.compile(r"(?<![\w.])[A-Za-z_][A-Za-z0-9_-]*(?:\.[A-Za-z_][A-Za-z0-9_-]*)+")
_SNAKE = re.compile(r"(?<![\w.])[A-Za-z0-9]+(?:_[A-Za-z0-9]+)+(?!\w|\.[A-Za-z_])")
_CAMEL = re.compile(r"\b(?:[A-Z][a-z0-9]+(?:[A-Z][a-z0-9]*)+|[a-z][a-z0-9]*(?:[A-Z][a-z0-9]*)+)\b")
_CAPITALISED = re.compile(r"\b[A-Z][A-Za-z0-9]*(?:[ \t]+[A-Z][A-Za-z0-9]*)*\b")

COMMON_WORDS = frozenset(
    """a an the this that these those there then than when where what which who whom whose why how
    is are was were be been do does did done don't not no yes if else in on at of for to from by with
    and or but so as it its it's we our you your i my me he she they them their his her us all any
    every each some use using used always never please note run make set add keep also only just
    after before should must may might can could would will shall here now see try ok
    prefer avoid remember check call pass put write read return give tell ask most many one two""".split()
)
"""Single capitalised words that are not names (sentence starts)."""


def _sentence_start(text: str, index: int) -> bool:
    """True when position `index` of `text` begins a sentence, line or list item."""
    before = text[:index].rstrip(" \t")
    return not before or before[-1] in ".!?:;\n-*>(\"'`"


def extract_entities(text: str) -> frozenset[str]:
    """The casefolded entities of `text`, by the rules in the module docstring."""
    found: set[str] = set()
    for match in _QUOTED.finditer(text):
        value = next(g for g in match.groups() if g is not None).strip()
        if value:
            found.add(value)
    for pattern in (_FLAG, _DOTTED, _SNAKE, _CAMEL):
        found.update(m.group(0).rstrip(".") for m in pattern.finditer(text))
    for match in _CAPITALISED.finditer(text):
        value = match.group(0)
        parts = value.split()
        while parts and parts[0].casefold() in COMMON_WORDS:
            parts.pop(0)
        if not parts:
            continue
        value = " ".join(parts)
        if len(parts) == 1 and (len(value) < 2 or value.casefold() in COMMON_WORDS):
            continue
        if len(parts) == 1 and value == match.group(0) and _sentence_start(text, match.start()):
            if value.casefold().endswith(("ed", "ing", "ly")):
                continue
        found.add(value)
    return frozenset(e.casefold() for e in found if e)
