"""The reference provisioner (`python -m tasks_lib.memory.provisioner.reference`) against the strict client.

It must pass every conformance check, as a file replica and as a served one; its frozen stores
must never change; a malformed artifact must be refused with the field named.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.contracts import ArmArtifacts, ArtifactRef
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.server import ServedReplica
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV, REALM_ENV, SOCKET_ENV, STORE_ENV
from tasks_lib.memory.provisioner.check import CHECK_NAMES, check_provisioner, format_results
from tasks_lib.memory.provisioner.client import (
    Probe,
    ProvisionerExitError,
    ProvisionerTimeoutError,
    destroy_sync,
    make_provisioner,
    restore_sync,
    snapshot_sync,
)
from tasks_lib.memory.provisioner.verbs import SERVE_FILE, STATE_ENV
from tasks_lib.memory.reference.replica import REPLICA_FILE_NAME
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import sha256_file
from tests.test_memory_adapters import alive

ARGV = [sys.executable, "-m", "tasks_lib.memory.provisioner.reference"]
REALM = "fixture:uploader"


@pytest.mark.parametrize("serve", ["0", "1"], ids=["file-replica", "served-replica"])
def test_reference_provisioner_passes_every_conformance_check(tmp_path: Path, serve: str) -> None:
    env = {STATE_ENV: str(tmp_path / "state"), "MEMTRIAL_PROVISIONER_SERVE": serve}
    results = check_provisioner(ARGV, tmp_path / "fixture", env=env)
    assert [r.name for r in results] == list(CHECK_NAMES)
    assert all(r.passed for r in results), format_results(results)
    assert list((tmp_path / "state" / "projects").iterdir()) == [], "destroy left a project behind"


def _write(root: Path, name: str, data: str) -> ArtifactRef:
    path = root / name
    path.write_text(data)
    return ArtifactRef(path=name, sha256=sha256_file(path))


def _graph(root: Path, graph: dict[str, object]) -> ArmArtifacts:
    return ArmArtifacts(arm="on", graph=_write(root, "graph.json", json.dumps(graph)))


UPLOADER = {
    "realm": REALM,
    "nodes": [
        {"id": "old-code", "text": "The uploader exits with code 1 when the disk quota is full.", "kind": "superseded"},
        {"id": "new-code", "text": "The uploader exits with code 75 when the disk quota is full.", "kind": "correction",
         "supersedes": ["old-code"]},
        {"id": "owner", "label": "quota owner", "text": "Priya Raman owns the quota alerts."},
    ],
    "edges": [{"source": "owner", "target": "new-code", "relation": "decided"}],
}


def test_a_run_changes_its_replica_and_never_the_frozen_store(tmp_path: Path) -> None:
    """Writes through the served socket show up in the next snapshot; every frozen file keeps its digest."""
    state, fixture = tmp_path / "state", tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, env={STATE_ENV: str(state), "MEMTRIAL_PROVISIONER_SERVE": "1"},
                                   timeout_seconds=60)
    arm = _graph(fixture, UPLOADER)
    restored = restore_sync(provisioner, "uploader", arm, "run-1.t0")
    try:
        frozen = {p: sha256_file(p) for p in (state / "frozen").glob("*.sqlite")}
        receipts = {json.loads(p.read_text())["sha256"] for p in (state / "frozen").glob("*.json")}
        assert len(frozen) == 1 and set(frozen.values()) == receipts
        project = state / "projects" / restored.project
        served = ServedReplica.model_validate_json((project / SERVE_FILE).read_text())
        assert served.env()[REALM_ENV] == REALM
        probe = Probe(name="code", lane="fulltext", query="uploader disk quota exit code", expect_ids=("new-code",))
        first = snapshot_sync(provisioner, restored.project, [probe])
        assert (first.state.evidence_documents, first.state.graph_nodes, first.state.graph_edges) == (0, 2, 1)
        assert first.probes[0].found and "old-code" not in [h.id for h in first.probes[0].hits]

        client = MemoryClient(served.socket_path)
        (new,) = client.remember(REALM, ["The uploader logs to /var/log/uploader.log."])
        with SqliteMemoryStore(project / REPLICA_FILE_NAME, create=False) as replica:
            assert new in replica.live_ids(REALM), "the served write did not reach the project's replica"
        after = snapshot_sync(provisioner, restored.project, [probe])
        assert after.state.graph_nodes == 3, "a memory stored during the run is live state too"
        assert {p: sha256_file(p) for p in frozen} == frozen, "a frozen store changed"
    finally:
        destroy_sync(provisioner, restored.project)
    assert not Path(served.socket_dir).exists()
    with pytest.raises(ProcessLookupError):
        os.kill(served.pid, 0)


def test_snapshot_measures_presence_even_with_the_kill_switch_set(tmp_path: Path) -> None:
    """The kill switch governs delivery to the agent; a snapshot that obeyed it would report an empty store.
    Also: the graph probe starts from the store's graph lane (the memory naming the query's entity)
    and follows the artifact's edge from there."""
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    env = {STATE_ENV: str(tmp_path / "state"), MEMORY_OFF_ENV: "1", ABLATE_LANES_ENV: "all"}
    provisioner = make_provisioner(ARGV, fixture, env=env, timeout_seconds=60)
    restored = restore_sync(provisioner, "uploader", _graph(fixture, UPLOADER), "run-1.t0")
    try:
        semantic = Probe(name="code", lane="semantic", query="uploader exit code for a full disk quota", expect_text="code 75")
        graph = Probe(name="owner", lane="graph", query="Priya Raman", expect_ids=("owner", "new-code"))
        by_label = Probe(name="label", lane="graph", query="quota owner", expect_ids=("owner",))
        found_semantic, found_graph, found_label = snapshot_sync(provisioner, restored.project, [semantic, graph, by_label]).probes
        assert found_semantic.found
        assert found_graph.found and [h.id for h in found_graph.hits][:2] == ["owner", "new-code"], \
            "the graph probe starts at the memory naming the entity and follows its edge"
        assert not found_label.found, "a label the graph lane cannot reach must not be found by the probe"
    finally:
        destroy_sync(provisioner, restored.project)


