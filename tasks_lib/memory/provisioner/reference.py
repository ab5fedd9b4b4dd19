"""The reference provisioner: the three protocol verbs for memtrial's own memory store.

    python -m tasks_lib.memory.provisioner.reference restore|snapshot|destroy   (one JSON object in, one out)

State lives under the folder named by MEMTRIAL_PROVISIONER_STATE:

    frozen/<key>.sqlite       frozen stores built from artifacts (read-only, shared, never changed)
    frozen/<key>.json         their FrozenStore receipts (sha256, size); key = sha256 of what defines them
    projects/<project>/       one run's private state: memory.sqlite (the replica) and project.json
    projects/<project>/serve.json   the served replica's PID and socket, when restore started a server

Artifacts (the client has resolved and digest-checked them; this code hashes the bytes it reads):

    graph     JSON object {"realm"?: str, "nodes": [{"id", "text", "label"?, "kind"?, "subject"?,
              "supersedes"?: [node ids]}], "edges": [{"source", "target", "relation"}]}; every node
              is one memory of `realm` (default `fixture:<fixture id>`); `kind` defaults to "fact".
    evidence  JSON Lines, one {"id", "text", "kind"?, "subject"?} per line; each line is one memory too.

The check fixture of `tasks_lib.memory.provisioner.check` is in this format. Restore stores evidence
first, then nodes, in file order, freezes the result with `replica.snapshot` (once per key) and
copies the frozen file into the project with `replica.restore_replica` (digest checked), so nothing
a run does can reach the frozen original. Artifact ids and edges live in the provisioner's own
tables (`provisioner_items`, `provisioner_edges`) inside the same file.

Snapshot opens the replica afresh and reports what is stored there now: evidence documents and
graph nodes are live memories (neither superseded nor forgotten; a memory stored during the
run counts as a node), edges are
artifact edges whose two ends are still live. Probes: `fulltext` is the store's keyword lane,
`semantic` its semantic lane, `graph` the store's graph-lane hits (the memories naming the
query's entities, and one hop on), then their neighbours along the artifact edges: a graph lane
that finds nothing finds no neighbour either. Hit ids are artifact ids
(a memory stored during the run keeps its store id). The kill switch and ablation variables are
removed from this process's environment first: a snapshot measures presence, not delivery.

Restore also serves the replica on a private socket when MEMTRIAL_PROVISIONER_SERVE is 1 (or
`ro`, read-only; see `server` and `serve_mode`); the server stays in the provisioner's process group, so a restore
killed on timeout takes it along; destroy stops it by PID before removing the project. The
response's `env` names what the agent needs: the socket and realm when served, else the replica
file and realm. A bad request or
artifact exits 2, any other failure 1; diagnostics are one line on stderr, stdout holds only the
response.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import shutil
import sqlite3
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from tasks_lib.contracts import ContractModel, Sha256, violations_of
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MemoryAdapter, MemoryItem, MemoryKind
from tasks_lib.memory.embeddings import DEFAULT_EMBEDDER
from tasks_lib.memory.errors import InvalidRealmError
from tasks_lib.memory.delivery.hook import REALM_ENV, STORE_ENV
from tasks_lib.memory.realms import validate_realm
from tasks_lib.memory.reference.replica import REPLICA_FILE_NAME, FrozenStore, restore_replica, snapshot
from tasks_lib.memory.delivery.server import ServedReplica, start_server, stop_server
from tasks_lib.memory.switches import ABLATE_LANES_ENV, MEMORY_OFF_ENV
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

STATE_ENV = "MEMTRIAL_PROVISIONER_STATE"
"""Folder holding frozen stores and per-run projects; required."""
SERVE_ENV = "MEMTRIAL_PROVISIONER_SERVE"
"""`1`: restore also serves the replica on a private socket (destroy stops it); `ro`: the same, read-only
(remember and forget refused: for a socket the agent under test can reach); unset or `0`: not served."""
EMBEDDER_ENV = "MEMTRIAL_PROVISIONER_EMBEDDER"
"""Embedder used to build frozen stores (default: the store's default embedder)."""

FORMAT_VERSION = "1"
"""Version of the artifact-to-store conversion; part of every frozen store's key."""
PROJECT_FILE = "project.json"
"""Receipt of a restored project, inside its folder."""
SERVE_FILE = "serve.json"
"""The served replica of a project (PID, socket), inside its folder."""
PROBE_K = 10
"""Hits a probe asks each realm for."""
MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
"""Largest artifact read."""

EXIT_BAD_REQUEST = 2
EXIT_FAILED = 1


class BadRequestError(MemtrialError):
    """The request or an artifact it names does not follow the protocol or the artifact format."""


# --------------------------------------------------------------------------- artifact format


class GraphNode(ContractModel):
    """One memory of the graph artifact."""

    id: str = Field(min_length=1, max_length=200)
    """Artifact id; probes and hits name the memory by it."""
    text: str
    """The memory's text (non-empty UTF-8, at most 16 KiB)."""
    label: str | None = None
    """Short name of the node (recorded with it; the graph probe goes through the store's graph lane, not by label)."""
    kind: MemoryKind = "fact"
    """Kind of memory (convention, fact, decision, procedure, correction, superseded)."""
    subject: str | None = None
    """What the memory is about; a later memory with the same subject supersedes it."""
    supersedes: tuple[str, ...] = ()
    """Artifact ids of earlier memories this one replaces."""


class GraphEdge(ContractModel):
    """A typed link between two nodes."""

    source: str = Field(min_length=1)
    """Artifact id of the source node."""
    target: str = Field(min_length=1)
    """Artifact id of the target node."""
    relation: str = Field(min_length=1)
    """Name of the relation."""


class GraphArtifact(ContractModel):
    """The graph artifact: memories as nodes, plus edges."""

    realm: str | None = None
    """Realm the memories are stored in; default `fixture:<fixture id>`."""
    nodes: tuple[GraphNode, ...] = ()
    """Memories, stored in this order (after the evidence)."""
    edges: tuple[GraphEdge, ...] = ()
    """Links between nodes."""


class EvidenceDoc(ContractModel):
    """One line of the evidence corpus."""

    id: str = Field(min_length=1, max_length=200)
    """Artifact id of the document."""
    text: str
    """The document's text (non-empty UTF-8, at most 16 KiB)."""
    kind: MemoryKind = "fact"
    """Kind of memory the document is stored as."""
    subject: str | None = None
    """What the document is about."""


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


def _read_bytes(path: str, field: str) -> bytes:
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise BadRequestError(f"artifacts.{field}: {path} is {size} bytes; the limit is {MAX_ARTIFACT_BYTES}")
        return file.read_bytes()
    except OSError as error:
        raise BadRequestError(f"artifacts.{field}: cannot read {path} ({error.strerror})") from None


def _validation(error: ValidationError, source: str) -> BadRequestError:
    return BadRequestError("; ".join(str(v) for v in violations_of(error, source)))


def parse_graph(data: bytes, source: str = "graph") -> GraphArtifact:
    """Parse the graph artifact; raise BadRequestError naming the field at fault."""
    try:
        return GraphArtifact.model_validate_json(data)
    except ValidationError as error:
        raise _validation(error, source) from None


def parse_evidence(data: bytes, source: str = "evidence_corpus") -> list[EvidenceDoc]:
    """Parse the evidence corpus (JSON Lines); raise BadRequestError naming the line and field."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise BadRequestError(f"{source}: not UTF-8 (bad byte at offset {error.start}); re-encode it") from None
    docs = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            docs.append(EvidenceDoc.model_validate_json(line))
        except ValidationError as error:
            raise _validation(error, f"{source} line {number}") from None
    return docs


# --------------------------------------------------------------------------- building frozen stores


_PROVISIONER_SCHEMA = """
CREATE TABLE provisioner_items(artifact_id TEXT PRIMARY KEY, memory_id TEXT NOT NULL UNIQUE,
                               source TEXT NOT NULL, label TEXT, text TEXT NOT NULL);
CREATE TABLE provisioner_edges(source TEXT NOT NULL, target TEXT NOT NULL, relation TEXT NOT NULL);
"""


def default_realm(fixture: str) -> str:
    """The realm a graph without one is stored in: `fixture:<fixture id>`."""
    return validate_realm(f"fixture:{fixture}", field="fixture")


def artifact_realm(fixture: str, graph: GraphArtifact | None) -> str:
    """The realm the graph declares, else `default_realm`; raise BadRequestError for a malformed one."""
    if graph is None or graph.realm is None:
        return default_realm(fixture)
    try:
        return validate_realm(graph.realm, field="graph.realm")
    except InvalidRealmError as error:
        raise BadRequestError(str(error)) from None


Entry = tuple[str, str, MemoryItem, str | None, tuple[str, ...]]
"""One artifact item to store: (artifact id, source `evidence` or `node`, item, label, superseded artifact ids)."""


def artifact_entries(evidence: Sequence[EvidenceDoc], graph: GraphArtifact) -> list[Entry]:
    """The artifacts' items in storing order (evidence, then nodes); raise BadRequestError for duplicate ids or dangling edges."""
    entries: list[Entry] = []
    seen: set[str] = set()
    for index, doc in enumerate(evidence):
        entries.append((doc.id, "evidence", _item(f"evidence_corpus[{index}]", doc.text, doc.kind, doc.subject), None, ()))
    for index, node in enumerate(graph.nodes):
        entries.append((node.id, "node", _item(f"graph.nodes[{index}]", node.text, node.kind, node.subject,
                                               has_supersedes=bool(node.supersedes)), node.label, node.supersedes))
    for artifact_id, source, *_ in entries:
        if artifact_id in seen:
            raise BadRequestError(f"{source} id {artifact_id!r} appears twice; ids must be unique across evidence and graph")
        seen.add(artifact_id)
    for index, edge in enumerate(graph.edges):
        for end in (edge.source, edge.target):
            if end not in seen:
                raise BadRequestError(f"graph.edges[{index}]: node {end!r} is not an id of the artifacts; fix the edge")
    return entries


def remember_entries(adapter: MemoryAdapter, realm: str, entries: Sequence[Entry]) -> dict[str, str]:
    """Store `entries` in `realm` of any adapter, in order, batched between supersessions; return artifact id -> memory id."""
    ids: dict[str, str] = {}
    pending: list[tuple[str, MemoryItem]] = []

    def flush() -> None:
        if pending:
            stored = adapter.remember(realm, [item for _, item in pending])
            ids.update((aid, mid) for (aid, _), mid in zip(pending, stored))
            pending.clear()

    for artifact_id, _, item, _, supersedes in entries:
        if supersedes:
            flush()
            missing = [s for s in supersedes if s not in ids]
            if missing:
                raise BadRequestError(f"graph node {artifact_id!r}: supersedes {missing}, which are not earlier memories")
            item = item.model_copy(update={"supersedes": tuple(ids[s] for s in supersedes)})
            (ids[artifact_id],) = adapter.remember(realm, [item])
        else:
            pending.append((artifact_id, item))
    flush()
    return ids


def build_store(path: Path, realm: str, evidence: Sequence[EvidenceDoc], graph: GraphArtifact, embedder: str) -> None:
    """Create the store at `path` holding `evidence` then `graph.nodes` in `realm`, with ids and edges recorded."""
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    entries = artifact_entries(evidence, graph)
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
                             [(e.source, e.target, e.relation) for e in graph.edges])
    finally:
        conn.close()


