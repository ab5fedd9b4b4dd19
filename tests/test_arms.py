"""Running the arms: the calibration agent's known effect is recovered exactly, and nothing passes by default."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tasks_lib.agents.base import (
    Agent,
    AgentRun,
    AgentSession,
    Transcript,
    TranscriptStep,
)
from tasks_lib.agents.calibration_plan import (
    CalibrationPlanError,
    expected_attempt,
    expected_input_tokens,
    feed_key_texts,
    key_texts,
    load_key_lanes,
)
from tasks_lib.agents.registry import register_agent
from tasks_lib.arm.steps import (
    STEP_NAMES,
    ArmsError,
    ArmSetup,
    TaskSource,
    audit_workspace,
    check_conditions,
    check_workspace,
    materialize_workspace,
    memory_env,
    planted_memory,
    provision_memory,
    record_attempt,
    release_memory,
    run_agent,
    run_attempt,
    run_matrix,
    runner_owned_paths,
    schedule,
    select_tasks,
    teardown_workspace,
)
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks, overlay
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV, REALM_ENV, SOCKET_ENV, STORE_ENV
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.memory.reference.store import SqliteMemoryStore

REPO = Path(__file__).resolve().parents[1]
TASKS = load_tasks(REPO / "corpora" / "tasks")
PER_RUN = {"wall_seconds", "delivery_nonce", "planted_ids", "delivered_ids", "served_ids"}
"""Record fields that differ between two runs of the same attempt (time, the witness's fresh nonce, and the
ids it serves, keyed per witness); `same_ids_shape` compares the ids' counts and overlaps instead."""


def same_ids_shape(a: RunRecord, b: RunRecord) -> bool:
    """Whether two records planted, delivered and served as many ids, the delivered ones among the planted."""
    def shape(r: RunRecord) -> tuple[int, int, int, bool]:
        return len(r.planted_ids), len(r.delivered_ids), len(r.served_ids), set(r.delivered_ids) <= set(r.planted_ids)
    return shape(a) == shape(b)
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
# One task of each behaviour: convention (memory decides success), deducible (memory only saves
# tokens), tare (memory costs a little), stale-trap (the correction must win).
PICK = ["logship-partial-exit", "tabmill-delimiter", "rotlog-keep-count", "paybridge-tenant-header"]
KEY_LANES = load_key_lanes(REPO / "corpora" / "tasks", TASKS)
ALL_CONDITIONS = ["off", "on", "ablate:all", *(f"ablate:{lane}" for lane in LANES)]
WHOLE_CORPUS_CONDITIONS = ["off", "on", "ablate:all", "feed", "grep"]


