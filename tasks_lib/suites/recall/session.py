"""The session under test: a memory adapter (or none) plus a retention policy.

Every turn goes to the retention policy and is written to memory (one `remember` batch per
`MAX_BATCH` turns, written before the first recall). At the probe, the session recalls the top
`recall_k` memories for the question and hands the recalled turns and the retained context to
the `ask` step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tasks_lib.memory.adapter import MAX_BATCH, MemoryAdapter, MemoryItem
from tasks_lib.suites.recall.retention import RetentionPolicy, Turn


@dataclass(frozen=True)
class ProbeContext:
    """What the ask step sees for one probe."""

    retained: tuple[Turn, ...]
    """The retention policy's context, oldest first."""
    recalled: tuple[Turn, ...]
    """The turns memory recalled for the probe, in the memory's own order (best first)."""
    scores: tuple[float, ...] = ()
    """The memory's own score of each recalled turn (same order as `recalled`)."""


class RecallSession:
    """One conversation: turns are observed by `policy` and stored in `memory` under `realm`."""

    def __init__(self, memory: MemoryAdapter | None, realm: str, policy: RetentionPolicy, recall_k: int = 5) -> None:
        """`memory` None measures the retention policy alone. Creates `realm` in `memory`."""
        self.memory = memory
        self.realm = realm
        self.policy = policy
        self.recall_k = recall_k
        self.turns: list[Turn] = []
        self._pending: list[Turn] = []
        self._by_id: dict[str, Turn] = {}
        if memory is not None:
            memory.create_realm(realm)

    def add(self, speaker: str, text: str) -> Turn:
        """Append one turn to the conversation."""
        turn = Turn(len(self.turns), speaker, text)
        self.turns.append(turn)
        self.policy.observe(turn)
        self._pending.append(turn)
        return turn

    def _flush(self) -> None:
        if self.memory is None:
            self._pending.clear()
            return
        while self._pending:
            batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
            items = [MemoryItem(text=t.text, speaker=t.speaker, session=self.realm) for t in batch]
            for turn, memory_id in zip(batch, self.memory.remember(self.realm, items)):
                self._by_id[memory_id] = turn

    def context(self, question: str) -> ProbeContext:
        """Write pending turns to memory, recall for `question`, and return what the ask step sees."""
        self._flush()
        recalled: Sequence[Turn] = ()
        scores: tuple[float, ...] = ()
        if self.memory is not None:
            hits = self.memory.recall(self.realm, question, k=self.recall_k)
            by_text = {t.text: t for t in self.turns}  # the latest turn with that text
            recalled = [self._by_id.get(h.id) or by_text.get(h.text) or Turn(-1, h.speaker or "memory", h.text) for h in hits]
            scores = tuple(h.score for h in hits)
        return ProbeContext(self.policy.retained(), tuple(recalled), scores)
