"""Retention policies: what a session keeps of its own conversation in context.

- `window`: the last `window` turns, nothing else.
- `summary`: the last `window` turns plus a rolling extractive summary of the turns that left the
  window. The summary holds at most `summary_sentences` sentences; each sentence of an evicted
  turn is scored by `salience` and the summary keeps the highest-scoring ones, the newer sentence
  winning a tie. Deterministic: no model, no randomness.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from tasks_lib.suites.recall.scoring import tokens

FIRST_PERSON = frozenset({"i", "i'm", "my", "me", "we", "we're", "our", "us"})
"""Words marking a statement about the speaker, which a summary should keep."""

_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9])")


@dataclass(frozen=True)
class Turn:
    """One conversation turn (or, inside a summary, one sentence of it)."""

    index: int
    """Position in the conversation, from 0; later turns have larger indexes."""
    speaker: str
    """Who said it."""
    text: str
    """What was said."""


class RetentionPolicy(Protocol):
    """Keeps part of a conversation; `observe` every turn in order, then read `retained`."""

    def observe(self, turn: Turn) -> None:
        """Take in the next turn."""

    def retained(self) -> tuple[Turn, ...]:
        """What is still in context, oldest first."""


def salience(sentence: str) -> int:
    """How fact-like a sentence is: numbers + capitalised words after the first + 1 if first person."""
    words = sentence.split()
    capitalised = sum(1 for w in words[1:] if w[:1].isupper())
    said = tokens(sentence)
    numbers = sum(1 for t in said if t[:1].isdigit())
    return numbers + capitalised + (1 if FIRST_PERSON & set(said) else 0)


class WindowPolicy:
    """Keep the last `window` turns."""

    def __init__(self, window: int) -> None:
        if window < 1:
            raise ValueError(f"window must be at least 1 turn, got {window}")
        self._turns: deque[Turn] = deque(maxlen=window)

    def observe(self, turn: Turn) -> None:
        """Append `turn`, dropping the oldest when the window is full."""
        self.evicted(turn)

    def evicted(self, turn: Turn) -> Turn | None:
        """Append `turn` and return the turn it pushed out, if any."""
        out = self._turns[0] if len(self._turns) == self._turns.maxlen else None
        self._turns.append(turn)
        return out

    def retained(self) -> tuple[Turn, ...]:
        """The window, oldest first."""
        return tuple(self._turns)


class SummaryPolicy:
    """Keep the last `window` turns and the `summary_sentences` most salient sentences of older turns."""

    def __init__(self, window: int, summary_sentences: int) -> None:
        if summary_sentences < 1:
            raise ValueError(f"summary_sentences must be at least 1, got {summary_sentences}")
        self._window = WindowPolicy(window)
        self._limit = summary_sentences
        self._summary: list[tuple[int, int, Turn]] = []  # (salience, order, sentence)
        self._order = 0

    def observe(self, turn: Turn) -> None:
        """Append `turn`; fold the turn leaving the window into the summary."""
        gone = self._window.evicted(turn)
        if gone is None:
            return
        for sentence in _SENTENCE_END.split(gone.text):
            if sentence.strip():
                self._order += 1
                self._summary.append((salience(sentence), self._order, Turn(gone.index, gone.speaker, sentence.strip())))
        self._summary.sort(key=lambda item: (item[0], item[1]), reverse=True)
        del self._summary[self._limit :]

    def retained(self) -> tuple[Turn, ...]:
        """Summary sentences (in conversation order), then the window."""
        kept = sorted(self._summary, key=lambda item: item[1])
        return tuple(item[2] for item in kept) + self._window.retained()


def make_policy(name: str, window: int, summary_sentences: int) -> RetentionPolicy:
    """The policy called `name`; raises ValueError naming the known policies."""
    if name == "window":
        return WindowPolicy(window)
    if name == "summary":
        return SummaryPolicy(window, summary_sentences)
    raise ValueError(f"policy: unknown retention policy {name!r}; known policies are summary, window")
