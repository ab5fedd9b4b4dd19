"""A provisioner for any registered memory system (Chroma, the MCP memory server, the reference store).

    python -m tasks_lib.memory.provisioner.system restore|snapshot|destroy   (one JSON object in, one out)
    memtrial-system-provisioner restore|snapshot|destroy                     (the same, installed)

Environment: MEMTRIAL_PROVISIONER_SYSTEM (a name of `tasks_lib.memory.registry`, required),
MEMTRIAL_PROVISIONER_STATE (the state folder, required), MEMTRIAL_PROVISIONER_EMBEDDER (default
hashed, for systems that use memtrial's embedders) and MEMTRIAL_PROVISIONER_SERVE (`ro`, the
default: the server refuses remember and forget; `1`: it accepts them).

Restore reads the artifacts in the reference provisioner's format (see `provisioner_main`),
stores evidence then nodes through the system's own adapter in a fresh folder
`projects/<project>/data` (corrections supersede what they name), records artifact id -> memory
id in `project.json`, and serves that folder on a private socket (`server.serve_system`) in the
provisioner's process group; the response's `env` is the socket and realm, which is how the
agent's hook reaches the system. There is no frozen copy to restore from: each project is built
from the pinned artifacts, which is what makes two projects of the same artifacts equal.

Snapshot asks the running server, never the files: a memory counts as live when its own text
recalls it (so the counts are re-read, not remembered), and each probe runs on the system's lane
of that name (`fulltext` -> keyword, `semantic`, `graph`); a system without the lane returns no
hits for it, so its probe is not found. Hit ids are artifact ids. Destroy stops the server by PID
and removes the project. Exit 2 for a bad request or artifact, 1 for any other failure, with one
line on stderr.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.contracts import ContractModel
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.provisioner.reference import (
    EMBEDDER_ENV,
    PROBE_K,
    PROJECT_FILE,
    SERVE_ENV,
    BadRequestError,
    GraphArtifact,
    Verbs,
    _read_bytes,
    absent_snapshot,
    artifact_entries,
    artifact_realm,
    destroy,
    dispatch,
    parse_evidence,
    parse_graph,
    project_dir,
    project_name,
    remember_entries,
    serve_mode,
    serve_project,
    served_replica,
)
from tasks_lib.memory.delivery.server import MemoryClient, start_system_server
from tasks_lib.memory.provisioner.client import (
    DestroyRequest,
    ProbeHit,
    ProbeResult,
    RestoreRequest,
    RestoreResponse,
    SnapshotRequest,
    SnapshotResponse,
    SnapshotState,
)

SYSTEM_ENV = "MEMTRIAL_PROVISIONER_SYSTEM"
"""Registry name of the memory system to provision; required."""
DATA_DIR = "data"
LANE_OF_PROBE = {"fulltext": "keyword", "semantic": "semantic", "graph": "graph"}
"""The system lane a protocol probe lane runs on."""


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


def _system() -> str:
    from tasks_lib.memory.registry import MEMORY_SYSTEMS

    name = os.environ.get(SYSTEM_ENV, "").strip()
    if name not in MEMORY_SYSTEMS:
        raise BadRequestError(f"{SYSTEM_ENV}: {name!r} is not a memory system; use one of {', '.join(sorted(MEMORY_SYSTEMS))}")
    return name


def restore(request: RestoreRequest) -> RestoreResponse:
    """Store the artifacts in a fresh folder of the system and serve it; the response's env reaches it."""
    from tasks_lib.memory.registry import open_memory_system

    started = time.monotonic()
    system, mode = _system(), serve_mode("ro")
    if mode == "0":
        raise BadRequestError(f"{SERVE_ENV}: this provisioner always serves; use ro (the default) or 1")
    embedder = os.environ.get(EMBEDDER_ENV, "") or "hashed"
    graph_bytes = _read_bytes(request.artifacts.graph, "graph") if request.artifacts.graph else None
    evidence_bytes = (_read_bytes(request.artifacts.evidence_corpus, "evidence_corpus")
                      if request.artifacts.evidence_corpus else None)
    graph = parse_graph(graph_bytes) if graph_bytes is not None else GraphArtifact()
    entries = artifact_entries(parse_evidence(evidence_bytes) if evidence_bytes is not None else [], graph)
    realm = artifact_realm(request.fixture, graph if graph_bytes is not None else None)
    project = project_name(request)
    target = project_dir(project)
    if target.exists():
        raise MemtrialError(f"project: {project} is already restored for run identity {request.run_identity!r}; "
                            "destroy it first or use a new run identity")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{project}-"))
    try:
        with open_memory_system(system, staging / DATA_DIR, embedder=embedder) as adapter:
            adapter.create_realm(realm)
            ids = remember_entries(adapter, realm, entries)
        receipt = SystemProject(system=system, realm=realm, memory_ids=ids,
                                sources={aid: source for aid, source, *_ in entries},
                                texts={aid: item.text for aid, _, item, *_ in entries})
        (staging / PROJECT_FILE).write_text(receipt.model_dump_json(indent=2) + "\n")
        staging.chmod(0o700)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    served = serve_project(target, lambda: start_system_server(system, target / DATA_DIR, embedder=embedder, realm=realm,
                                                               read_only=mode == "ro", own_session=False))
    return RestoreResponse(project=project, queue_before_count=0, restore_seconds=time.monotonic() - started,
                           env=served.env())


def snapshot_project(request: SnapshotRequest) -> SnapshotResponse:
    """Re-read the project through its server and run the probes; an absent project reports nothing."""
    started = time.monotonic()
    served = served_replica(request.project)
    if served is None:
        return absent_snapshot(request, started)
    receipt = SystemProject.model_validate_json((project_dir(request.project) / PROJECT_FILE).read_bytes())
    client = MemoryClient(served.socket_path)
    lanes = tuple(client.ping()["lanes"])
    to_artifact = {mid: aid for aid, mid in receipt.memory_ids.items()}
    live = [aid for aid, mid in receipt.memory_ids.items()
            if mid in {hit.id for hit in client.recall(receipt.realm, receipt.texts[aid], PROBE_K)}]
    evidence = sum(1 for aid in live if receipt.sources[aid] == "evidence")
    results = []
    for probe in request.probes:
        lane = LANE_OF_PROBE[probe.lane]
        hits = client.recall(receipt.realm, probe.query, PROBE_K, lanes=[lane]) if lane in lanes else ()
        shown = tuple(ProbeHit(id=to_artifact.get(hit.id, hit.id), text=hit.text) for hit in hits)
        results.append(ProbeResult(name=probe.name, hits=shown, found=probe.is_met_by(shown)))
    return SnapshotResponse(state=SnapshotState(exists=True, evidence_documents=evidence, graph_nodes=len(live) - evidence,
                                                graph_edges=0),
                            probes=tuple(results), queue_after_count=0, snapshot_seconds=time.monotonic() - started)


_VERBS: Verbs = {
    "restore": (RestoreRequest, restore),
    "snapshot": (SnapshotRequest, snapshot_project),
    "destroy": (DestroyRequest, destroy),  # the reference provisioner's: stop the server by PID, remove the folder
}


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.provisioner.system VERB` (see `provisioner_main.dispatch`)."""
    return dispatch(argv, _VERBS, "tasks_lib.memory.provisioner.system")


if __name__ == "__main__":
    sys.exit(main())
