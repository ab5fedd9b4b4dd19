"""The provisioner verb framework (`tasks_lib.memory.provisioner.verbs`) with a backend that implements only the interface.

The toy backend keeps a project's memories in a JSON file under its own ids and has no semantic
lane, so what the framework adds (artifact ids, counts, graph neighbours, folders, serving, exit
codes) is what these tests see. The protocol is driven through `dispatch`, stdin to stdout.
"""

from __future__ import annotations

import ast
import io
import json
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery.server import ServedReplica
from tasks_lib.memory.env import REALM_ENV
from tasks_lib.memory.provisioner import verbs
from tasks_lib.memory.provisioner.client import (
    DestroyRequest,
    Probe,
    RestoreArtifacts,
    RestoreRequest,
    RestoreResponse,
    SnapshotRequest,
    SnapshotResponse,
)
from tasks_lib.memory.provisioner.verbs import (
    EXIT_BAD_REQUEST,
    EXIT_FAILED,
    PROJECT_FILE,
    SERVE_ENV,
    STATE_ENV,
    ArtifactIndex,
    LiveProject,
    NewProject,
    ProvisionerBackend,
    dispatch,
)

MEMORIES = "memories.json"
PROVISIONER_DIR = Path(verbs.__file__).parent


class ToyProject(LiveProject):
    """Memories as a list in one file; every memory is live; keyword and graph lanes match every query word."""

    def __init__(self, folder: Path) -> None:
        stored = json.loads((folder / PROJECT_FILE).read_text())
        super().__init__(ArtifactIndex(memory_ids=stored["memory_ids"], sources=stored["sources"], texts=stored["texts"],
                                       edges=tuple(tuple(edge) for edge in stored["edges"])))
        self.memories: dict[str, str] = json.loads((folder / MEMORIES).read_text())

    def live_ids(self) -> set[str]:
        return set(self.memories)

    def recall(self, lane: str, query: str, k: int) -> Sequence[MemoryHit]:
        if lane == "semantic":
            return ()
        words = query.lower().split()
        return [MemoryHit(id=mid, text=text, score=1.0, lanes=(lane,))  # type: ignore[arg-type]
                for mid, text in self.memories.items() if all(w in text.lower() for w in words)][:k]


class ToyBackend(ProvisionerBackend):
    module = "tests.test_provisioner_verbs"
    default_serve = "0"

    def populate(self, folder: Path, project: NewProject) -> None:
        entries = project.artifacts.entries()
        ids = {aid: f"mem-{n}" for n, (aid, *_) in enumerate(entries)}
        (folder / MEMORIES).write_text(json.dumps({ids[aid]: item.text for aid, _, item, *_ in entries}))
        (folder / PROJECT_FILE).write_text(json.dumps({
            "memory_ids": ids, "sources": {aid: source for aid, source, *_ in entries},
            "texts": {aid: item.text for aid, _, item, *_ in entries},
            "edges": [(e.source, e.target) for e in project.artifacts.edges()]}))

    def start_server(self, folder: Path, realm: str, read_only: bool) -> ServedReplica:
        (folder / "server-was-asked").touch()
        raise MemtrialError("toy: the server did not start")

    def replica_env(self, folder: Path, realm: str) -> dict[str, str]:
        return {"TOY_MEMORIES": str(folder / MEMORIES), REALM_ENV: realm}

    def open_project(self, folder: Path) -> ToyProject | None:
        return ToyProject(folder) if (folder / MEMORIES).is_file() else None


class AlwaysServedToy(ToyBackend):
    default_serve = "ro"
    always_serves = True

    def populate(self, folder: Path, project: NewProject) -> None:
        raise AssertionError("restore stored memories before refusing the serving mode")


GRAPH = {"realm": "fixture:toy", "nodes": [{"id": "owner", "text": "Saffron Kestrel owns the release checklist."},
                                           {"id": "topic", "text": "The release checklist ends with tagging."}],
         "edges": [{"source": "owner", "target": "topic", "relation": "owns"}]}
EVIDENCE = '{"id": "doc", "text": "The deploy runbook needs a cobalt marmot signoff."}\n'


def restore_request(root: Path, evidence: str = EVIDENCE) -> RestoreRequest:
    (root / "graph.json").write_text(json.dumps(GRAPH))
    (root / "evidence.jsonl").write_text(evidence)
    return RestoreRequest(fixture="toy", graph_arm="on", run_identity="run-1.t0",
                          artifacts=RestoreArtifacts(graph=str(root / "graph.json"),
                                                     evidence_corpus=str(root / "evidence.jsonl")))


def answer(backend: ProvisionerBackend, verb: str, request: BaseModel, monkeypatch: pytest.MonkeyPatch,
           capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """Run one verb through `dispatch`; return the exit code, stdout and stderr."""
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(request.model_dump_json().encode())))
    code = dispatch(backend, [verb])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv(STATE_ENV, str(tmp_path / "state"))
    monkeypatch.delenv(SERVE_ENV, raising=False)
    return tmp_path / "state"


