"""Paired arms whose memory comes from a provisioner: the reference provisioner, a real subprocess,
restores each arm's memories, the calibration agent's hook reads them through the exported
settings, and the calibration effect is the same as with the embedded store.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tasks_lib.agents.base import Transcript
from tasks_lib.agents.calibration_plan import expected_attempt, key_texts, load_key_lanes
from tasks_lib.arm.provisioned import (
    ARTIFACT_NAME,
    ProvisionedArmError,
    restore_arm,
    write_artifact,
)
from tasks_lib.arm.steps import (
    REFERENCE_BUILD,
    ArmsError,
    Attempt,
    run_matrix,
    schedule,
    select_tasks,
)
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.delivery.witness import DeliveryReceipt
from tasks_lib.memory.provisioner.client import ProvisionerSpec, ProvisionerTimeoutError
from tasks_lib.memory.provisioner.verbs import SERVE_ENV, STATE_ENV

REPO = Path(__file__).resolve().parents[1]
TASKS = load_tasks(REPO / "corpora" / "tasks")
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
KEY_LANES = load_key_lanes(REPO / "corpora" / "tasks", TASKS)
REFERENCE = [sys.executable, "-m", "tasks_lib.memory.provisioner.reference"]
# A convention task (memory decides success) and the stale trap (the correction must win).
PICK = ["logship-partial-exit", "paybridge-tenant-header"]
CONDITIONS = ["off", "on", "ablate:all", "ablate:corrections"]


def reference_spec(state: Path, serve: str) -> ProvisionerSpec:
    return ProvisionerSpec(argv=tuple(REFERENCE), env={STATE_ENV: str(state), SERVE_ENV: serve}, timeout_seconds=120)


@pytest.mark.parametrize("serve", ["0", "ro"], ids=["replica-file", "served-read-only"])
def test_the_calibration_effect_is_recovered_through_the_reference_provisioner(tmp_path: Path, serve: str) -> None:
    state = tmp_path / "state"
    plan = schedule(select_tasks(TASKS, PICK), CONDITIONS, 1)
    store = LocalStore(tmp_path / "artifacts")
    records = run_matrix(plan, run_id="prov-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=store, provisioner=reference_spec(state, serve))
    by = {(r.task_id, r.condition): r for r in records}
    task_of = {t.task_id: t for t in TASKS}
    for (task_id, condition), record in by.items():
        task = task_of[task_id]
        expected = expected_attempt(task, condition, KEY_LANES.tasks[task_id])
        transcript = store.get_json(record.transcript or "", Transcript)
        context = "".join(step.text for step in transcript.steps if step.source == "hook")
        where = f"{task_id} under {condition}"
        assert record.outcome == expected.outcome, where
        assert any(text in context for text in key_texts(task)) == expected.delivered, where
        assert record.injection == ("yes" if context else "no"), where
        assert record.planted_ids == (), where
        assert record.build_under_test == "provisioner: " + " ".join(REFERENCE), where
    assert by[("paybridge-tenant-header", "on")].outcome == "pass"
    assert by[("paybridge-tenant-header", "ablate:corrections")].outcome == "fail", "ablation did not reach the hook"
    ablated = store.get_json(by[("paybridge-tenant-header", "ablate:corrections")].delivery_receipt or "", DeliveryReceipt)
    assert ablated.recalls and not any("corrections" in r.lanes for r in ablated.recalls), ablated
    assert by[("logship-partial-exit", "off")].outcome == "fail" and by[("logship-partial-exit", "on")].outcome == "pass"
    assert list((state / "projects").iterdir()) == [], "a project outlived its attempt"
    frozen = sorted((state / "frozen").glob("*.sqlite"))
    assert len(frozen) == 2 * 2, "one frozen store per attempt with memory (on and ablate:corrections, two tasks)"


def test_a_provisioner_exporting_no_memory_path_is_refused_before_the_agent(tmp_path: Path) -> None:
    """Regression: a provisioner whose restore named neither a socket nor a store file ran its arms with
    delivery read off the transcript; the witness cannot stand in front of it, so the arm stops, and
    the project is destroyed."""
    state = tmp_path / "state"
    plan = schedule(select_tasks(TASKS, ["paybridge-tenant-header"]), ["on"], 1)
    spec = ProvisionerSpec(argv=(sys.executable, "-c", NO_PATH, *REFERENCE[1:]), env={STATE_ENV: str(state), SERVE_ENV: "0"},
                           timeout_seconds=120)
    with pytest.raises(ArmsError, match="delivery to the agent could not be witnessed"):
        run_matrix(plan, run_id="prov-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                   agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), provisioner=spec)
    assert list((state / "projects").iterdir()) == [], "the refused arm's project outlived it"


NO_PATH = """\
import json, subprocess, sys
argv = [sys.executable, "-m", sys.argv[2], *sys.argv[3:]]
done = subprocess.run(argv, input=sys.stdin.buffer.read(), capture_output=True)
sys.stderr.buffer.write(done.stderr)
answer = json.loads(done.stdout) if done.stdout.strip() else None
if isinstance(answer, dict) and isinstance(answer.get("env"), dict):
    answer["env"] = {k: v for k, v in answer["env"].items() if k != "MEMORY_DB"}
