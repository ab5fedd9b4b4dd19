"""The artifact format memtrial's provisioners read, and how its items are stored in any memory system.

    graph     JSON object {"realm"?: str, "nodes": [{"id", "text", "label"?, "kind"?, "subject"?,
              "supersedes"?: [node ids]}], "edges": [{"source", "target", "relation"}]}; every node
              is one memory of `realm` (default `fixture:<fixture id>`); `kind` defaults to "fact".
    evidence  JSON Lines, one {"id", "text", "kind"?, "subject"?} per line; each line is one memory too.

The check fixture of `tasks_lib.memory.provisioner.check` is in this format. Items are stored
evidence first, then nodes, in file order; a node that supersedes others is stored after them,
with their memory ids. Every malformed input raises `BadRequestError` naming the field at fault.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, ValidationError

from tasks_lib.contracts import ContractModel, violations_of
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MemoryAdapter, MemoryItem, MemoryKind
from tasks_lib.memory.errors import InvalidRealmError
from tasks_lib.memory.provisioner.client import RestoreArtifacts
from tasks_lib.memory.realms import validate_realm

MAX_ARTIFACT_BYTES = 64 * 1024 * 1024
"""Largest artifact read."""


class BadRequestError(MemtrialError):
    """The request or an artifact it names does not follow the protocol or the artifact format."""


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


def bad_request(error: ValidationError, source: str) -> BadRequestError:
    """A BadRequestError listing every violation of `error`, each prefixed by `source`."""
    return BadRequestError("; ".join(str(v) for v in violations_of(error, source)))


def read_artifact(path: str, field: str) -> bytes:
    """The bytes of the artifact at `path`; raise BadRequestError naming `artifacts.<field>` when unreadable or too large."""
    file = Path(path)
    try:
        size = file.stat().st_size
        if size > MAX_ARTIFACT_BYTES:
            raise BadRequestError(f"artifacts.{field}: {path} is {size} bytes; the limit is {MAX_ARTIFACT_BYTES}")
        return file.read_bytes()
    except OSError as error:
        raise BadRequestError(f"artifacts.{field}: cannot read {path} ({error.strerror})") from None


def parse_graph(data: bytes, source: str = "graph") -> GraphArtifact:
    """Parse the graph artifact; raise BadRequestError naming the field at fault."""
    try:
        return GraphArtifact.model_validate_json(data)
    except ValidationError as error:
        raise bad_request(error, source) from None


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
            raise bad_request(error, f"{source} line {number}") from None
    return docs


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


@dataclass(frozen=True)
class ReadArtifacts:
    """The artifacts of one restore request: their bytes (what a cache key hashes) and the parsed graph."""

    graph_bytes: bytes | None
    """The graph artifact's bytes; None when the request names no graph."""
    evidence_bytes: bytes | None
    """The evidence corpus's bytes; None when the request names none."""
    graph: GraphArtifact | None
    """The parsed graph; None when the request names no graph."""

    def entries(self) -> list[Entry]:
        """Parse the evidence and return every item in storing order (see `artifact_entries`); raises BadRequestError."""
        evidence = parse_evidence(self.evidence_bytes) if self.evidence_bytes is not None else []
        return artifact_entries(evidence, self.graph or GraphArtifact())

    def edges(self) -> tuple[GraphEdge, ...]:
        """The graph's edges (none without a graph)."""
        return self.graph.edges if self.graph is not None else ()


def read_artifacts(artifacts: RestoreArtifacts) -> ReadArtifacts:
    """Read the request's artifacts and parse the graph (the evidence is parsed by `entries`); raises BadRequestError."""
    graph_bytes = read_artifact(artifacts.graph, "graph") if artifacts.graph else None
    evidence_bytes = read_artifact(artifacts.evidence_corpus, "evidence_corpus") if artifacts.evidence_corpus else None
    graph = parse_graph(graph_bytes) if graph_bytes is not None else None
    return ReadArtifacts(graph_bytes=graph_bytes, evidence_bytes=evidence_bytes, graph=graph)


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


def _item(field: str, text: str, kind: str, subject: str | None, has_supersedes: bool = False) -> MemoryItem:
    try:
        item = MemoryItem(text=text, kind=kind, subject=subject)  # type: ignore[arg-type]
    except ValidationError as error:
        first = error.errors()[0]
        raise BadRequestError(f"{field}.{'.'.join(map(str, first['loc']))}: {first['msg'].removeprefix('Value error, ')}") from None
    if kind == "correction" and subject is None and not has_supersedes:
        raise BadRequestError(f"{field}.subject: a correction must say what it corrects; give subject or supersedes")
    return item