def test_a_backend_that_only_stores_and_recalls_is_answered_in_artifact_ids(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The framework maps the system's ids back to artifact ids, counts live memories and edges,
    follows edges from graph hits, and a lane the system lacks finds nothing."""
    backend = ToyBackend()
    code, out, err = answer(backend, "restore", restore_request(tmp_path), monkeypatch, capsys)
    assert code == 0, err
    restored = RestoreResponse.model_validate_json(out)
    folder = state / "projects" / restored.project
    assert restored.env == {"TOY_MEMORIES": str(folder / MEMORIES), REALM_ENV: "fixture:toy"}
    assert folder.stat().st_mode & 0o777 == 0o700
    probes = (Probe(name="doc", lane="fulltext", query="cobalt marmot", expect_ids=("doc",)),
              Probe(name="owner", lane="graph", query="saffron kestrel", expect_ids=("owner", "topic")),
              Probe(name="meaning", lane="semantic", query="who signs the runbook", expect_text="cobalt marmot"))
    code, out, err = answer(backend, "snapshot", SnapshotRequest(project=restored.project, probes=probes), monkeypatch, capsys)
    assert code == 0, err
    shown = SnapshotResponse.model_validate_json(out)
    assert (shown.state.evidence_documents, shown.state.graph_nodes, shown.state.graph_edges) == (1, 2, 1)
    assert [h.id for h in shown.probes[0].hits] == ["doc"], "a hit was named by the system's id, not the artifact's"
    assert [h.id for h in shown.probes[1].hits] == ["owner", "topic"], "the graph probe did not follow the edge"
    assert shown.probes[1].hits[1].text == "The release checklist ends with tagging."
    assert [p.found for p in shown.probes] == [True, True, False]

    memories = json.loads((folder / MEMORIES).read_text())
    (folder / MEMORIES).write_text(json.dumps({**memories, "run-7": "Stored during the run."}))
    code, out, _ = answer(backend, "snapshot", SnapshotRequest(project=restored.project), monkeypatch, capsys)
    assert SnapshotResponse.model_validate_json(out).state.graph_nodes == 3, "a memory stored during the run is live state too"

    assert answer(backend, "destroy", DestroyRequest(project=restored.project), monkeypatch, capsys)[0] == 0
    assert not folder.exists()
    code, out, _ = answer(backend, "snapshot", SnapshotRequest(project=restored.project, probes=probes), monkeypatch, capsys)
    assert code == 0 and not SnapshotResponse.model_validate_json(out).state.exists


@pytest.mark.parametrize(
    ("backend", "serve", "evidence", "code", "message"),
    [
        (ToyBackend(), "1", EVIDENCE, EXIT_FAILED, "restore: failed: MemtrialError: toy: the server did not start\n"),
        (AlwaysServedToy(), "0", EVIDENCE, EXIT_BAD_REQUEST, "restore: bad request: MEMTRIAL_PROVISIONER_SERVE: "
         "this provisioner always serves; use ro (the default) or 1\n"),
        (ToyBackend(), "0", EVIDENCE + '{"id": "doc-2"}\n', EXIT_BAD_REQUEST, "restore: bad request: evidence_corpus line 2"),
    ],
    ids=["server-fails-to-start", "mode-0-on-an-always-serving-backend", "malformed-artifact"],
)
def test_a_refused_or_failed_restore_leaves_no_project(
        tmp_path: Path, state: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
        backend: ProvisionerBackend, serve: str, evidence: str, code: int, message: str) -> None:
    """A half-built project (or its staging folder) would make the retry of the same run identity
    be refused as already restored; an always-serving backend refuses mode 0 before it stores anything."""
    monkeypatch.setenv(SERVE_ENV, serve)
    exit_code, out, err = answer(backend, "restore", restore_request(tmp_path, evidence), monkeypatch, capsys)
    assert (exit_code, out) == (code, "")
    assert err.startswith(message) and err.endswith("\n") and err.count("\n") == 1, err
    projects = state / "projects"
    assert not projects.exists() or list(projects.iterdir()) == [], "the restore left its project or staging folder"


def test_a_verb_outside_the_protocol_names_the_backends_module(capsys: pytest.CaptureFixture[str]) -> None:
    assert dispatch(ToyBackend(), ["freeze"]) == EXIT_BAD_REQUEST
    assert capsys.readouterr().err == "usage: python -m tests.test_provisioner_verbs {restore|snapshot|destroy}\n"


def test_no_private_name_is_imported_across_provisioner_modules() -> None:
    """Issue #14: the system provisioner imported a private helper of the reference one; a shared
    need belongs in a public name of the module both import."""
    crossing = [f"{path.name}: {node.module}.{alias.name}"
                for path in sorted(PROVISIONER_DIR.glob("*.py"))
                for node in ast.walk(ast.parse(path.read_text()))
                if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tasks_lib")
                for alias in node.names if alias.name.startswith("_")]
    assert len(list(PROVISIONER_DIR.glob("*.py"))) >= 6, "the provisioner modules were not found, so nothing was checked"
    assert crossing == []