def run(tasks: list[str], conditions: list[str], tmp_path: Path, agent: str = "calibration", trials: int = 1):  # type: ignore[no-untyped-def]
    plan = schedule(select_tasks(TASKS, tasks), conditions, trials)
    return run_matrix(plan, run_id="test-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                      agent_name=agent, store=LocalStore(tmp_path / "artifacts"))


def lanes_to_ablate(index: int, task) -> list[str]:  # type: ignore[no-untyped-def]
    """Every lane for a task whose key memory at most one lane carries (where an ablation can flip the
    outcome); one lane, rotating through them, for every other task (each lane is ablated on about a
    quarter of the corpus: enough to show a lane's ablation leaves the other lanes' delivery intact)."""
    if len(KEY_LANES.tasks[task.task_id]) <= 1:
        return [f"ablate:{lane}" for lane in LANES]
    return [f"ablate:{LANES[index % len(LANES)]}"]


@pytest.fixture(scope="module")
def full_matrix(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """Every bundled task under off, on, ablate:all, feed and grep, and the lane ablations above, one
    trial each: one matrix for this file's whole-corpus checks and the feed's (one run of off and on)."""
    where = tmp_path_factory.mktemp("full")
    plan = [a for index, task in enumerate(TASKS)
            for a in schedule([task], [*WHOLE_CORPUS_CONDITIONS, *lanes_to_ablate(index, task)], 1)]
    records = run_matrix(plan, run_id="test-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=LocalStore(where / "artifacts"))
    return records, LocalStore(where / "artifacts")


# That the declared key lanes are the lanes that retrieve each task's key memory (measured lane by
# lane in the reference store) is the corpus check's `key-lanes` invariant, run on every task by
# tests/test_cli.py::test_corpus_check_reports_every_bundled_task_and_invariant.


def test_the_corpus_has_tasks_whose_key_memory_only_one_lane_carries() -> None:
    single = {task_id: lanes for task_id, lanes in KEY_LANES.tasks.items() if len(lanes) == 1}
    assert single == {"diskwatch-critical-default": ("graph",), "paybridge-tenant-header": ("corrections",)}


def test_a_key_lane_declaration_must_cover_every_task(tmp_path: Path) -> None:
    (tmp_path / "key_lanes.json").write_text('{"schema_version": 1, "tasks": {"tabmill-delimiter": ["keyword"]}}')
    with pytest.raises(CalibrationPlanError, match="missing .*logship-partial-exit"):
        load_key_lanes(tmp_path, TASKS)
    (tmp_path / "key_lanes.json").write_text('{"schema_version": 1, "tasks": {"tabmill-delimiter": ["telepathy"]}}')
    with pytest.raises(CalibrationPlanError, match="unknown lane"):
        load_key_lanes(tmp_path, select_tasks(TASKS, ["tabmill-delimiter"]))


@pytest.mark.slow
def test_every_task_and_condition_follows_from_the_corpus(full_matrix) -> None:  # type: ignore[no-untyped-def]
    """Outcome, key delivery, injection and exact tokens of every record follow from the corpus
    (kind, files, key-lane declaration); ablating the only lane that carries a key memory flips
    success, and ablate:all equals off."""
    records, store = full_matrix
    records = [r for r in records if r.condition in ALL_CONDITIONS]
    by = {(r.task_id, r.condition): r for r in records}
    assert len(by) == len(records) == sum(3 + len(lanes_to_ablate(i, t)) for i, t in enumerate(TASKS))
    assert {c for _, c in by} == set(ALL_CONDITIONS), "every lane is ablated somewhere"
    for (task_id, condition), record in by.items():
        task = select_tasks(TASKS, [task_id])[0]
        expected = expected_attempt(task, condition, KEY_LANES.tasks[task.task_id])
        transcript = store.get_json(record.transcript or "", Transcript)
        context = "".join(step.text for step in transcript.steps if step.source == "hook")
        where = f"{task.task_id} under {condition}"
        assert record.outcome == expected.outcome, where
        assert any(text in context for text in key_texts(task)) == expected.delivered, where
        assert record.output_tokens == expected.output_tokens, where
        assert record.input_tokens == expected_input_tokens(task, expected, len(context.encode())), where
        assert record.audit_passed and not record.infra_failure, where
        if condition in ("off", "ablate:all"):
            assert context == "" and record.injection == "no", where
        else:
            assert record.injection == ("yes" if context else "no"), where
    for task in TASKS:
        off, ablate_all = by[(task.task_id, "off")], by[(task.task_id, "ablate:all")]
        assert (ablate_all.outcome, ablate_all.input_tokens, ablate_all.output_tokens) == (off.outcome, off.input_tokens, off.output_tokens)
    flips = {(t, c.removeprefix("ablate:")) for (t, c), r in by.items()
             if c.startswith("ablate:") and c != "ablate:all" and r.outcome == "fail" and by[(t, "on")].outcome == "pass"}
    assert flips == {("diskwatch-critical-default", "graph"), ("paybridge-tenant-header", "corrections")}


@pytest.mark.slow
def test_calibration_pattern_under_feed_and_grep_is_recovered_exactly(full_matrix) -> None:  # type: ignore[no-untyped-def]
    """Outcome, key delivery, injection and exact tokens of every record under off, on, feed and grep
    follow from the corpus, for every bundled task (the feed's other tests: tests/test_feed.py)."""
    records, store = full_matrix
    feed_matrix = ["off", "on", "feed", "grep"]
    by = {(r.task_id, r.condition): r for r in records if r.condition in feed_matrix}
    assert len(by) == len(TASKS) * len(feed_matrix)
    for task in TASKS:
        for condition in feed_matrix:
            record = by[(task.task_id, condition)]
            expected = expected_attempt(task, condition, KEY_LANES.tasks[task.task_id])
            transcript = store.get_json(record.transcript or "", Transcript)
            context = "".join(step.text for step in transcript.steps if step.source == "hook")
            where = f"{task.task_id} under {condition}"
            assert record.outcome == expected.outcome, where
            assert record.output_tokens == expected.output_tokens, where
            assert record.input_tokens == expected_input_tokens(task, expected, len(context.encode()), condition), where
            if condition == "feed":
                assert any(t in context for t in feed_key_texts(task)), where
                assert record.injection == "yes" and record.delivered_ids and set(record.delivered_ids) <= set(record.planted_ids), where
            if condition == "grep":
                assert context == "" and record.injection == "no" and record.delivery_receipt is None, where
            read_history = any("(recorded session)" in step.text for step in transcript.steps)
            assert read_history == (condition == "grep"), f"{where}: only the grep arm can read the recorded sessions"
    # The feed helps exactly where curated memory helps: convention tasks flip from fail to pass.
    flips = {t for (t, c), r in by.items() if c == "feed" and r.outcome == "pass" and by[(t, "off")].outcome == "fail"}
    assert flips == {t for (t, c), r in by.items() if c == "on" and r.outcome == "pass" and by[(t, "off")].outcome == "fail"}
    assert flips == {t for (t, c), r in by.items() if c == "grep" and r.outcome == "pass" and by[(t, "off")].outcome == "fail"}
    assert flips, "the feed decides success on some task"


def test_schedule_interleaves_conditions_across_trials() -> None:
    plan = schedule(select_tasks(TASKS, ["logship-partial-exit"]), ["off", "on", "ablate:all"], 3)
    orders = [[a.condition for a in plan if a.trial == t] for t in range(3)]
    assert orders == [["off", "on", "ablate:all"], ["on", "ablate:all", "off"], ["ablate:all", "off", "on"]]
    assert [a.order for a in plan] == list(range(9))


def test_calibration_pattern_is_recovered_exactly(tmp_path: Path) -> None:
    """The pattern follows from the corpus: memory flips conventions, saves tokens on deducible
    tasks, costs a little on tare tasks, and ablate:all equals off (the harness check)."""
    records = run(PICK, ["off", "on", "ablate:all"], tmp_path)
    by = {(r.task_id, r.condition): r for r in records}
    outcome = {key: r.outcome for key, r in by.items()}
    assert outcome == {
        ("logship-partial-exit", "off"): "fail", ("logship-partial-exit", "on"): "pass", ("logship-partial-exit", "ablate:all"): "fail",
        ("tabmill-delimiter", "off"): "pass", ("tabmill-delimiter", "on"): "pass", ("tabmill-delimiter", "ablate:all"): "pass",
        ("rotlog-keep-count", "off"): "pass", ("rotlog-keep-count", "on"): "pass", ("rotlog-keep-count", "ablate:all"): "pass",
        ("paybridge-tenant-header", "off"): "fail", ("paybridge-tenant-header", "on"): "pass", ("paybridge-tenant-header", "ablate:all"): "fail",
    }
    for task in PICK:
        assert by[(task, "on")].injection == "yes" and by[(task, "on")].injection_channel == "prompt-time"
        assert by[(task, "off")].injection == "no" and by[(task, "ablate:all")].injection == "no"
        assert by[(task, "off")].planted_ids == () and len(by[(task, "on")].planted_ids) >= 1
        assert set(by[(task, "on")].delivered_ids) <= set(by[(task, "on")].planted_ids)
    tokens = {key: r.input_tokens + r.output_tokens for key, r in by.items()}
    assert tokens[("tabmill-delimiter", "on")] * 1.5 <= tokens[("tabmill-delimiter", "off")], "memory saves cost on a deducible task"
    assert tokens[("rotlog-keep-count", "on")] > tokens[("rotlog-keep-count", "off")], "on a tare task memory only adds context"
    assert tokens[("paybridge-tenant-header", "on")] < tokens[("paybridge-tenant-header", "off")]
    assert all(r.calibration and r.agent == "calibration" and r.audit_passed for r in records)
    assert [by[(t, c)].outcome for t in PICK for c in ["ablate:all"]] == [by[(t, "off")].outcome for t in PICK]
    stale = by[("paybridge-tenant-header", "on")]
    assert len(stale.delivered_ids) == 1, "only the correction is served, never the superseded value"

    store = LocalStore(tmp_path / "artifacts")
    assert store.exists(by[("logship-partial-exit", "on")].transcript or "")
    assert store.exists(by[("logship-partial-exit", "on")].audit_receipt or "")
    with_memory = [r for r in records if r.condition not in ("off", "ablate:all")]
    assert all(r.delivery_receipt and store.exists(r.delivery_receipt) for r in with_memory)
    assert not any(r.delivery_receipt or r.delivery_nonce for r in records if r not in with_memory)
    assert all(r.check_output and store.exists(r.check_output) for r in records), "every checked attempt stores its check's output"
    assert "post-turn verdict: passed" in store.get_bytes(by[("logship-partial-exit", "on")].check_output or "").decode()
    assert len(store.list_keys("runs/test-run/attempts")) == 4 * len(records) + len(with_memory)


class TamperingAgent(Agent):
    """Writes the right fix, and also edits a visible test outside the allowed paths."""

    name = "tampering"

    def run(self, session: AgentSession) -> AgentRun:
        task = select_tasks(TASKS, ["logship-partial-exit"])[0]
        overlay(task.solution_dir, session.workspace)
        (session.workspace / "tests" / "test_cli.py").write_text("# the tests were simplified\n")
        steps = (TranscriptStep(source="agent", kind="message", text="PASSED 12 tests, all OK"),)
        return AgentRun(exit_code=0, input_tokens=1, output_tokens=1, cost_usd=0, wall_seconds=0.1,
                        transcript=Transcript(agent=self.name, steps=steps))


class CrashingInfraAgent(Agent):
    """Cannot reach its endpoint: an apparatus failure, not an agent failure."""

    name = "no-endpoint"

    def run(self, session: AgentSession) -> AgentRun:
        return AgentRun(exit_code=None, infra_failure="connection refused by 127.0.0.1:9", input_tokens=0, output_tokens=0,
                        cost_usd=0, wall_seconds=0, transcript=Transcript(agent=self.name, steps=()))


def test_a_correct_fix_with_an_edited_test_earns_zero(tmp_path: Path) -> None:
    register_agent("tampering", TamperingAgent)
    (record,) = run(["logship-partial-exit"], ["on"], tmp_path, agent="tampering")
    assert record.outcome == "fail"
    assert record.audit_passed is False and record.check_exit_code is None and record.check_output is None, "no check, no check.txt"
    assert "mutation audit" in (record.failure_reason or "")


def test_infrastructure_failure_is_ungradable_not_a_fail(tmp_path: Path) -> None:
    register_agent("no-endpoint", CrashingInfraAgent)
    (record,) = run(["tabmill-delimiter"], ["off"], tmp_path, agent="no-endpoint")
    assert (record.outcome, record.infra_failure) == ("ungradable", True)


def test_planted_memories_are_forgotten_by_exact_id_even_on_failure(tmp_path: Path) -> None:
    attempt = schedule(select_tasks(TASKS, ["logship-partial-exit"]), ["on"], 1)[0]
    with pytest.raises(RuntimeError, match="agent blew up"), planted_memory(attempt, "run-x", tmp_path, "hashed") as (env, ids):
        assert len(ids) == 2 and env[SOCKET_ENV] == str(tmp_path / "memory" / "memory.sock") and STORE_ENV not in env
        raise RuntimeError("agent blew up")
    with SqliteMemoryStore(tmp_path / "memory.sqlite", "hashed") as store:
        assert store.live_ids(env[REALM_ENV]) == ()


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ("off", {REALM_ENV: "trial:r"}),
        ("on", {REALM_ENV: "trial:r", SOCKET_ENV: "/m/memory.sock"}),
        ("ablate:graph", {REALM_ENV: "trial:r", SOCKET_ENV: "/m/memory.sock"}),
        ("ablate:all", {REALM_ENV: "trial:r"}),
    ],
    ids=["off-has-no-store", "on", "ablate-lane-gets-its-lane-dropping-witness", "ablate-all-has-no-store"],
)
def test_memory_environment_per_condition(condition: str, expected: dict[str, str]) -> None:
    """Regression: `off` exported a kill switch and ablations a lane switch, which the agent could read."""
    env = memory_env(condition, "trial:r", Path("/m/memory.sock"))
    assert env == expected
    assert not {MEMORY_OFF_ENV, ABLATE_LANES_ENV} & set(env)


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: check_conditions(["ablate:nope"], LANES), "condition 'ablate:nope' is unknown"),
        (lambda: check_conditions(["sometimes"], LANES), "condition 'sometimes' is unknown"),
        (lambda: select_tasks(TASKS, ["no-such-task"]), "unknown task"),
        (lambda: schedule(TASKS[:1], ["on"], 0), "trials: must be at least 1"),
    ],
    ids=["unknown-lane", "unknown-condition", "unknown-task", "zero-trials"],
)
def test_bad_matrix_requests_are_refused(call, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ArmsError, match=message):
        call()


