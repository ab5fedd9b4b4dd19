"""The three protocol verbs for any memory system; a provisioner implements only `ProvisionerBackend`.

    python -m MODULE restore|snapshot|destroy   (one JSON object in on stdin, one out on stdout;
                                                 the models are in `tasks_lib.memory.provisioner.client`)

State lives under the folder named by MEMTRIAL_PROVISIONER_STATE:

    projects/<project>/             one run's private state (0700), filled by the backend in a hidden
                                    staging folder and renamed into place only when complete
    projects/<project>/project.json the backend's receipt of what the project holds
    projects/<project>/serve.json   the served project's PID and socket, when restore started a server

Restore reads the request's artifacts (`artifact_format`), refuses a run identity that is already
restored, lets the backend store the memories in a fresh project, then serves it on a private
socket when MEMTRIAL_PROVISIONER_SERVE is `1` (or `ro`, read-only). The server stays in the
provisioner's process group, so a restore killed on timeout takes it along; a server that fails
to start is stopped and its project removed. The response's `env` names what the agent needs:
the socket and realm when served, else the backend's `replica_env`.

Snapshot opens the project through the backend and reports what is live there now: evidence
documents and graph nodes are live memories (a memory stored during the run counts as a node,
under its store id), edges are recorded artifact edges whose two ends are still live. Each probe
runs on the system lane of its name (`fulltext` -> keyword, `semantic`, `graph`); hit ids are
artifact ids, and a graph probe adds its hits' neighbours along the artifact edges (a graph lane
that finds nothing finds no neighbour either). The kill switch and ablation variables are removed
from this process's environment first: a snapshot measures presence, not delivery.

Destroy stops the project's server by PID and removes its folder; an absent project is fine.
A bad request or artifact exits 2, any other failure 1; diagnostics are one line on stderr,
stdout holds only the response.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property, partial
from pathlib import Path
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ValidationError

from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery.server import ServedReplica, stop_server
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV
from tasks_lib.memory.provisioner.artifact_format import (
    BadRequestError,
    ReadArtifacts,
    artifact_realm,
    bad_request,
    read_artifacts,
)
from tasks_lib.memory.provisioner.client import (
    DestroyRequest,
    DestroyResponse,
    Probe,
    ProbeHit,
    ProbeResult,
    RestoreRequest,
    RestoreResponse,
    SnapshotRequest,
    SnapshotResponse,
    SnapshotState,
)
from tasks_lib.settings import PROVISIONER_EMBEDDER, PROVISIONER_SERVE, PROVISIONER_STATE

STATE_ENV, SERVE_ENV, EMBEDDER_ENV = PROVISIONER_STATE.name, PROVISIONER_SERVE.name, PROVISIONER_EMBEDDER.name
"""The provisioner's settings (`tasks_lib.settings`); the state folder is required."""

PROJECT_FILE = "project.json"
"""Receipt of a restored project, inside its folder."""
SERVE_FILE = "serve.json"
"""The served project (PID, socket), inside its folder."""
PROBE_K = 10
"""Hits a probe asks each realm for."""
STORE_LANE = {"fulltext": "keyword", "semantic": "semantic", "graph": "graph"}
"""The system lane a protocol probe lane runs on."""

EXIT_BAD_REQUEST = 2
EXIT_FAILED = 1

ServeMode = Literal["0", "1", "ro"]
"""Value of MEMTRIAL_PROVISIONER_SERVE: `0` not served, `1` served, `ro` served read-only."""


# --------------------------------------------------------------------------- what a provisioner implements


@dataclass(frozen=True)
class NewProject:
    """What restore hands a backend to build one project from."""

    request: RestoreRequest
    """The restore request (fixture, arm, run identity, artifact paths)."""
    name: str
    """The project handle (`project_name` of the request)."""
    realm: str
    """Realm the artifacts' memories are stored in."""
    artifacts: ReadArtifacts
    """The request's artifacts, read; `artifacts.entries()` parses what is to be stored."""
    state: Path
    """The state folder, for whatever the backend shares between projects."""


