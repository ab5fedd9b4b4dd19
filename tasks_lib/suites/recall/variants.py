"""Memory-store variants the recall sweep runs by name, each a small real adapter built to show one failure.

`reference-first-heard` (`FirstHeardStore`): the reference store, recalling the same top k
memories, but serving them oldest first. It never resolves a correction: when the superseded
value and its correction are both recalled, the first thing it heard comes first. Seed 001's
"a system that always repeats the first thing it heard is perfect on recall and unusable": the
sweep should show its staleness, while its retrieval recall equals the reference store's.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import ClassVar

from tasks_lib.memory.adapter import MemoryAdapter, MemoryHit
from tasks_lib.memory.reference.store import SqliteMemoryStore


class FirstHeardStore(SqliteMemoryStore):
    """The reference store's recall, served in storing order (oldest first): corrections never win."""

    LANES: ClassVar[tuple[str, ...]] = SqliteMemoryStore.LANES

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """The reference store's top k, re-ordered oldest first (scores kept as the store gave them)."""
        hits = super().search(realm, query, k, lanes)
        order = {memory_id: i for i, memory_id in enumerate(self.live_ids(realm))}
        return sorted(hits, key=lambda hit: order.get(hit.id, len(order)))


def _open_first_heard(folder: Path, embedder: str) -> MemoryAdapter:
    folder.mkdir(parents=True, exist_ok=True)
    return FirstHeardStore(folder / "memory.sqlite", embedder, durable=False)


RECALL_VARIANTS: dict[str, Callable[[Path, str], MemoryAdapter]] = {"reference-first-heard": _open_first_heard}
"""Variant stores by `--memory` name: (folder, embedder name) -> a fresh adapter."""
