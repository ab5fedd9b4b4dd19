"""Rerun from cache: after a stage fails, re-running the flow recomputes only that stage and what
depends on it, both through `memtrial rerun RUN_ID` and through Prefect's retry of the same flow
run. Proven by counting real stage executions (MEMTRIAL_STAGE_TRACE), not by timing."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from datetime import UTC
from pathlib import Path

import pytest

from flows.stages import FAIL_ONCE_ENV, FAIL_STAGE_ENV, TRACE_ENV, InjectedFailure
from tasks_lib.artifacts import new_run_id, open_store

TASK = "rotlog-keep-count"
ARM_STEPS = ("run-arm", "materialize-workspace", "provision-memory", "run-agent", "audit-mutations", "check-workspace", "record-arm")


def write_config(tmp_path: Path, flow_retries: int = 0) -> Path:
    path = tmp_path / "run.yaml"
    path.write_text(
        f"name: rerun-test\ntasks: [{TASK}]\nconditions: ['off', 'on']\nsuites: []\n"
        f"artifact_root: {tmp_path / 'artifacts'}\nflow_retries: {flow_retries}\n",
        encoding="utf-8",
    )
    return path


def executions(trace: Path, start: int = 0) -> Counter[str]:
    """Stage executions recorded in the trace file from line `start` on."""
    lines = trace.read_text(encoding="utf-8").splitlines()[start:] if trace.exists() else []
    return Counter(line.split("\t")[0] for line in lines)


def line_count(trace: Path) -> int:
    return len(trace.read_text(encoding="utf-8").splitlines()) if trace.exists() else 0


def full_run(arms: int) -> Counter[str]:
    return Counter({"prepare": 1, "corpus-invariants": 1, **{step: arms for step in ARM_STEPS}, "store-records": 1,
                    "aggregate": 1, "report": 1})


def test_memtrial_rerun_recomputes_only_the_failed_report(prefect_harness: None, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from flows.cli.main import main
    from flows.nightly import nightly

    config, trace, run_id = write_config(tmp_path), tmp_path / "trace.tsv", new_run_id("test")
    monkeypatch.setenv(TRACE_ENV, str(trace))
    monkeypatch.setenv(FAIL_STAGE_ENV, "report")
    with pytest.raises(InjectedFailure):
        nightly(config_path=str(config), run_id=run_id)
    assert executions(trace) == full_run(arms=2)
    store = open_store(tmp_path / "artifacts")
    records_key = f"runs/{run_id}-calibration/records.parquet"
    assert store.exists(records_key) and not store.exists(f"runs/{run_id}-calibration/report.html")
    drawn = set(store.list_keys("cache/plots/"))
    assert len(drawn) == 3, "the aggregate stage draws the report's plots, so the report's rerun draws none"

    monkeypatch.delenv(FAIL_STAGE_ENV)
    before = line_count(trace)
    assert main(["rerun", run_id, "--plain"]) == 0
    assert executions(trace, before) == Counter({"report": 1})
    assert store.exists(f"runs/{run_id}-calibration/report.html")
    assert set(store.list_keys("cache/plots/")) == drawn, "the rerun's report drew a plot the aggregate stage had drawn"
    assert store.exists(f"runs/{run_id}/nightly.json")
    shown = capsys.readouterr()
    assert f"report (calibration): {tmp_path / 'artifacts'}/runs/{run_id}-calibration/report.html" in shown.out
    assert "arms: calibration: done, 2 task(s), 2 from cache" in shown.err


def test_failed_arm_then_prefect_flow_retry_reruns_only_that_arm_and_its_dependents(
        prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect.client.orchestration import get_client

    from flows.nightly import nightly

    config, trace, run_id = write_config(tmp_path, flow_retries=1), tmp_path / "trace.tsv", new_run_id("test")
    monkeypatch.setenv(TRACE_ENV, str(trace))
    monkeypatch.setenv(FAIL_STAGE_ENV, "run-agent")
    monkeypatch.setenv(FAIL_ONCE_ENV, str(tmp_path / "failed-once"))
    state = nightly.with_options(retries=1)(config_path=str(config), run_id=run_id, return_state=True)
    assert state.is_completed(), state.message

    # Two arms ran in the first attempt, one of them failed in its agent step (so its audit, check and
    # record never ran); the retry of the same flow run took the completed arm from cache and ran
    # only the failed one, then what depends on it.
    expected = full_run(arms=2) + Counter({step: 1 for step in ARM_STEPS[:4]})
    assert executions(trace) == expected

    async def run_count() -> int:
        async with get_client() as client:
            return (await client.read_flow_run(state.state_details.flow_run_id)).run_count

    assert asyncio.run(run_count()) == 2
    records = open_store(tmp_path / "artifacts").get_table(f"runs/{run_id}-calibration/records.parquet").to_pandas()
    assert sorted(records["condition"]) == ["off", "on"] and set(records["task_id"]) == {TASK}


def test_a_new_run_reuses_prepared_tasks_but_runs_every_arm_again(prefect_harness: None, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """A new run id is a new measurement: arms run again, content-keyed preparation does not."""
    from flows.nightly import nightly

    config, trace = write_config(tmp_path), tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    nightly(config_path=str(config), run_id=new_run_id("first"))
    before = line_count(trace)
    nightly(config_path=str(config), run_id=new_run_id("second"))
    second = executions(trace, before)
    assert second["prepare"] == 0 and second["corpus-invariants"] == 0
    assert second["run-arm"] == 2 and second["report"] == 1


def test_an_arm_is_one_task_run_with_its_steps_traced_inside_it(prefect_harness: None, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """`run-arm` composes its steps through the library's `run_attempt`, not a copy of it, in one task
    run: no step is a task run of its own (as nested task runs they were 924 of a default run's 977,
    none cached or retried on its own), and the trace still counts each step in order."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterId

    from flows.paired import paired_flow
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.run.config import RunConfig

    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    artifacts = str(tmp_path / "artifacts")
    state = paired_flow(RunConfig(tasks=[TASK], conditions=["on"], artifact_root=artifacts), new_run_id("one-task-run"),
                        str(PROJECT_ROOT), artifacts, return_state=True)
    assert state.is_completed(), state.message

    async def task_runs():  # type: ignore[no-untyped-def]
        async with get_client() as client:
            flow_run = FlowRunFilter(id=FlowRunFilterId(any_=[state.state_details.flow_run_id]))
            return await client.read_task_runs(flow_run_filter=flow_run)

    runs = asyncio.run(task_runs())
    arms = [r for r in runs if r.name.startswith("run-arm-")]
    assert len(arms) == 1 and all(r.state_name == "Completed" for r in arms)
    arm_ids = {r.id for r in arms}
    assert not [r.name for r in runs if arm_ids & {p.id for p in r.task_inputs.get("__parents__", [])}]
    assert not [r.name for r in runs if r.name.rsplit("-", 1)[0] in ARM_STEPS[1:]]
    label = f"{TASK} on t0 (calibration)"
    lines = [tuple(line.split("\t")) for line in trace.read_text(encoding="utf-8").splitlines()]
    arm_lines = lines[[stage for stage, _ in lines].index("run-arm"):][:len(ARM_STEPS)]
    assert arm_lines == [(step, label if step in ("run-arm", "run-agent") else "") for step in ARM_STEPS]