@pytest.mark.parametrize(
    ("graph", "message"),
    [
        ({"nodes": [{"id": "a", "text": "x"}], "edges": [{"source": "a", "target": "b", "relation": "r"}]},
         "graph.edges[0]: node 'b' is not an id"),
        ({"nodes": [{"id": "a", "text": "   "}]}, "graph.nodes[0].text: text is empty"),
        ({"nodes": [{"id": "a", "text": "x", "colour": "red"}]}, "nodes.0.colour': unknown field"),
        ({"realm": "nocolon", "nodes": []}, "graph.realm: 'nocolon' is not a canonical realm name"),
        ({"nodes": [{"id": "a", "text": "x"}, {"id": "a", "text": "y"}]}, "id 'a' appears twice"),
    ],
    ids=["dangling-edge", "empty-text", "unknown-field", "bad-realm", "duplicate-id"],
)
def test_malformed_graph_is_refused_naming_the_field(tmp_path: Path, graph: dict[str, object], message: str) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, env={STATE_ENV: str(tmp_path / "state")}, timeout_seconds=60)
    with pytest.raises(ProvisionerExitError, match="exited with status 2") as caught:
        restore_sync(provisioner, "uploader", _graph(fixture, graph), "run-1.t0")
    assert message in caught.value.stderr_tail.decode()
    assert not list((tmp_path / "state").glob("projects/*")), "a refused restore left a project behind"


def test_restoring_the_same_identity_twice_is_refused(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, env={STATE_ENV: str(tmp_path / "state")}, timeout_seconds=60)
    arm = _graph(fixture, UPLOADER)
    restored = restore_sync(provisioner, "uploader", arm, "run-1.t0")
    try:
        with pytest.raises(ProvisionerExitError, match="already restored"):
            restore_sync(provisioner, "uploader", arm, "run-1.t0")
    finally:
        destroy_sync(provisioner, restored.project)