@dataclass(frozen=True)
class ArtifactIndex:
    """What a project records of its artifacts, so counts and hits speak artifact ids."""

    memory_ids: Mapping[str, str]
    """Artifact id -> the system's memory id."""
    sources: Mapping[str, str]
    """Artifact id -> `evidence` or `node`."""
    texts: Mapping[str, str]
    """Artifact id -> its text."""
    edges: tuple[tuple[str, str], ...] = ()
    """Artifact edges (source id, target id) the project keeps."""

    def artifact_id(self, memory_id: str) -> str:
        """The artifact id of a system memory id; a memory stored during the run keeps its own id."""
        return self.to_artifact.get(memory_id, memory_id)

    @cached_property
    def to_artifact(self) -> dict[str, str]:
        """Memory id -> artifact id."""
        return {mid: aid for aid, mid in self.memory_ids.items()}


class LiveProject(ABC):
    """A restored project opened for one snapshot; `close` releases what opening it took."""

    def __init__(self, index: ArtifactIndex) -> None:
        self.index = index

    @abstractmethod
    def live_ids(self) -> set[str]:
        """The system's ids of every memory live in the project now (neither superseded nor forgotten).

        Raises MemtrialError or OSError when the system cannot be read.
        """

    @abstractmethod
    def recall(self, lane: str, query: str, k: int) -> Sequence[MemoryHit]:
        """Up to `k` hits (per realm) for `query` on the system lane `lane`, best first; none when the system lacks the lane.

        Raises MemtrialError or OSError when the system cannot be read.
        """

    def close(self) -> None:  # noqa: B027 - a default no-op; projects holding resources override it
        """Release the project; the default has nothing to release."""

    def __enter__(self) -> LiveProject:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ProvisionerBackend(ABC):
    """What one provisioner does its own way: how a project's memories are stored into its system and read back.

    Every method may raise BadRequestError (exit 2) for a malformed request, artifact or setting,
    and MemtrialError, OSError or sqlite3.Error (exit 1) for any other failure.
    """

    module: ClassVar[str]
    """The module run as `python -m MODULE VERB`, named in the usage line."""
    default_serve: ClassVar[ServeMode]
    """Serving mode when MEMTRIAL_PROVISIONER_SERVE is unset."""
    always_serves: ClassVar[bool] = False
    """True when a project is reachable only through its server: serving mode `0` is a bad request."""

    def configure(self) -> None:  # noqa: B027 - a default no-op; backends with settings override it
        """Check this provisioner's own settings before restore reads anything; raises BadRequestError.

        The default has nothing to check.
        """

    @abstractmethod
    def populate(self, folder: Path, project: NewProject) -> None:
        """Store the project's memories in `folder` (empty, not yet live) and write its PROJECT_FILE there.

        Raises BadRequestError for a malformed artifact; restore removes `folder` on any error.
        """

    @abstractmethod
    def start_server(self, folder: Path, realm: str, read_only: bool) -> ServedReplica:
        """Serve the restored project `folder` on a private socket, in this process group.

        Raises MemtrialError when the server does not start; restore then removes the project.
        """

    def replica_env(self, folder: Path, realm: str) -> dict[str, str]:
        """The env that reaches the unserved project `folder`; called only when `always_serves` is false.

        Raises NotImplementedError unless the backend overrides it.
        """
        raise NotImplementedError(f"{type(self).__name__} always serves its projects")

    @abstractmethod
    def open_project(self, folder: Path) -> LiveProject | None:
        """The live project at `folder`, or None when there is none (never restored, or destroyed).

        Raises MemtrialError when the project is there but cannot be read.
        """


# --------------------------------------------------------------------------- settings and folders


def state_root() -> Path:
    """The state folder from MEMTRIAL_PROVISIONER_STATE; raise BadRequestError when unset."""
    value = PROVISIONER_STATE.text()
    if not value:
        raise BadRequestError(f"{STATE_ENV} is not set; set it to the folder where frozen stores and projects are kept")
    return Path(value).absolute()


