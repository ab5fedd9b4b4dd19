"""What the public-data adapters produce: evaluation groups, their questions, and the quirk log.

An evaluation group is the unit of isolation: one LoCoMo conversation or one LongMemEval record.
Its turns go into their own disposable store and only its own questions are asked of it. Every
quirk of a dataset is handled by a named rule that counts how often it fired (`QuirkLog`), so a
report says what was changed or left out and why, instead of crashing or silently dropping rows.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MAX_TEXT_BYTES


class DatasetError(MemtrialError):
    """A dataset file cannot be read as the format it was given as (not a quirk a rule can handle)."""


@dataclass(frozen=True)
class EvalTurn:
    """One indexed turn: its corpus id (the dataset's turn id), session, speaker, text and date."""

    turn_id: str
    session: str
    speaker: str
    text: str
    timestamp: str | None


@dataclass(frozen=True)
class EvalQuestion:
    """One scored question: its id, slice (category or question type), text and relevant turn ids."""

    question_id: str
    slice: str
    text: str
    relevant_turns: frozenset[str]


@dataclass(frozen=True)
class EvalGroup:
    """One isolated memory: turns in storing order (sessions in dataset order) and its questions."""

    group_id: str
    turns: tuple[EvalTurn, ...]
    questions: tuple[EvalQuestion, ...]


@dataclass
class QuirkLog:
    """How often each named quirk rule fired; `rules` holds each rule's one-line description."""

    rules: dict[str, str]
    counts: Counter[str] = field(default_factory=Counter)

    def hit(self, rule: str, n: int = 1) -> None:
        """Count `n` firings of `rule` (a rule not in `rules` is a programming error)."""
        if rule not in self.rules:
            raise KeyError(f"quirk rule {rule!r} is not declared")
        self.counts[rule] += n

    def __getitem__(self, rule: str) -> int:
        return self.counts[rule]


def read_json_list(path: Path, items: str, hint: str) -> list[Any]:
    """The JSON list in `path`; DatasetError naming the file when it is unreadable or not a list of `items`."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise DatasetError(f"{path}: cannot read it as JSON ({error}); {hint}") from None
    if not isinstance(data, list):
        raise DatasetError(f"{path}: top level is {type(data).__name__}, not a list of {items}; {hint}")
    return data


def truncate_utf8(text: str, limit: int) -> str:
    """`text` cut to at most `limit` UTF-8 bytes, never inside a character."""
    raw = text.encode("utf-8")
    return text if len(raw) <= limit else raw[:limit].decode("utf-8", errors="ignore")


def storable_text(text: str, log: QuirkLog) -> str | None:
    """`text` stripped and cut to MAX_TEXT_BYTES (rule `turn_text_truncated`), or None when empty (rule `empty_turn_skipped`)."""
    text = text.strip()
    if not text:
        log.hit("empty_turn_skipped")
        return None
    if len(text.encode("utf-8")) > MAX_TEXT_BYTES:
        log.hit("turn_text_truncated")
        return truncate_utf8(text, MAX_TEXT_BYTES)
    return text