def test_paired_command_writes_a_records_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    from flows.cli.main import main

    code = main(["paired", "--embedder", "hashed", "--tasks", "tabmill-delimiter", "--conditions", "off,on", "--artifacts", str(tmp_path), "--json"])
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert [(c["condition"], c["passes"], c["runs"], c["injected"]) for c in result["cells"]] == [("off", 1, 1, 0), ("on", 1, 1, 1)]
    table = pq.read_table(tmp_path / result["records"]).to_pandas()
    assert sorted(table["condition"]) == ["off", "on"]


def test_paired_grades_in_the_flows_cached_aggregate_stage_as_run_does(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression (#30): `memtrial paired` graded its run in the command's process after the flow had
    ended, outside any stage (nothing cached, no plots, no provisioner warnings), while `memtrial run`
    grades each agent's run in the flow's cached aggregate stage; both now grade through
    `flows.paired.grade_run`, inside the flow and its status marker."""
    import json

    from flows.cli.main import main
    from flows.stages import TRACE_ENV

    trace = tmp_path / "stages.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    assert main(["paired", "--tasks", "tabmill-delimiter", "--conditions", "off,on", "--artifacts", str(tmp_path / "a"), "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert ["aggregate", run_id] in [line.split("\t") for line in trace.read_text().splitlines()]


def test_a_matrix_run_on_threads_ends_as_a_paired_run_does_with_its_records_table_sealed(tmp_path: Path) -> None:
    """Regression (#30): `run_matrix` (the thread pool of tests and `memtrial task try`) sealed the
    attempts but wrote no records table, so its runs ended otherwise than the paired flow's; both now
    end with `finish_matrix`: the table, in schedule order, agreeing with every attempt's record, sealed."""
    from tasks_lib.artifacts import run_key
    from tasks_lib.run.layout import RECORDS_TABLE
    from tasks_lib.run.records import read_records
    from tasks_lib.run.seal import verify_run

    records = run(["tabmill-delimiter"], ["off", "on"], tmp_path)
    store = LocalStore(tmp_path / "artifacts")
    assert read_records(store, "test-run", table_required=True) == records
    assert run_key("test-run", RECORDS_TABLE) in {f.key for f in verify_run(store, "test-run").files}


def test_stages_called_one_by_one_give_the_composed_record(tmp_path: Path) -> None:
    """An orchestrator wrapping each stage as its own task gets what `run_attempt` gets."""
    (composed,) = run(["paybridge-tenant-header"], ["on"], tmp_path / "composed")
    attempt = schedule(select_tasks(TASKS, ["paybridge-tenant-header"]), ["on"], 1)[0]
    source = TaskSource(repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks")
    workspace = materialize_workspace(attempt, source, scratch_parent=tmp_path)
    assert workspace.workspace.is_dir() and workspace.home.is_dir() and workspace.before.entries
    memory = provision_memory(attempt, "test-run", workspace.root, "hashed")
    try:
        agent_run = run_agent(attempt, workspace, memory, "calibration")
    finally:
        assert release_memory(memory, "hashed") == memory.planted_ids
    receipt = audit_workspace(attempt, workspace)
    check = check_workspace(attempt, workspace, receipt, agent_run)
    store = LocalStore(tmp_path / "staged")
    record = record_attempt(attempt, run_id="test-run", workspace=workspace, memory=memory, run=agent_run, receipt=receipt,
                            check=check, agent_name="calibration", store=store)
    teardown_workspace(workspace)
    assert not workspace.root.exists()
    assert record.model_dump(exclude=PER_RUN) == composed.model_dump(exclude=PER_RUN) and same_ids_shape(record, composed)
    assert store.exists(record.transcript or "") and store.exists(record.audit_receipt or "")


def test_a_step_wrapper_sees_every_step_once_in_order_and_changes_no_record(tmp_path: Path) -> None:
    """An orchestrator wrapping the steps (as flows.stages does with Prefect tasks) runs the same
    composition as a direct call: same steps, same order, same record; it cannot drift from it."""
    attempt = schedule(select_tasks(TASKS, ["logship-partial-exit"]), ["on"], 1)[0]
    setup = ArmSetup(run_id="test-run", source=TaskSource(REPO, HEAD, "corpora/tasks"), agent_name="calibration",
                     store=LocalStore(tmp_path / "direct"))
    direct = run_attempt(attempt, setup)
    seen: list[str] = []

    def wrap(name, step):  # type: ignore[no-untyped-def]
        def called(*args, **kwargs):  # type: ignore[no-untyped-def]
            seen.append(name)
            return step(*args, **kwargs)
        return called

    wrapped = run_attempt(attempt, ArmSetup(**{**vars(setup), "store": LocalStore(tmp_path / "wrapped")}), wrap=wrap)
    assert tuple(seen) == STEP_NAMES
    assert wrapped.model_dump(exclude=PER_RUN) == direct.model_dump(exclude=PER_RUN) and same_ids_shape(wrapped, direct)


def test_a_failing_wrapped_step_still_forgets_the_memories_and_removes_the_scratch_root(tmp_path: Path) -> None:
    """Release and teardown are not the wrapper's to skip: an orchestrator's step that fails (an
    injected failure, a crashed task run) leaves no planted memory and no scratch folder behind."""
    attempt = schedule(select_tasks(TASKS, ["logship-partial-exit"]), ["on"], 1)[0]
    setup = ArmSetup(run_id="test-run", source=TaskSource(REPO, HEAD, "corpora/tasks"), agent_name="calibration",
                     store=LocalStore(tmp_path / "artifacts"))
    made: dict[str, object] = {}

    def wrap(name, step):  # type: ignore[no-untyped-def]
        def called(*args, **kwargs):  # type: ignore[no-untyped-def]
            if name == "run-agent":
                raise RuntimeError("orchestrator lost the agent")
            made[name] = result = step(*args, **kwargs)
            if name == "provision-memory":  # a second name for the store file, to read it after teardown
                (tmp_path / "memory.sqlite").hardlink_to(result.store_path)
            return result
        return called

    with pytest.raises(RuntimeError, match="orchestrator lost the agent"):
        run_attempt(attempt, setup, wrap=wrap)
    workspace, memory = made["materialize-workspace"], made["provision-memory"]
    assert len(memory.planted_ids) == 2 and not workspace.root.exists()
    with SqliteMemoryStore(tmp_path / "memory.sqlite", "hashed") as store:
        assert store.live_ids(memory.realm) == ()


def test_a_failed_materialization_leaves_no_scratch_folder(tmp_path: Path) -> None:
    attempt = schedule(select_tasks(TASKS, ["tabmill-delimiter"]), ["off"], 1)[0]
    source = TaskSource(repo_root=REPO, commit="0" * 40, tasks_subdir="corpora/tasks")
    with pytest.raises(MemtrialError):
        materialize_workspace(attempt, source, scratch_parent=tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_parallel_attempts_give_the_expected_records_in_schedule_order(tmp_path: Path) -> None:
    plan = schedule(select_tasks(TASKS, ["diskwatch-critical-default", "tabmill-delimiter"]), ["on", "ablate:graph"], 1)
    seen: list[str] = []
    records = run_matrix(plan, run_id="test-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), workers=2,
                         progress=lambda r: seen.append(f"{r.task_id}/{r.condition}"))
    assert [(r.task_id, r.condition) for r in records] == [(a.task.task_id, a.condition) for a in plan]
    assert sorted(seen) == sorted(f"{a.task.task_id}/{a.condition}" for a in plan)
    for attempt, record in zip(plan, records):
        expected = expected_attempt(attempt.task, attempt.condition, KEY_LANES.tasks[attempt.task.task_id])
        assert (record.outcome, record.output_tokens) == (expected.outcome, expected.output_tokens)
    with pytest.raises(ArmsError, match="workers: must be at least 1"):
        run_matrix(plan, run_id="x", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks", agent_name="calibration",
                   store=LocalStore(tmp_path / "a2"), workers=0)


def test_agents_are_told_to_hide_the_corpus_the_checkout_and_the_artifact_root(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """What a confining agent adapter (claude-code under bwrap) hides: every task's hidden tests and
    solution, the checkout with its git history and .memtrial/, and a local artifact root; never an S3 root."""
    monkeypatch.setenv("MEMTRIAL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    monkeypatch.delenv("MEMTRIAL_HOME", raising=False)
    monkeypatch.setenv("MEMTRIAL_PACK_CACHE", str(tmp_path / "packs"))  # none fetched yet: nothing to hide
    task = TASKS[0]
    assert runner_owned_paths(task) == (task.root.parent.absolute(), REPO.absolute(), (tmp_path / "artifacts").absolute())
    monkeypatch.setenv("MEMTRIAL_ARTIFACT_ROOT", "s3://bucket/prefix")
    assert runner_owned_paths(task) == (task.root.parent.absolute(), REPO.absolute())
    (tmp_path / "packs").mkdir()  # once a worker has materialized corpus packs (every task's hidden tests), they are hidden too
    assert runner_owned_paths(task) == (task.root.parent.absolute(), REPO.absolute(), (tmp_path / "packs"))
