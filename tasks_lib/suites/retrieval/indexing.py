"""Storing an evaluation group in a disposable store, and reading recalled hits back as case keys."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks_lib.memory.adapter import MemoryAdapter, MemoryHit, MemoryItem
from tasks_lib.suites.retrieval.cases import CaseGroup, CaseMemory

AdapterFactory = Callable[[Path], MemoryAdapter]
"""Builds a fresh adapter keeping its data under the given (empty, temporary) folder."""

BATCH = 32
"""Memories per remember call."""

DEPTH = 50
"""Hits asked of every recall; ranking metrics read the first 1, 5 and 8, MRR all of them."""


@dataclass
class IndexedGroup:
    """A group stored in its realms: which stored id is which case key."""

    realm: str
    """Realm of the group's main memories."""
    key_of: dict[str, str] = field(default_factory=dict)
    """Stored id -> case key, for both realms."""
    foreign: set[str] = field(default_factory=set)
    """Ids stored in the group's other realm (never to be recalled)."""
    index_ms: float = 0.0
    """Wall time of the remember calls."""
    stored: int = 0
    """Memories written."""


def realm_names(group: CaseGroup) -> dict[str, str]:
    """The group's realms: `main` -> `retrieval:<group>`, `other` -> `retrieval-other:<group>`."""
    return {"main": f"retrieval:{group.group}", "other": f"retrieval-other:{group.group}"}


def _item(memory: CaseMemory, id_of: dict[str, str]) -> MemoryItem:
    return MemoryItem(
        text=memory.text, kind=memory.kind, subject=memory.subject, supersedes=tuple(id_of[k] for k in memory.supersedes),
        speaker=memory.speaker, timestamp=memory.timestamp, session=memory.session,
    )


def background_memories(notes: Sequence[str]) -> list[CaseMemory]:
    """The background notes as memories keyed `bg-01`, `bg-02`, ..."""
    return [CaseMemory(key=f"bg-{i:02d}", text=text) for i, text in enumerate(notes, start=1)]


def index_group(adapter: MemoryAdapter, group: CaseGroup, background: Sequence[str] = ()) -> IndexedGroup:
    """Create the group's realms and store the background notes, then its memories, in batches of BATCH.

    A memory that supersedes another by key starts a new batch, so the replaced id exists.
    """
    realms = realm_names(group)
    indexed = IndexedGroup(realm=realms["main"])
    id_of: dict[str, str] = {}
    for name in sorted({m.realm for m in group.memories} | {"main"}):
        adapter.create_realm(realms[name])
    batch: list[CaseMemory] = []

    def flush() -> None:
        if not batch:
            return
        realm = batch[0].realm
        items = [_item(m, id_of) for m in batch]
        start = time.perf_counter()
        ids = adapter.remember(realms[realm], items)
        indexed.index_ms += (time.perf_counter() - start) * 1000
        for memory, new_id in zip(batch, ids):
            id_of[memory.key] = new_id
            indexed.key_of[new_id] = memory.key
            if realm != "main":
                indexed.foreign.add(new_id)
        indexed.stored += len(batch)
        batch.clear()

    for memory in [*background_memories(background), *group.memories]:
        if batch and (len(batch) >= BATCH or memory.supersedes or memory.realm != batch[0].realm):
            flush()
        batch.append(memory)
    flush()
    return indexed


def recall_keys(
    adapter: MemoryAdapter, indexed: IndexedGroup, question: str, lanes: Sequence[str] | None = None
) -> tuple[list[MemoryHit], list[str | None], float]:
    """Recall DEPTH hits for `question` in the group's realm: hits, their case keys, wall time in ms."""
    start = time.perf_counter()
    hits = list(adapter.recall(indexed.realm, question, k=DEPTH, lanes=lanes))
    elapsed = (time.perf_counter() - start) * 1000
    return hits, [indexed.key_of.get(h.id) for h in hits], elapsed