def serve_mode(default: ServeMode) -> ServeMode:
    """MEMTRIAL_PROVISIONER_SERVE (`default` when unset); raise BadRequestError for any other value than 0, 1 or ro."""
    mode = PROVISIONER_SERVE.text().strip() or default
    if mode not in ("0", "1", "ro"):
        raise BadRequestError(f"{SERVE_ENV}: {mode!r} is not 1, ro or 0")
    return mode  # type: ignore[return-value]


def configured_embedder(default: str) -> str:
    """MEMTRIAL_PROVISIONER_EMBEDDER, or `default` when unset."""
    return PROVISIONER_EMBEDDER.text(default=default)


def project_dir(project: str) -> Path:
    """The folder of `project` (the name is already validated by the request model)."""
    return state_root() / "projects" / project


def project_name(request: RestoreRequest) -> str:
    """The project handle: a digest of fixture, arm and run identity, so identities never share state."""
    identity = "\0".join((request.fixture, request.graph_arm, request.run_identity))
    return "mt-" + hashlib.sha256(identity.encode()).hexdigest()[:24]


def serve_project(target: Path, start: Callable[[], ServedReplica]) -> ServedReplica:
    """Start the project's server and record it in `target/serve.json`; on failure stop it and remove `target`."""
    served = None
    try:
        served = start()
        (target / SERVE_FILE).write_text(served.model_dump_json(indent=2) + "\n")
    except BaseException:
        if served is not None:
            _stop(served)
        shutil.rmtree(target, ignore_errors=True)
        raise
    return served


def served_replica(folder: Path) -> ServedReplica | None:
    """The server recorded for the project `folder`, if restore started one."""
    path = folder / SERVE_FILE
    if not path.is_file():
        return None
    return ServedReplica.model_validate_json(path.read_bytes())


def _stop(served: ServedReplica) -> None:
    stop_server(Path(served.socket_dir))
    shutil.rmtree(served.socket_dir, ignore_errors=True)


# --------------------------------------------------------------------------- verbs


def restore(backend: ProvisionerBackend, request: RestoreRequest) -> RestoreResponse:
    """Build the arm's memories into a fresh private project for one run identity, served when asked."""
    started = time.monotonic()
    state = state_root()
    backend.configure()
    mode = serve_mode(backend.default_serve)
    if mode == "0" and backend.always_serves:
        other = "1" if backend.default_serve == "ro" else "ro"
        raise BadRequestError(f"{SERVE_ENV}: this provisioner always serves; use {backend.default_serve} (the default) or {other}")
    artifacts = read_artifacts(request.artifacts)
    realm = artifact_realm(request.fixture, artifacts.graph)
    name = project_name(request)
    target = state / "projects" / name
    if target.exists():
        raise MemtrialError(f"project: {name} is already restored for run identity {request.run_identity!r}; "
                            "destroy it first or use a new run identity")
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{name}-"))
    try:
        backend.populate(staging, NewProject(request=request, name=name, realm=realm, artifacts=artifacts, state=state))
        staging.chmod(0o700)
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    if mode == "0":
        env = backend.replica_env(target, realm)
    else:
        env = serve_project(target, lambda: backend.start_server(target, realm, mode == "ro")).env()
    return RestoreResponse(project=name, queue_before_count=0, restore_seconds=time.monotonic() - started, env=env)


def snapshot(backend: ProvisionerBackend, request: SnapshotRequest) -> SnapshotResponse:
    """Re-read the project through the backend and run the probes; an absent project reports nothing."""
    started = time.monotonic()
    live = backend.open_project(project_dir(request.project))
    if live is None:
        return absent_snapshot(request, started)
    with live:
        index = live.index
        present = {index.artifact_id(mid) for mid in live.live_ids()}
        evidence = sum(1 for aid in present if index.sources.get(aid) == "evidence")
        state = SnapshotState(exists=True, evidence_documents=evidence, graph_nodes=len(present) - evidence,
                              graph_edges=sum(1 for s, t in index.edges if s in present and t in present))
        results = []
        for probe in request.probes:
            hits = probe_hits(live, probe, present)
            results.append(ProbeResult(name=probe.name, hits=hits, found=probe.is_met_by(hits)))
    return SnapshotResponse(state=state, probes=tuple(results), queue_after_count=0,
                            snapshot_seconds=time.monotonic() - started)