def test_rerun_does_not_print_0_from_cache_for_stages_prefect_shows_as_cached(
        prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: `memtrial rerun` of a finished run printing "0 from cache" for the records,
    grading and report stages while Prefect shows each of their task runs as Cached. Every stage's
    from-cache count must equal the number of its task runs in the rerun whose Prefect state is Cached."""
    import re
    from datetime import datetime

    from prefect.client.orchestration import get_client

    from flows.cli.main import main

    config = write_config(tmp_path)
    assert main(["run", "--config", str(config), "--plain", "--json"]) == 0
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    rerun_started = datetime.now(UTC)
    assert main(["rerun", run_id, "--plain"]) == 0
    shown = dict(re.findall(r"stage \d+/\d+ (.+): done, \d+ task\(s\), (\d+) from cache", capsys.readouterr().err))

    async def task_runs():  # type: ignore[no-untyped-def]
        async with get_client() as client:
            return await client.read_task_runs()

    cached_in_prefect = Counter(r.name.rsplit("-", 1)[0] for r in asyncio.run(task_runs())
                                if r.created and r.created >= rerun_started and r.state_name == "Cached")
    stage_tasks = {"records: calibration": "store-records", "grade + aggregate": "aggregate", "report": "report"}
    assert {stage: int(shown[stage]) for stage in stage_tasks} == {stage: cached_in_prefect[task] for stage, task in stage_tasks.items()}
    assert all(cached_in_prefect[task] == 1 for task in stage_tasks.values()), cached_in_prefect


def test_the_arms_of_one_task_in_one_process_build_its_fixture_once(prefect_harness: None, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Each flow arm used to build its task's fixture from git objects (1.7x the whole bare-arm floor);
    the arms of one task in one process now copy one template, and start from the same fixture."""
    from flows import stages
    from flows.paired import paired_flow
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.arm import steps, workspace
    from tasks_lib.run.config import RunConfig

    builds: list[str] = []
    real = workspace.build_redacted

    def counted(repo_root: Path, commit: str, subdir: str, dest: Path):  # type: ignore[no-untyped-def]
        builds.append(subdir)
        return real(repo_root, commit, subdir, dest)

    monkeypatch.setattr(stages, "_templates", [])  # a fresh set: an earlier test in this process built this task's
    monkeypatch.setattr(workspace, "build_redacted", counted)
    monkeypatch.setattr(steps, "build_redacted", counted)
    artifacts = str(tmp_path / "artifacts")
    run_id = new_run_id("templates")
    state = paired_flow(RunConfig(tasks=[TASK], conditions=["off", "on", "ablate:all"], artifact_root=artifacts), run_id,
                        str(PROJECT_ROOT), artifacts, return_state=True)
    assert state.is_completed(), state.message
    assert len(builds) == 1, builds
    records = open_store(tmp_path / "artifacts").get_table(f"runs/{run_id}/records.parquet").to_pylist()
    assert len(records) == 3 and len({r["corpus_id"] for r in records}) == 1
