"""Disposable stores (a suite's scratch, an arm's per-attempt store) skip the sync to disk per commit;
what they store and serve is the same as a durable store's, a durable store still syncs, and a
read-only open of a scratch store's file reads everything it committed."""

from __future__ import annotations

from pathlib import Path

from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.memory.registry import open_memory_system

REALM = "trial:scratch.task-a.on.t0"
FACTS = ["The deploy key lives in vault path ops/deploy.", "Rotate logs keeping 7 files.", "Alice owns the billing cron."]


def _filled(store: SqliteMemoryStore) -> list[tuple[str, float]]:
    store.create_realm(REALM)
    store.remember(REALM, FACTS)
    return [(hit.text, hit.score) for hit in store.search(REALM, "who owns the billing cron", 3, store.LANES)]


def test_a_scratch_store_serves_what_a_durable_one_serves_without_syncing(tmp_path: Path) -> None:
    with SqliteMemoryStore(tmp_path / "durable.sqlite", "hashed") as durable, \
            SqliteMemoryStore(tmp_path / "scratch.sqlite", "hashed", durable=False) as scratch:
        assert _filled(scratch) == _filled(durable)
        assert durable._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL: the user's store is unchanged
        assert scratch._conn.execute("PRAGMA synchronous").fetchone()[0] == 0  # OFF
    with SqliteMemoryStore(tmp_path / "scratch.sqlite", read_only=True) as reader:
        assert reader.live_ids(REALM) and len(reader.live_ids(REALM)) == len(FACTS)


def test_the_registry_opens_a_scratch_reference_store_only_when_asked(tmp_path: Path) -> None:
    with open_memory_system("reference", tmp_path / "kept", embedder="hashed") as kept, \
            open_memory_system("reference", tmp_path / "scratch", embedder="hashed", scratch=True) as scratch:
        assert isinstance(kept, SqliteMemoryStore) and isinstance(scratch, SqliteMemoryStore)
        assert kept._conn.execute("PRAGMA synchronous").fetchone()[0] == 2
        assert scratch._conn.execute("PRAGMA synchronous").fetchone()[0] == 0
