"""The reference provisioner: the three protocol verbs for memtrial's own memory store.

    python -m tasks_lib.memory.provisioner.reference restore|snapshot|destroy   (one JSON object in, one out)
    memtrial-reference-provisioner restore|snapshot|destroy                     (the same, installed)

The verbs, the project folders, serving and the exit codes come from `verbs`; the artifacts are in the
format of `artifact_format`. This module stores them in the reference store. State lives under
the folder named by MEMTRIAL_PROVISIONER_STATE:

    frozen/<key>.sqlite       frozen stores built from artifacts (read-only, shared, never changed)
    frozen/<key>.json         their FrozenStore receipts (sha256, size); key = sha256 of what defines them
    projects/<project>/       one run's private state: memory.sqlite (the replica) and project.json
    projects/<project>/serve.json   the served replica's PID and socket, when restore started a server

Restore stores evidence first, then nodes, in file order, freezes the result with
`replica.snapshot` (once per key; MEMTRIAL_PROVISIONER_EMBEDDER names the embedder, default the
store's) and copies the frozen file into the project with `replica.restore_replica` (digest
checked), so nothing a run does can reach the frozen original. Artifact ids and edges live in the
provisioner's own tables (`provisioner_items`, `provisioner_edges`) inside the same file. Restore
serves the replica only when MEMTRIAL_PROVISIONER_SERVE is 1 or `ro` (default `0`); unserved,
the response's `env` is the replica file and realm.

Snapshot opens the replica afresh: every live memory of every realm counts; probes run on the
store's keyword, semantic and graph lanes (the graph lane finds the memories naming the query's
entities, and one hop on), then along the artifact edges.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import sqlite3
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from tasks_lib.contracts import ContractModel, Sha256
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery.server import ServedReplica, start_server
from tasks_lib.memory.embeddings import DEFAULT_EMBEDDER
from tasks_lib.memory.env import REALM_ENV, STORE_ENV
from tasks_lib.memory.provisioner.artifact_format import (
    Entry,
    GraphEdge,
    ReadArtifacts,
    remember_entries,
)
from tasks_lib.memory.provisioner.verbs import (
    PROJECT_FILE,
    ArtifactIndex,
    LiveProject,
    NewProject,
    ProvisionerBackend,
    configured_embedder,
    dispatch,
)
from tasks_lib.memory.reference.replica import (
    REPLICA_FILE_NAME,
    FrozenStore,
    restore_replica,
    snapshot,
)

if TYPE_CHECKING:
    from tasks_lib.memory.reference.store import SqliteMemoryStore

FORMAT_VERSION = "1"
"""Version of the artifact-to-store conversion; part of every frozen store's key."""


class ProjectReceipt(ContractModel):
    """`project.json`: what a project was restored from."""

    schema_version: Literal[1] = 1
    """Version of this receipt."""
    project: str
    """The project handle."""
    fixture: str
    """Fixture id of the restore request."""
    graph_arm: str
    """Arm of the restore request."""
    run_identity: str
    """Run identity of the restore request."""
    realm: str
    """Realm the artifact's memories were stored in."""
    frozen_sha256: Sha256
    """SHA-256 of the frozen store the replica was copied from."""
    replica: str
    """File name of the replica inside the project folder."""


# --------------------------------------------------------------------------- building frozen stores


_PROVISIONER_SCHEMA = """
CREATE TABLE provisioner_items(artifact_id TEXT PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE,
                               source TEXT NOT NULL, label TEXT, text TEXT NOT NULL);
CREATE TABLE provisioner_edges(source TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL);
"""


def build_store(path: Path, realm: str, entries: Sequence[Entry], edges: Sequence[GraphEdge], embedder: str) -> None:
    """Create the store at `path` holding `entries` in `realm`, with artifact ids and `edges` recorded."""
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    with SqliteMemoryStore(path, embedder) as store:
        store.create_realm(realm)
        ids = remember_entries(store, realm, entries)
    conn = sqlite3.connect(path)
    try:
        with conn:
            conn.executescript(_PROVISIONER_SCHEMA)
            conn.executemany("INSERT INTO provisioner_items VALUES (?, ?, ?, ?, ?)",
                             [(aid, ids[aid], source, label, item.text) for aid, source, item, label, _ in entries])
            conn.executemany("INSERT INTO provisioner_edges VALUES (?, ?, ?)",
                             [(e.source, e.target, e.relation) for e in edges])
    finally:
        conn.close()


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def frozen_store(state: Path, realm: str, artifacts: ReadArtifacts) -> tuple[Path, FrozenStore]:
    """The frozen store for these artifacts (built once per key, under a lock) and its receipt; raises BadRequestError."""
    embedder = configured_embedder(DEFAULT_EMBEDDER)
    parts = [FORMAT_VERSION, embedder, realm,
             *(hashlib.sha256(data).hexdigest() if data is not None else "-"
               for data in (artifacts.graph_bytes, artifacts.evidence_bytes))]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]
    folder = state / "frozen"
    frozen, receipt_path = folder / f"{key}.sqlite", folder / f"{key}.json"
    with _locked(folder / f"{key}.lock"):
        if frozen.is_file() and receipt_path.is_file():
            return frozen, FrozenStore.model_validate_json(receipt_path.read_bytes())
        frozen.unlink(missing_ok=True)
        entries = artifacts.entries()
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as scratch:
            built = Path(scratch) / "store.sqlite"
            build_store(built, realm, entries, artifacts.edges(), embedder)
            receipt = snapshot(built, frozen)
        temporary = receipt_path.with_suffix(".tmp")
        temporary.write_text(receipt.model_dump_json())
        os.replace(temporary, receipt_path)
        return frozen, receipt


