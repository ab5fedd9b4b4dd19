"""Frozen stores and per-run replicas: a run never changes the frozen original."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.errors import DigestMismatchError
from tasks_lib.memory.errors import MemoryStoreError
from tasks_lib.memory.reference.replica import (
    REPLICA_FILE_NAME,
    restore_replica,
    snapshot,
    strip_lanes,
)
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import sha256_file

REALM = "trial:replica"


def _live_store(path: Path) -> SqliteMemoryStore:
    store = SqliteMemoryStore(path)
    store.create_realm(REALM)
    store.remember(REALM, ["The frozen fact is about otters."])
    return store


def test_a_run_on_its_replica_never_changes_the_frozen_original(tmp_path: Path) -> None:
    with _live_store(tmp_path / "live.sqlite"):
        frozen = tmp_path / "frozen" / "memory.sqlite"
        receipt = snapshot(tmp_path / "live.sqlite", frozen)
    assert receipt.sha256 == sha256_file(frozen) and receipt.size == frozen.stat().st_size
    for run in ("run-1", "run-2"):
        replica = restore_replica(frozen, tmp_path / run, receipt.sha256)
        assert replica == tmp_path / run / REPLICA_FILE_NAME
        with SqliteMemoryStore(replica, create=False) as store:
            (otters,) = [h.id for h in store.recall(REALM, "otters", 1)]
            store.remember(REALM, [f"{run} wrote this about otters."])
            store.forget([otters])
            store.create_realm(f"trial:{run}")
        assert sha256_file(frozen) == receipt.sha256
    with SqliteMemoryStore(restore_replica(frozen, tmp_path / "run-3"), create=False) as fresh:
        assert [h.text for h in fresh.recall(REALM, "otters", 5)] == ["The frozen fact is about otters."]


def test_snapshot_is_consistent_while_the_source_is_open_and_keeps_the_embedder(tmp_path: Path) -> None:
    store = _live_store(tmp_path / "live.sqlite")
    try:
        snapshot(tmp_path / "live.sqlite", tmp_path / "frozen.sqlite")
        store.remember(REALM, ["Written after the snapshot about otters."])
    finally:
        store.close()
    with SqliteMemoryStore(restore_replica(tmp_path / "frozen.sqlite", tmp_path / "run"), create=False) as copy:
        assert copy.embedder.name == "hashed" and len(copy.live_ids(REALM)) == 1


def test_refusals(tmp_path: Path) -> None:
    with _live_store(tmp_path / "live.sqlite"):
        pass
    receipt = snapshot(tmp_path / "live.sqlite", tmp_path / "frozen.sqlite")
    with pytest.raises(MemoryStoreError, match="never overwritten"):
        snapshot(tmp_path / "live.sqlite", tmp_path / "frozen.sqlite")
    with pytest.raises(MemoryStoreError, match="store_path: no store"):
        snapshot(tmp_path / "absent.sqlite", tmp_path / "f2.sqlite")
    with pytest.raises(DigestMismatchError, match="expected 0000"):
        restore_replica(tmp_path / "frozen.sqlite", tmp_path / "run", "0" * 64)
    restore_replica(tmp_path / "frozen.sqlite", tmp_path / "run", receipt.sha256)
    with pytest.raises(MemoryStoreError, match="fresh replica"):
        restore_replica(tmp_path / "frozen.sqlite", tmp_path / "run")
    with pytest.raises(MemoryStoreError, match="run snapshot first"):
        restore_replica(tmp_path / "nothing.sqlite", tmp_path / "run-x")


STRIP_TEXT = "Call paybridge.client.send_invoice with the PAYBRIDGE_TENANT header; the gateway rejects invoices without it."
STRIP_QUERY = "which header does paybridge.client.send_invoice need for invoices"


@pytest.mark.parametrize("lane", ["keyword", "semantic", "graph"])
def test_a_stripped_replica_cannot_answer_its_ablated_lane_but_still_answers_the_others(tmp_path: Path, lane: str) -> None:
    """Regression: an ablation arm got the full replica plus a switch asking the hook to skip the lane;
    anything opening the file itself could still recall through it."""
    path = tmp_path / "memory.sqlite"
    with SqliteMemoryStore(path) as store:
        store.create_realm(REALM)
        (planted,) = store.remember(REALM, [STRIP_TEXT])
        lanes = store.LANES[:3]
        assert all(store.recall(REALM, STRIP_QUERY, 5, lanes=(each,)) for each in lanes), "every lane answers before"
    strip_lanes(path, [lane])
    with SqliteMemoryStore(path, create=False) as store:
        assert not store.recall(REALM, STRIP_QUERY, 5, lanes=(lane,))
        for other in (each for each in lanes if each != lane):
            assert [h.id for h in store.recall(REALM, STRIP_QUERY, 5, lanes=(other,))] == [planted], other
        assert store.forget([planted]) == (planted,), "planted ids must still be forgettable by exact id"


def test_strip_refuses_an_unknown_lane_and_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="cannot strip vector; strippable lanes are keyword"):
        strip_lanes(tmp_path / "memory.sqlite", ["vector"])
    with pytest.raises(MemoryStoreError, match="replica: no store at"):
        strip_lanes(tmp_path / "memory.sqlite", ["keyword"])
