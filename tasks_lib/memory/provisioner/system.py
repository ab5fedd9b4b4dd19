"""A provisioner for any registered memory system (Chroma, the MCP memory server, the reference store).

    python -m tasks_lib.memory.provisioner.system restore|snapshot|destroy   (one JSON object in, one out)
    memtrial-system-provisioner restore|snapshot|destroy                     (the same, installed)

Environment: MEMTRIAL_PROVISIONER_SYSTEM (a name of `tasks_lib.memory.registry`, required),
MEMTRIAL_PROVISIONER_STATE (the state folder, required), MEMTRIAL_PROVISIONER_EMBEDDER (default
hashed, for systems that use memtrial's embedders) and MEMTRIAL_PROVISIONER_SERVE (`ro`, the
default: the server refuses remember and forget; `1`: it accepts them; `0` is refused).

The verbs, the project folders, serving and the exit codes come from `verbs`; the artifacts are in
the format of `artifact_format`. Restore stores evidence then nodes through the system's own
adapter in a fresh folder `projects/<project>/data` (corrections supersede what they name),
records artifact id -> memory id in `project.json`, and serves that folder (`server.serve_system`);
the response's `env` is the socket and realm, which is how the agent's hook reaches the system.
There is no frozen copy to restore from: each project is built from the pinned artifacts, which
is what makes two projects of the same artifacts equal. No edges are kept.

Snapshot asks the running server, never the files: a memory counts as live when its own text
recalls it (so the counts are re-read, not remembered); a system without a probe's lane returns
no hits for it, so that probe is not found (a `hybrid` lane, one query over a full-text and a
dense index, answers full-text and semantic probes: HOLDS).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.contracts import ContractModel
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.server import ServedReplica, start_system_server
from tasks_lib.memory.provisioner.artifact_format import BadRequestError, remember_entries
from tasks_lib.memory.provisioner.verbs import (
    PROBE_K,
    PROJECT_FILE,
    ArtifactIndex,
    LiveProject,
    NewProject,
    ProvisionerBackend,
    configured_embedder,
    dispatch,
    served_replica,
)
from tasks_lib.settings import PROVISIONER_SYSTEM

SYSTEM_ENV = PROVISIONER_SYSTEM.name
DATA_DIR = "data"
"""The system's data folder, inside the project folder."""
DEFAULT_EMBEDDER = "hashed"
"""Embedder when MEMTRIAL_PROVISIONER_EMBEDDER is unset."""
HOLDS = {"hybrid": ("keyword", "semantic")}
"""A system lane that is one query over several indexes (txtai's hybrid: BM25 and dense) answers probes of each."""


class SystemProject(ContractModel):
    """`project.json`: what a project holds, so snapshot and destroy need only the project name."""

    schema_version: int = 1
    """Version of this receipt."""
    system: str
    """Registry name of the memory system."""
    realm: str
    """Realm the artifacts were stored in."""
    memory_ids: dict[str, str]
    """Artifact id -> the system's memory id."""
    sources: dict[str, str]
    """Artifact id -> `evidence` or `node`."""
    texts: dict[str, str]
    """Artifact id -> its text (what a presence check recalls it by)."""


def system_name() -> str:
    """MEMTRIAL_PROVISIONER_SYSTEM; raise BadRequestError unless it names a registered memory system."""
    from tasks_lib.memory.registry import MEMORY_SYSTEMS

    name = PROVISIONER_SYSTEM.text().strip()
    if name not in MEMORY_SYSTEMS:
        raise BadRequestError(f"{SYSTEM_ENV}: {name!r} is not a memory system; use one of {', '.join(sorted(MEMORY_SYSTEMS))}")
    return name


class ServedSystem(LiveProject):
    """A project reached through its running server."""

    def __init__(self, client: MemoryClient, receipt: SystemProject) -> None:
        super().__init__(ArtifactIndex(memory_ids=receipt.memory_ids, sources=receipt.sources, texts=receipt.texts))
        self.client = client
        self.realm = receipt.realm
        self.lanes = tuple(client.ping()["lanes"])

    def live_ids(self) -> set[str]:
        """The artifact memories that their own text recalls."""
        return {mid for aid, mid in self.index.memory_ids.items()
                if mid in {hit.id for hit in self.client.recall(self.realm, self.index.texts[aid], PROBE_K)}}

    def recall(self, lane: str, query: str, k: int) -> Sequence[MemoryHit]:
        """The server's hits on `lane` (or on a lane that holds it, HOLDS); none when the system lacks it."""
        held = [own for own in self.lanes if own == lane or lane in HOLDS.get(own, ())]
        return self.client.recall(self.realm, query, k, lanes=held[:1]) if held else ()


class SystemBackend(ProvisionerBackend):
    """Projects are data folders of a registered memory system, always served (read-only by default)."""

    module = "tasks_lib.memory.provisioner.system"
    default_serve = "ro"
    always_serves = True

    def configure(self) -> None:
        """Refuse an unknown memory system before anything is read."""
        system_name()

    def populate(self, folder: Path, project: NewProject) -> None:
        """Store the artifacts through the system's adapter in `folder/data` and write the receipt."""
        from tasks_lib.memory.registry import open_memory_system

        system, entries = system_name(), project.artifacts.entries()
        with open_memory_system(system, folder / DATA_DIR, embedder=configured_embedder(DEFAULT_EMBEDDER)) as adapter:
            adapter.create_realm(project.realm)
            ids = remember_entries(adapter, project.realm, entries)
        receipt = SystemProject(system=system, realm=project.realm, memory_ids=ids,
                                sources={aid: source for aid, source, *_ in entries},
                                texts={aid: item.text for aid, _, item, *_ in entries})
        (folder / PROJECT_FILE).write_text(receipt.model_dump_json(indent=2) + "\n")

    def start_server(self, folder: Path, realm: str, read_only: bool) -> ServedReplica:
        """Serve the project's data folder with the system's server."""
        return start_system_server(system_name(), folder / DATA_DIR, embedder=configured_embedder(DEFAULT_EMBEDDER),
                                   realm=realm, read_only=read_only, own_session=False)

    def open_project(self, folder: Path) -> ServedSystem | None:
        """Reach the project's server; None when it is not served (never restored, or destroyed)."""
        served = served_replica(folder)
        if served is None:
            return None
        receipt = SystemProject.model_validate_json((folder / PROJECT_FILE).read_bytes())
        return ServedSystem(MemoryClient(served.socket_path), receipt)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.provisioner.system VERB` (see `verbs.dispatch`)."""
    return dispatch(SystemBackend(), argv)


if __name__ == "__main__":
    sys.exit(main())