def probe_hits(live: LiveProject, probe: Probe, present: set[str]) -> tuple[ProbeHit, ...]:
    """The probe's hits in artifact ids, each once; a graph probe adds its hits' live neighbours along the edges."""
    index = live.index
    texts: dict[str, str] = {}
    order: list[str] = []
    for hit in live.recall(STORE_LANE[probe.lane], probe.query, PROBE_K):
        aid = index.artifact_id(hit.id)
        if aid not in texts:
            texts[aid] = hit.text
            order.append(aid)
    if probe.lane == "graph":
        neighbours = [b for a in order for s, t in index.edges for x, b in ((s, t), (t, s)) if x == a and b in present]
        order = list(dict.fromkeys([*order, *neighbours]))
        texts.update({aid: index.texts[aid] for aid in order if aid not in texts and aid in index.texts})
    return tuple(ProbeHit(id=aid, text=texts[aid]) for aid in order if aid in texts)


def absent_snapshot(request: SnapshotRequest, started: float) -> SnapshotResponse:
    """The snapshot of a project that is not live: nothing exists, no probe is found."""
    return SnapshotResponse(
        state=SnapshotState(exists=False, evidence_documents=0, graph_nodes=0, graph_edges=0),
        probes=tuple(ProbeResult(name=p.name, hits=(), found=False) for p in request.probes),
        queue_after_count=0, snapshot_seconds=time.monotonic() - started)


def destroy(request: DestroyRequest) -> DestroyResponse:
    """Stop the project's server (by PID) and remove its folder; an absent project is fine."""
    target = project_dir(request.project)
    served = served_replica(target) if target.exists() else None
    if served is not None:
        _stop(served)
    if target.exists():
        shutil.rmtree(target)
    return DestroyResponse(ok=True)


# --------------------------------------------------------------------------- entry point

Verbs = dict[str, tuple[type[BaseModel], Callable[[Any], BaseModel]]]
"""Verb name -> (its request model, its handler)."""


def verbs(backend: ProvisionerBackend) -> Verbs:
    """The three verbs, answered for `backend`."""
    return {
        "restore": (RestoreRequest, partial(restore, backend)),
        "snapshot": (SnapshotRequest, partial(snapshot, backend)),
        "destroy": (DestroyRequest, destroy),
    }


def run(verb: str, stdin: bytes, table: Verbs) -> BaseModel:
    """Validate `stdin` as the verb's request and answer it; raises BadRequestError or MemtrialError."""
    model, handler = table[verb]
    try:
        request = model.model_validate_json(stdin)
    except ValidationError as error:
        raise bad_request(error, f"{verb} request") from None
    return handler(request)


def dispatch(backend: ProvisionerBackend, argv: Sequence[str] | None) -> int:
    """Answer the one verb named in `argv` (default sys.argv[1:]) for `backend`: one JSON object on stdin,
    one on stdout, one diagnostic line on stderr on failure (exit 2 for a bad request, 1 for any other failure)."""
    table = verbs(backend)
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in table:
        sys.stderr.write(f"usage: python -m {backend.module} {{{'|'.join(table)}}}\n")
        return EXIT_BAD_REQUEST
    for name in (MEMORY_OFF_ENV, ABLATE_LANES_ENV):
        os.environ.pop(name, None)
    verb = args[0]
    try:
        response = run(verb, sys.stdin.buffer.read(), table)
    except BadRequestError as error:
        sys.stderr.write(f"{verb}: bad request: {error}\n")
        return EXIT_BAD_REQUEST
    except (MemtrialError, OSError, sqlite3.Error) as error:
        sys.stderr.write(f"{verb}: failed: {type(error).__name__}: {error}\n")
        return EXIT_FAILED
    sys.stdout.write(json.dumps(response.model_dump(mode="json"), separators=(",", ":")) + "\n")
    return 0