sys.stdout.write(json.dumps(answer) if answer is not None else "")
sys.exit(done.returncode)
"""
"""A provisioner wrapping the reference one that drops the store file from its restore answer."""


def _attempt(task_id: str, condition: str = "on") -> Attempt:
    return Attempt(select_tasks(TASKS, [task_id])[0], condition, 0, 0)


def test_the_artifact_carries_every_memory_and_the_supersession(tmp_path: Path) -> None:
    task = select_tasks(TASKS, ["paybridge-tenant-header"])[0]
    arm = write_artifact(task.manifest.memories, "trial:r.paybridge.on.t0", tmp_path)
    graph = json.loads((tmp_path / ARTIFACT_NAME).read_text())
    assert arm.graph is not None and arm.graph.path == ARTIFACT_NAME
    assert graph["realm"] == "trial:r.paybridge.on.t0"
    assert sorted(n["text"] for n in graph["nodes"]) == sorted(m.text for m in task.manifest.memories)
    (correction,) = [n for n in graph["nodes"] if n["kind"] == "correction"]
    stale = [n["id"] for n in graph["nodes"] if n["kind"] == "superseded"]
    assert correction["supersedes"] == stale and stale


LOSES_MEMORY = """\
import json, subprocess, sys
verb = sys.argv[1]
data = sys.stdin.buffer.read()
if verb == "snapshot":
    request = json.loads(data)
    print(json.dumps({"state": {"exists": True, "evidence_documents": 0, "graph_nodes": 0, "graph_edges": 0},
                      "probes": [{"name": p["name"], "hits": [], "found": False} for p in request["probes"]],
                      "queue_after_count": 0, "snapshot_seconds": 0.0}))
else:
    done = subprocess.run([sys.executable, "-m", "tasks_lib.memory.provisioner.reference", verb], input=data, capture_output=True)
    sys.stdout.buffer.write(done.stdout); sys.stderr.buffer.write(done.stderr); sys.exit(done.returncode)