def _item(field: str, text: str, kind: str, subject: str | None, has_supersedes: bool = False) -> MemoryItem:
    try:
        item = MemoryItem(text=text, kind=kind, subject=subject)  # type: ignore[arg-type]
    except ValidationError as error:
        first = error.errors()[0]
        raise BadRequestError(f"{field}.{'.'.join(map(str, first['loc']))}: {first['msg'].removeprefix('Value error, ')}") from None
    if kind == "correction" and subject is None and not has_supersedes:
        raise BadRequestError(f"{field}.subject: a correction must say what it corrects; give subject or supersedes")
    return item


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def frozen_store(state: Path, realm: str, graph_bytes: bytes | None, evidence_bytes: bytes | None) -> tuple[Path, FrozenStore]:
    """The frozen store for these artifact bytes (built once per key, under a lock) and its receipt."""
    embedder = os.environ.get(EMBEDDER_ENV, "") or DEFAULT_EMBEDDER
    parts = [FORMAT_VERSION, embedder, realm,
             hashlib.sha256(graph_bytes).hexdigest() if graph_bytes is not None else "-",
             hashlib.sha256(evidence_bytes).hexdigest() if evidence_bytes is not None else "-"]
    key = hashlib.sha256("\n".join(parts).encode()).hexdigest()[:32]
    folder = state / "frozen"
    frozen, receipt_path = folder / f"{key}.sqlite", folder / f"{key}.json"
    with _locked(folder / f"{key}.lock"):
        if frozen.is_file() and receipt_path.is_file():
            return frozen, FrozenStore.model_validate_json(receipt_path.read_bytes())
        frozen.unlink(missing_ok=True)
        graph = parse_graph(graph_bytes) if graph_bytes is not None else GraphArtifact()
        evidence = parse_evidence(evidence_bytes) if evidence_bytes is not None else []
        with tempfile.TemporaryDirectory(dir=folder, prefix=".build-") as scratch:
            built = Path(scratch) / "store.sqlite"
            build_store(built, realm, evidence, graph, embedder)
            receipt = snapshot(built, frozen)
        temporary = receipt_path.with_suffix(".tmp")
        temporary.write_text(receipt.model_dump_json())
        os.replace(temporary, receipt_path)
        return frozen, receipt


