"""The system provisioner: Chroma and the MCP memory server measured in paired arms through the protocol.

Real parts only: the provisioner and the memory server are subprocesses, Chroma runs embedded in
the server, the MCP memory server is the npm package run with node. Under CI a missing system
fails (see `require`).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.agents.base import Transcript
from tasks_lib.agents.calibration_plan import key_texts
from tasks_lib.arm.provisioned import write_artifact
from tasks_lib.arm.steps import Attempt, run_matrix, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.env import REALM_ENV, SOCKET_ENV
from tasks_lib.memory.errors import MemoryServerError
from tasks_lib.memory.provisioner.check import check_provisioner, format_results
from tasks_lib.memory.provisioner.client import (
    Probe,
    ProvisionerExitError,
    ProvisionerSpec,
    destroy_sync,
    make_provisioner,
    restore_sync,
    snapshot_sync,
)
from tasks_lib.memory.provisioner.system import HOLDS, SYSTEM_ENV
from tasks_lib.memory.provisioner.verbs import SERVE_ENV, SERVE_FILE, STATE_ENV
from tasks_lib.memory.registry import MEMORY_SYSTEMS
from tasks_lib.run.provenance import load_provenance
from tests.test_memory_adapters import alive, require

REPO = Path(__file__).resolve().parents[1]
TASKS = load_tasks(REPO / "corpora" / "tasks")
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
ARGV = (sys.executable, "-m", "tasks_lib.memory.provisioner.system")
SYSTEMS = ("chroma", "chroma+memtrial-keyword", "mcp-memory", "mcp-memory+memtrial-terms", "lancedb", "txtai", "mem0")


def spec(system: str, state: Path) -> ProvisionerSpec:
    return ProvisionerSpec(argv=ARGV, env={SYSTEM_ENV: system, STATE_ENV: str(state)}, timeout_seconds=180)


@pytest.mark.parametrize("system", SYSTEMS)
def test_paired_arms_measure_a_third_party_system_through_its_provisioner(tmp_path: Path, system: str) -> None:
    """The system's own retrieval and supersession decide, reached through restore's env: the
    convention task passes only with its memory delivered; in the stale trap the superseded value
    is never served, and the task passes exactly when the system finds the correction (the
    reference store does through its corrections lane; these systems need the prompt to share words
    or meaning with it)."""
    require(system)
    state = tmp_path / "state"
    tasks = {t.task_id: t for t in select_tasks(TASKS, ["logship-partial-exit", "paybridge-tenant-header"])}
    plan = [Attempt(task, condition, 0, order) for task in tasks.values() for order, condition in enumerate(("off", "on"))]
    store = LocalStore(tmp_path / "artifacts")
    records = run_matrix(plan, run_id="sys-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=store, provisioner=spec(system, state))
    by = {(r.task_id, r.condition): r for r in records}
    provenance = load_provenance(store, "sys-run")
    assert provenance is not None and provenance.adapter_config is not None and provenance.adapter_config.system == system
    assert {r.memory_config_digest for r in records if r.condition == "on"} == {provenance.memory_config_digest}, \
        "the records' comparability key names the system's adapter config, as the provenance does"
    assert {r.memory_config_digest for r in records if r.condition == "off"} == {None}

    def context(task_id: str) -> str:
        steps = store.get_json(by[(task_id, "on")].transcript or "", Transcript).steps
        return "".join(step.text for step in steps if step.source == "hook")

    convention = "logship-partial-exit"
    if system == "mcp-memory":  # AGENT_SEARCH: the hook's query (the prompt) is never a substring of a memory
        assert not any(text in context(convention) for text in key_texts(tasks[convention])), "search_nodes began to match a prompt"
        assert by[(convention, "on")].outcome == "fail" and by[(convention, "on")].injection == "no"
        assert list((state / "projects").iterdir()) == [], "a project outlived its attempt"
        return
    assert any(text in context(convention) for text in key_texts(tasks[convention])), f"{system} missed the convention"
    assert (by[(convention, "off")].outcome, by[(convention, "on")].outcome) == ("fail", "pass")
    assert (by[(convention, "off")].injection, by[(convention, "on")].injection) == ("no", "yes")
    trap = tasks["paybridge-tenant-header"]
    stale = next(m.text for m in trap.manifest.memories if m.kind == "superseded")
    delivered = any(text in context(trap.task_id) for text in key_texts(trap))
    assert stale not in context(trap.task_id), f"{system} served the superseded memory"
    assert by[(trap.task_id, "on")].outcome == ("pass" if delivered else "fail")
    assert all(r.build_under_test.startswith("provisioner: ") for r in records)
    assert list((state / "projects").iterdir()) == [], "a project outlived its attempt"


@pytest.mark.parametrize("system", SYSTEMS)
def test_snapshot_reads_the_live_system_and_its_lanes(tmp_path: Path, system: str) -> None:
    require(system)
    state, fixture = tmp_path / "state", tmp_path / "fixture"
    task = select_tasks(TASKS, ["paybridge-tenant-header"])[0]
    memories = task.manifest.memories
    arm = write_artifact(memories, "trial:sys.paybridge.on.t0", fixture)
    provisioner = make_provisioner(ARGV, fixture, env={SYSTEM_ENV: system, STATE_ENV: str(state), SERVE_ENV: "ro"},
                                   timeout_seconds=180)
    restored = restore_sync(provisioner, task.task_id, arm, "sys.paybridge.on.t0")
    try:
        served = json.loads((state / "projects" / restored.project / SERVE_FILE).read_text())
        assert restored.env == {SOCKET_ENV: served["socket_path"], REALM_ENV: "trial:sys.paybridge.on.t0"}
        with pytest.raises(MemoryServerError, match="read-only"):
            MemoryClient(served["socket_path"]).forget(["anything"])
        stale = next(i for i, m in enumerate(memories) if m.kind == "superseded")
        fresh = next(i for i, m in enumerate(memories) if m.kind == "correction")
        probes = [Probe(name="stale", lane="fulltext", query=memories[stale].text, expect_ids=(f"m{stale}",)),
                  Probe(name="semantic", lane="semantic", query=memories[fresh].text, expect_ids=(f"m{fresh}",))]
        shown = snapshot_sync(provisioner, restored.project, probes)
        live = len(memories) - sum(1 for m in memories if m.kind == "superseded")
        assert shown.state.exists and shown.state.graph_nodes == live, "a superseded memory was counted live"
        assert not shown.probes[0].found, "the superseded memory is still served"
        semantic = any(lane == "semantic" or "semantic" in HOLDS.get(lane, ()) for lane in MEMORY_SYSTEMS[system].lanes)
        assert shown.probes[1].found == semantic, "a probe on a lane the system lacks must find nothing"
    finally:
        destroy_sync(provisioner, restored.project)
    assert not alive(served["pid"]) and not (state / "projects" / restored.project).exists()
    assert not snapshot_sync(provisioner, restored.project).state.exists


CHECKED = ("chroma", "chroma+memtrial-keyword", "lancedb", "txtai", "mem0")


@pytest.mark.parametrize("system", CHECKED)
def test_the_check_reports_the_lane_a_system_lacks(tmp_path: Path, system: str) -> None:
    """None of these systems has a graph lane or keeps edges: the conformance check fails exactly the
    checks that need them, each naming the graph, and passes the rest; the full-text probes are
    missed exactly by the systems without a full-text lane (chroma and mem0 as shipped)."""
    require(system)
    results = check_provisioner(list(ARGV), tmp_path / "fixture", timeout_seconds=180,
                                env={SYSTEM_ENV: system, STATE_ENV: str(tmp_path / "state")})
    failed = {r.name: r.why for r in results if not r.passed}
    assert set(failed) == {"snapshot-finds-planted-probes", "restore-isolates-run-identity", "restore-isolates-trials",
                           "destroy-is-scoped"}, \
        format_results(results)
    assert all("graph" in why or "0 edges" in why for why in failed.values()), failed
    fulltext = any(lane == "keyword" or "keyword" in HOLDS.get(lane, ()) for lane in MEMORY_SYSTEMS[system].lanes)
    assert ("alpha-fulltext" not in failed["restore-isolates-run-identity"]) == fulltext, failed
    assert list((tmp_path / "state" / "projects").iterdir()) == []


def test_an_unknown_system_is_a_bad_request(tmp_path: Path) -> None:
    fixture = tmp_path / "fixture"
    arm = write_artifact(select_tasks(TASKS, ["logship-partial-exit"])[0].manifest.memories, "trial:x.y", fixture)
    provisioner = make_provisioner(ARGV, fixture, env={SYSTEM_ENV: "redis", STATE_ENV: str(tmp_path / "state")}, timeout_seconds=60)
    with pytest.raises(ProvisionerExitError, match="MEMTRIAL_PROVISIONER_SYSTEM: 'redis' is not a memory system"):
        restore_sync(provisioner, "logship-partial-exit", arm, "x.y")