# --------------------------------------------------------------------------- the backend


class ReferenceReplica(LiveProject):
    """A project's replica, opened afresh for one snapshot."""

    def __init__(self, store: SqliteMemoryStore, index: ArtifactIndex) -> None:
        super().__init__(index)
        self.store = store
        self.realms = store.realms()

    def live_ids(self) -> set[str]:
        """Every live memory id of every realm of the replica."""
        return {mid for realm in self.realms for mid in self.store.live_ids(realm)}

    def recall(self, lane: str, query: str, k: int) -> Sequence[MemoryHit]:
        """The store's hits on `lane`, realm by realm."""
        return [hit for realm in self.realms for hit in self.store.recall(realm, query, k, lanes=[lane])]

    def close(self) -> None:
        """Close the store."""
        self.store.close()


class ReferenceBackend(ProvisionerBackend):
    """Projects are private replicas of frozen reference stores, served by memtrial's memory server when asked."""

    module = "tasks_lib.memory.provisioner.reference"
    default_serve = "0"

    def populate(self, folder: Path, project: NewProject) -> None:
        """Copy the artifacts' frozen store (built on first use) into `folder` and write the receipt."""
        frozen, receipt = frozen_store(project.state, project.realm, project.artifacts)
        restore_replica(frozen, folder / "run", expected_sha256=receipt.sha256)
        for item in (folder / "run").iterdir():
            item.rename(folder / item.name)
        (folder / "run").rmdir()
        request = project.request
        receipt_json = ProjectReceipt(project=project.name, fixture=request.fixture, graph_arm=request.graph_arm,
                                      run_identity=request.run_identity, realm=project.realm,
                                      frozen_sha256=receipt.sha256, replica=REPLICA_FILE_NAME)
        (folder / PROJECT_FILE).write_text(receipt_json.model_dump_json(indent=2) + "\n")

    def start_server(self, folder: Path, realm: str, read_only: bool) -> ServedReplica:
        """Serve the project's replica file."""
        return start_server(folder / REPLICA_FILE_NAME, realm=realm, read_only=read_only, own_session=False)

    def replica_env(self, folder: Path, realm: str) -> dict[str, str]:
        """The replica file and the realm."""
        return {STORE_ENV: str(folder / REPLICA_FILE_NAME), REALM_ENV: realm}

    def open_project(self, folder: Path) -> ReferenceReplica | None:
        """Open the replica and read the provisioner tables; raise MemtrialError when they are missing."""
        from tasks_lib.memory.reference.store import SqliteMemoryStore

        replica = folder / REPLICA_FILE_NAME
        if not replica.is_file():
            return None
        store = SqliteMemoryStore(replica, create=False)
        conn = sqlite3.connect(f"file:{replica}?mode=ro", uri=True)
        try:
            items = conn.execute("SELECT artifact_id, memory_id, source, text FROM provisioner_items").fetchall()
            edges = tuple((s, t) for s, t in conn.execute("SELECT source, target FROM provisioner_edges"))
        except sqlite3.DatabaseError as error:
            store.close()
            raise MemtrialError(f"project: replica {replica} has no provisioner tables ({error}); restore it again") from None
        finally:
            conn.close()
        index = ArtifactIndex(memory_ids={aid: mid for aid, mid, _, _ in items},
                              sources={aid: source for aid, _, source, _ in items},
                              texts={aid: text for aid, _, _, text in items}, edges=edges)
        try:
            return ReferenceReplica(store, index)
        except BaseException:
            store.close()
            raise


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.provisioner.reference VERB` (see `verbs.dispatch`)."""
    return dispatch(ReferenceBackend(), argv)


if __name__ == "__main__":
    sys.exit(main())