# --------------------------------------------------------------------------- verbs


def state_root() -> Path:
    """The state folder from MEMTRIAL_PROVISIONER_STATE; raise BadRequestError when unset."""
    value = os.environ.get(STATE_ENV, "")
    if not value:
        raise BadRequestError(f"{STATE_ENV} is not set; set it to the folder where frozen stores and projects are kept")
    return Path(value).absolute()


def project_dir(project: str) -> Path:
    """The folder of `project` (the name is already validated by the request model)."""
    return state_root() / "projects" / project


def project_name(request: RestoreRequest) -> str:
    """The project handle: a digest of fixture, arm and run identity, so identities never share state."""
    identity = "\0".join((request.fixture, request.graph_arm, request.run_identity))
    return "mt-" + hashlib.sha256(identity.encode()).hexdigest()[:24]


def restore(request: RestoreRequest) -> RestoreResponse:
    """Make the arm's frozen store live in a fresh private replica for one run identity."""
    started = time.monotonic()
    state = state_root()
    mode = serve_mode("0")
    graph_bytes = _read_bytes(request.artifacts.graph, "graph") if request.artifacts.graph else None
    evidence_bytes = (_read_bytes(request.artifacts.evidence_corpus, "evidence_corpus")
                      if request.artifacts.evidence_corpus else None)
    realm = artifact_realm(request.fixture, parse_graph(graph_bytes) if graph_bytes is not None else None)
    project = project_name(request)
    target = project_dir(project)
    if target.exists():
        raise MemtrialError(f"project: {project} is already restored for run identity {request.run_identity!r}; "
                            "destroy it first or use a new run identity")
    frozen, receipt = frozen_store(state, realm, graph_bytes, evidence_bytes)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".{project}-"))
    try:
        restore_replica(frozen, staging / "run", expected_sha256=receipt.sha256)
        for item in (staging / "run").iterdir():
            item.rename(staging / item.name)
        (staging / "run").rmdir()
        staging.chmod(0o700)
        receipt_json = ProjectReceipt(project=project, fixture=request.fixture, graph_arm=request.graph_arm,
                                      run_identity=request.run_identity, realm=realm,
                                      frozen_sha256=receipt.sha256, replica=REPLICA_FILE_NAME)
        (staging / PROJECT_FILE).write_text(receipt_json.model_dump_json(indent=2) + "\n")
        staging.rename(target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    env = {STORE_ENV: str(target / REPLICA_FILE_NAME), REALM_ENV: realm}
    if mode != "0":
        env = serve_project(target, lambda: start_server(target / REPLICA_FILE_NAME, realm=realm, read_only=mode == "ro",
                                                         own_session=False)).env()
    return RestoreResponse(project=project, queue_before_count=0, restore_seconds=time.monotonic() - started, env=env)


def serve_mode(default: str) -> str:
    """MEMTRIAL_PROVISIONER_SERVE (`default` when unset): `0` not served, `1` served, `ro` served read-only."""
    mode = os.environ.get(SERVE_ENV, "").strip() or default
    if mode not in ("0", "1", "ro"):
        raise BadRequestError(f"{SERVE_ENV}: {mode!r} is not 1, ro or 0")
    return mode


def serve_project(target: Path, start: Callable[[], ServedReplica]) -> ServedReplica:
    """Start the project's server and record it in `target/serve.json`; on failure stop it and remove `target`."""
    served = None
    try:
        served = start()
        (target / SERVE_FILE).write_text(served.model_dump_json(indent=2) + "\n")
    except BaseException:
        if served is not None:
            stop_server(Path(served.socket_dir))
            shutil.rmtree(served.socket_dir, ignore_errors=True)
        shutil.rmtree(target, ignore_errors=True)
        raise
    return served


def served_replica(project: str) -> ServedReplica | None:
    """The served replica recorded for `project`, if restore started one."""
    path = project_dir(project) / SERVE_FILE
    if not path.is_file():
        return None
    return ServedReplica.model_validate_json(path.read_bytes())


def _live_state(replica: Path) -> tuple[object, dict[str, str], dict[str, tuple[str, str | None, str]], list[tuple[str, str]]]:
    """Open the replica: store, memory id -> artifact id, artifact id -> (source, label, text), edges."""
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    store = SqliteMemoryStore(replica, create=False)
    conn = sqlite3.connect(f"file:{replica}?mode=ro", uri=True)
    try:
        items = conn.execute("SELECT artifact_id, memory_id, source, label, text FROM provisioner_items").fetchall()
        edges = [(s, t) for s, t in conn.execute("SELECT source, target FROM provisioner_edges")]
    except sqlite3.DatabaseError as error:
        store.close()
        raise MemtrialError(f"project: replica {replica} has no provisioner tables ({error}); restore it again") from None
    finally:
        conn.close()
    to_artifact = {mid: aid for aid, mid, _, _, _ in items}
    meta = {aid: (source, label, text) for aid, _, source, label, text in items}
    return store, to_artifact, meta, edges


def snapshot_project(request: SnapshotRequest) -> SnapshotResponse:
    """Re-read the project's replica and run the probes; an absent project reports nothing."""
    started = time.monotonic()
    replica = project_dir(request.project) / REPLICA_FILE_NAME
    if not replica.is_file():
        return absent_snapshot(request, started)
    store, to_artifact, meta, edges = _live_state(replica)
    try:
        realms = store.realms()  # type: ignore[attr-defined]
        live = {mid for realm in realms for mid in store.live_ids(realm)}  # type: ignore[attr-defined]
        live_artifacts = {to_artifact.get(mid, mid) for mid in live}
        evidence = sum(1 for aid in live_artifacts if meta.get(aid, ("node", None, ""))[0] == "evidence")
        state = SnapshotState(exists=True, evidence_documents=evidence, graph_nodes=len(live_artifacts) - evidence,
                              graph_edges=sum(1 for s, t in edges if s in live_artifacts and t in live_artifacts))
        results = []
        for probe in request.probes:
            hits = _run_probe(store, realms, probe, to_artifact, meta, edges, live_artifacts)
            results.append(ProbeResult(name=probe.name, hits=hits, found=probe.is_met_by(hits)))
    finally:
        store.close()  # type: ignore[attr-defined]
    return SnapshotResponse(state=state, probes=tuple(results), queue_after_count=0,
                            snapshot_seconds=time.monotonic() - started)


_STORE_LANE = {"fulltext": "keyword", "semantic": "semantic", "graph": "graph"}


def _run_probe(store: object, realms: Sequence[str], probe: Probe, to_artifact: dict[str, str],
               meta: dict[str, tuple[str, str | None, str]], edges: list[tuple[str, str]],
               live: set[str]) -> tuple[ProbeHit, ...]:
    texts: dict[str, str] = {}
    order: list[str] = []
    for realm in realms:
        for hit in store.recall(realm, probe.query, PROBE_K, lanes=[_STORE_LANE[probe.lane]]):  # type: ignore[attr-defined]
            aid = to_artifact.get(hit.id, hit.id)
            if aid not in texts:
                texts[aid] = hit.text
                order.append(aid)
    if probe.lane == "graph":
        neighbours = [b for a in order for s, t in edges for x, b in ((s, t), (t, s)) if x == a and b in live]
        order = list(dict.fromkeys([*order, *neighbours]))
        texts.update({aid: meta[aid][2] for aid in order if aid not in texts and aid in meta})
    return tuple(ProbeHit(id=aid, text=texts[aid]) for aid in order if aid in texts)


def destroy(request: DestroyRequest) -> DestroyResponse:
    """Stop the project's server (by PID) and remove its folder; an absent project is fine."""
    target = project_dir(request.project)
    served = served_replica(request.project) if target.exists() else None
    if served is not None:
        stop_server(Path(served.socket_dir))
        shutil.rmtree(served.socket_dir, ignore_errors=True)
    if target.exists():
        shutil.rmtree(target)
    return DestroyResponse(ok=True)


# --------------------------------------------------------------------------- entry point

_VERBS: dict[str, tuple[type[BaseModel], object]] = {
    "restore": (RestoreRequest, restore),
    "snapshot": (SnapshotRequest, snapshot_project),
    "destroy": (DestroyRequest, destroy),
}


Verbs = dict[str, tuple[type[BaseModel], object]]


def run(verb: str, stdin: bytes, verbs: Verbs = _VERBS) -> BaseModel:
    """Validate `stdin` as the verb's request and answer it; raises BadRequestError or MemtrialError."""
    model, handler = verbs[verb]
    try:
        request = model.model_validate_json(stdin)
    except ValidationError as error:
        raise _validation(error, f"{verb} request") from None
    return handler(request)  # type: ignore[operator]


def dispatch(argv: Sequence[str] | None, verbs: Verbs, module: str) -> int:
    """Answer the one verb named in `argv`: one JSON object on stdin, one on stdout, one diagnostic
    line on stderr on failure (exit 2 for a bad request, 1 for any other failure)."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1 or args[0] not in verbs:
        sys.stderr.write(f"usage: python -m {module} {{{'|'.join(verbs)}}}\n")
        return EXIT_BAD_REQUEST
    for name in (MEMORY_OFF_ENV, ABLATE_LANES_ENV):
        os.environ.pop(name, None)
    verb = args[0]
    try:
        response = run(verb, sys.stdin.buffer.read(), verbs)
    except BadRequestError as error:
        sys.stderr.write(f"{verb}: bad request: {error}\n")
        return EXIT_BAD_REQUEST
    except (MemtrialError, OSError, sqlite3.Error) as error:
        sys.stderr.write(f"{verb}: failed: {type(error).__name__}: {error}\n")
        return EXIT_FAILED
    sys.stdout.write(json.dumps(response.model_dump(mode="json"), separators=(",", ":")) + "\n")
    return 0


def absent_snapshot(request: SnapshotRequest, started: float) -> SnapshotResponse:
    """The snapshot of a project that is not live: nothing exists, no probe is found."""
    return SnapshotResponse(
        state=SnapshotState(exists=False, evidence_documents=0, graph_nodes=0, graph_edges=0),
        probes=tuple(ProbeResult(name=p.name, hits=(), found=False) for p in request.probes),
        queue_after_count=0, snapshot_seconds=time.monotonic() - started)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.provisioner.reference VERB` (see `dispatch`)."""
    return dispatch(argv, _VERBS, "tasks_lib.memory.provisioner.reference")


if __name__ == "__main__":
    sys.exit(main())