"""


def test_an_arm_whose_memory_is_not_retrievable_stops_before_the_agent_and_is_destroyed(tmp_path: Path) -> None:
    script = tmp_path / "loses_memory.py"
    script.write_text(LOSES_MEMORY)
    state = tmp_path / "state"
    spec = ProvisionerSpec(argv=(sys.executable, str(script)), env={STATE_ENV: str(state)}, timeout_seconds=120)
    task = select_tasks(TASKS, ["logship-partial-exit"])[0]
    root = tmp_path / "attempt"
    root.mkdir()
    with pytest.raises(ProvisionedArmError, match=r"does not return memories \['m0'"):
        restore_arm(spec, task.task_id, task.manifest.memories, "trial:r.logship.on.t0", root)
    assert list((state / "projects").iterdir()) == [], "the refused arm's project was not destroyed"


def test_a_provisioner_failure_stops_the_attempt_and_leaves_no_workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    hangs = tmp_path / "hangs.py"
    hangs.write_text("import time\ntime.sleep(600)\n")
    spec = ProvisionerSpec(argv=(sys.executable, str(hangs)), timeout_seconds=1)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))  # the attempt's scratch root goes here
    with pytest.raises(ProvisionerTimeoutError):
        run_matrix([_attempt("logship-partial-exit")], run_id="prov-run", repo_root=REPO, commit=HEAD,
                   tasks_subdir="corpora/tasks", agent_name="calibration", store=LocalStore(tmp_path / "artifacts"),
                   provisioner=spec)
    assert list(scratch.iterdir()) == [], "the attempt's scratch root (or the matrix's templates) was left behind"


def test_without_a_provisioner_the_embedded_store_is_measured(tmp_path: Path) -> None:
    records = run_matrix([_attempt("logship-partial-exit")], run_id="emb-run", repo_root=REPO, commit=HEAD,
                         tasks_subdir="corpora/tasks", agent_name="calibration", store=LocalStore(tmp_path / "a"))
    assert records[0].build_under_test == REFERENCE_BUILD and records[0].planted_ids


def test_paired_command_measures_a_provisioned_memory_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`memtrial paired --provisioner ...`, a real Prefect run: the memory reaches the agent only through the provisioner."""
    import pyarrow.parquet as pq

    from flows.cli.main import main

    state = tmp_path / "state"
    code = main(["paired", "--embedder", "hashed", "--tasks", "logship-partial-exit", "--conditions", "off,on", "--artifacts", str(tmp_path / "a"),
                 "--provisioner", " ".join(REFERENCE), "--provisioner-env", f"{STATE_ENV}={state}",
                 "--provisioner-env", f"{SERVE_ENV}=ro", "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [(c["condition"], c["passes"], c["runs"], c["injected"]) for c in result["cells"]] == [("off", 0, 1, 0), ("on", 1, 1, 1)]
    table = pq.read_table(tmp_path / "a" / result["records"]).to_pandas()
    assert set(table["build_under_test"]) == {"provisioner: " + " ".join(REFERENCE)}
    assert len(list((state / "frozen").glob("*.sqlite"))) == 1 and list((state / "projects").iterdir()) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--provisioner-env", "A=1"], "--provisioner-env: only applies with --provisioner"),
        (["--provisioner", "'unterminated"], "--provisioner: cannot split"),
        (["--provisioner", "prov", "--provisioner-env", "NOEQUALS"], "'NOEQUALS' is not KEY=VALUE"),
    ],
    ids=["env-without-command", "bad-quoting", "env-not-key-value"],
)
def test_bad_provisioner_options_are_refused_in_one_line(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main

    assert main(["paired", "--plain", *args]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert len(error) == 1 and message in error[0]


def test_a_run_config_names_its_provisioner_or_none() -> None:
    from tasks_lib.run.config import RunConfig

    with pytest.raises(ValueError, match="memory_system: 'provisioner' needs a provisioner"):
        RunConfig(memory_system="provisioner")
    with pytest.raises(ValueError, match="needs memory_system: provisioner"):
        RunConfig(provisioner={"argv": ["prov"]})  # type: ignore[arg-type]
    with_one = RunConfig(memory_system="provisioner", provisioner={"argv": ["prov"]})  # type: ignore[arg-type]
    assert with_one.config_digest() != RunConfig().config_digest()


def test_a_memory_counts_present_only_when_one_of_its_own_probes_finds_it() -> None:
    """Presence asks the full-text and the semantic lane (a vector-only system has no full-text lane),
    but a memory neither lane brings back is missing, whatever the other memories' probes found."""
    from tasks_lib.arm.provisioned import PRESENCE_LANES, missing_memories, presence_probes
    from tasks_lib.memory.provisioner.client import ProbeHit, ProbeResult

    task = select_tasks(TASKS, ["logship-partial-exit"])[0]
    probes = presence_probes(task.manifest.memories)
    assert {p.lane for p in probes} == set(PRESENCE_LANES) and len({p.name for p in probes}) == len(probes)

    def result(name: str, found: bool) -> ProbeResult:
        return ProbeResult(name=name, hits=(ProbeHit(id="m0", text="x"),) if found else (), found=found)

    only_semantic = [result("present-m0-fulltext", False), result("present-m0-semantic", True),
                     result("present-m1-fulltext", False), result("present-m1-semantic", False)]
    assert missing_memories(only_semantic) == ["m1"]
    assert missing_memories([result("present-m10-fulltext", True), result("present-m1-semantic", False)]) == ["m1"]