def test_missing_state_root_is_a_bad_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(STATE_ENV, raising=False)
    fixture = tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, timeout_seconds=60)
    with pytest.raises(ProvisionerExitError, match=f"{STATE_ENV} is not set"):
        restore_sync(provisioner, "uploader", _graph(fixture, UPLOADER), "run-1.t0")


@pytest.mark.parametrize("serve", ["0", "1", "ro"], ids=["file", "served", "served-read-only"])
def test_restore_names_what_the_agent_needs_in_its_env(tmp_path: Path, serve: str) -> None:
    state, fixture = tmp_path / "state", tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, env={STATE_ENV: str(state), "MEMTRIAL_PROVISIONER_SERVE": serve},
                                   timeout_seconds=60)
    restored = restore_sync(provisioner, "uploader", _graph(fixture, UPLOADER), "run-1.t0")
    try:
        project = state / "projects" / restored.project
        if serve == "0":
            assert restored.env == {STORE_ENV: str(project / REPLICA_FILE_NAME), REALM_ENV: REALM}
            return
        served = ServedReplica.model_validate_json((project / SERVE_FILE).read_text())
        assert restored.env == served.env() and restored.env[REALM_ENV] == REALM
        client = MemoryClient(restored.env[SOCKET_ENV])
        assert client.recall(REALM, "disk quota exit code", 1)[0].text.endswith("code 75 when the disk quota is full.")
        if serve == "ro":
            with pytest.raises(MemtrialError, match="read-only"):
                client.remember(REALM, ["The uploader exits with code 0 on a full quota."])
    finally:
        destroy_sync(provisioner, restored.project)


def test_an_unknown_serving_mode_is_a_bad_request_that_leaves_nothing(tmp_path: Path) -> None:
    state, fixture = tmp_path / "state", tmp_path / "fixture"
    fixture.mkdir()
    provisioner = make_provisioner(ARGV, fixture, env={STATE_ENV: str(state), "MEMTRIAL_PROVISIONER_SERVE": "yes"},
                                   timeout_seconds=60)
    with pytest.raises(ProvisionerExitError, match="MEMTRIAL_PROVISIONER_SERVE: 'yes' is not 1, ro or 0"):
        restore_sync(provisioner, "uploader", _graph(fixture, UPLOADER), "run-1.t0")
    assert not (state / "projects").exists() or list((state / "projects").iterdir()) == []


RESTORES_THEN_HANGS = """\
import sys, time
from tasks_lib.memory.provisioner.reference import main
code = main(sys.argv[1:])
sys.stdout.flush()
if sys.argv[1] == "restore":
    time.sleep(600)
sys.exit(code)
"""


def test_a_restore_killed_on_timeout_takes_its_memory_server_along(tmp_path: Path) -> None:
    """The served replica stays in the provisioner's process group, so memtrial's kill reaches it."""
    state, fixture = tmp_path / "state", tmp_path / "fixture"
    fixture.mkdir()
    wrapper = tmp_path / "hangs_after_restore.py"
    wrapper.write_text(RESTORES_THEN_HANGS)
    provisioner = make_provisioner([sys.executable, str(wrapper)], fixture,
                                   env={STATE_ENV: str(state), "MEMTRIAL_PROVISIONER_SERVE": "1"}, timeout_seconds=15)
    with pytest.raises(ProvisionerTimeoutError):
        restore_sync(provisioner, "uploader", _graph(fixture, UPLOADER), "run-1.t0")
    (project,) = (state / "projects").iterdir()
    served = ServedReplica.model_validate_json((project / SERVE_FILE).read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and alive(served.pid):
        time.sleep(0.05)
    assert not alive(served.pid), f"memory server {served.pid} survived the provisioner's timeout"
