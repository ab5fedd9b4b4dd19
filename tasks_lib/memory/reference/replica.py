"""Frozen stores, per-run private replicas, and replicas stripped of ablated lanes.

`snapshot` freezes a live store into one self-contained file with SQLite's online backup API
(consistent even while the source is open) and returns its digest. `restore_replica` copies a
frozen file into one run's folder, checking the digest first, so every run starts from the same
bytes and nothing a run does can reach the frozen original. `server` serves one replica on a
private Unix socket so an agent's CLI and its child hooks share one process. `strip_lanes` removes
what an ablated lane answers from (its index rows, vectors or entities) from one run's replica, so an
`ablate:<lane>` arm's replica cannot answer that lane by any route.
"""

from __future__ import annotations

import shutil
import sqlite3
import stat
from collections.abc import Iterable
from pathlib import Path

from tasks_lib.contracts import ContractModel, Sha256
from tasks_lib.errors import DigestMismatchError
from tasks_lib.memory.errors import MemoryStoreError
from tasks_lib.trees import sha256_file

REPLICA_FILE_NAME = "memory.sqlite"
"""File name of a run's replica inside its run folder."""


class FrozenStore(ContractModel):
    """Receipt of a snapshot."""

    sha256: Sha256
    """SHA-256 of the frozen file's bytes."""
    size: int
    """Size of the frozen file in bytes."""


def snapshot(store_path: Path, frozen_path: Path) -> FrozenStore:
    """Freeze the store at `store_path` into `frozen_path` (read-only, rollback journal).

    Raises MemoryStoreError when the source is missing or not SQLite, or the target exists.
    """
    if not store_path.is_file():
        raise MemoryStoreError(f"store_path: no store at {store_path}")
    if frozen_path.exists():
        raise MemoryStoreError(f"frozen_path: {frozen_path} already exists; a frozen store is never overwritten")
    frozen_path.parent.mkdir(parents=True, exist_ok=True)
    partial = frozen_path.with_name(frozen_path.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        source = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True)
        target = sqlite3.connect(partial)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            target.execute("VACUUM")
        finally:
            source.close()
            target.close()
    except sqlite3.DatabaseError as error:
        partial.unlink(missing_ok=True)
        raise MemoryStoreError(f"store_path: cannot snapshot {store_path} ({error})") from None
    partial.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    partial.rename(frozen_path)
    return FrozenStore(sha256=sha256_file(frozen_path), size=frozen_path.stat().st_size)


def restore_replica(frozen: Path, run_dir: Path, expected_sha256: str | None = None) -> Path:
    """Copy `frozen` to `run_dir/REPLICA_FILE_NAME` (writable) for one run; return the copy's path.

    Raises MemoryStoreError when `frozen` is missing or the replica already exists, and
    DigestMismatchError when `expected_sha256` is given and differs from the frozen file's.
    """
    if not frozen.is_file():
        raise MemoryStoreError(f"frozen: no frozen store at {frozen}; run snapshot first")
    if expected_sha256 is not None:
        actual = sha256_file(frozen)
        if actual != expected_sha256:
            raise DigestMismatchError(f"frozen: {frozen} has sha256 {actual}, expected {expected_sha256}; re-snapshot the store")
    replica = run_dir / REPLICA_FILE_NAME
    if replica.exists():
        raise MemoryStoreError(f"run_dir: {replica} already exists; each run gets a fresh replica in its own folder")
    run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(frozen, replica)
    replica.chmod(stat.S_IRUSR | stat.S_IWUSR | stat.S_IRGRP | stat.S_IROTH)
    return replica


STRIPPED_LANES = ("keyword", "semantic", "graph", "corrections")
"""Lanes `strip_lanes` can remove from a replica (every lane of the reference store)."""

_STRIP_SQL: dict[str, tuple[str, ...]] = {
    "keyword": ("DELETE FROM memories_fts", "DELETE FROM sessions_fts"),
    "semantic": ("UPDATE memories SET vector = zeroblob(length(vector))",),
    "graph": ("DELETE FROM entities",),
    "corrections": (
        "DELETE FROM memories_fts WHERE rowid IN (SELECT seq FROM memories WHERE superseded_by IS NOT NULL)",
        "DELETE FROM entities WHERE seq IN (SELECT seq FROM memories WHERE superseded_by IS NOT NULL)",
        "UPDATE memories SET kind = 'fact' WHERE kind = 'correction'",
    ),
}
"""What each lane reads, removed: the FTS rows (keyword), the vectors zeroed (semantic: every
similarity is 0, below any embedder's floor), the entity index (graph), the superseded memories'
index rows and the correction kind (corrections). No memory row is deleted, so planted ids can still
be forgotten by exact id."""


def strip_lanes(replica: Path, lanes: Iterable[str]) -> None:
    """Remove from the replica file at `replica` the data `lanes` answer from, so a recall through any
    lane of it, by the hook or by an agent opening the file itself, finds nothing there; the freed
    pages are overwritten (secure_delete, VACUUM). The memories' text stays for the lanes that remain.

    Raises MemoryStoreError for a lane not in STRIPPED_LANES, or when the file is not a store.
    """
    wanted = list(dict.fromkeys(lanes))
    unknown = sorted(set(wanted) - set(STRIPPED_LANES))
    if unknown:
        raise MemoryStoreError(f"lanes: cannot strip {', '.join(unknown)}; strippable lanes are {', '.join(STRIPPED_LANES)}")
    if not replica.is_file():
        raise MemoryStoreError(f"replica: no store at {replica}")
    try:
        conn = sqlite3.connect(replica)
        try:
            conn.execute("PRAGMA secure_delete=ON")
            with conn:
                for lane in wanted:
                    for statement in _STRIP_SQL[lane]:
                        conn.execute(statement)
            conn.execute("VACUUM")
        finally:
            conn.close()
    except sqlite3.DatabaseError as error:
        raise MemoryStoreError(f"replica: cannot strip lanes from {replica} ({error})") from None
