"""Finding and reading runs: `memtrial runs` and `memtrial show` over real runs (a calibration
`memtrial paired` and the nightly flow on one task), the status marker a failed run leaves, the
marker kept out of the sealed evidence, an S3 root, and the nightly flow run's name, tags and
headline artifacts read back through the Prefect client."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
import pytest

from flows.cli.main import main
from flows.stages import FAIL_STAGE_ENV, InjectedFailure
from tasks_lib.artifacts import LocalStore, new_run_id, open_store
from tasks_lib.run.index import list_runs, run_files
from tasks_lib.run.seal import evidence_keys, verify_run
from tasks_lib.run.status import (
    RUN_STATUS_JSON,
    mark_ended,
    process_started,
    read_status,
    status_key,
)

TASK = "rotlog-keep-count"
REFERENCE_BUILD = "memtrial-reference/0.1.0"


def runs_json(root: str, capsys: pytest.CaptureFixture[str]) -> list[dict[str, Any]]:
    capsys.readouterr()
    assert main(["runs", "--artifact-root", root, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def write_config(folder: Path) -> Path:
    """A nightly config of one task, memory off and on, no suites, its artifacts under `folder`."""
    path = folder / "run.yaml"
    path.write_text(f"name: runs-test\ntasks: [{TASK}]\nconditions: ['off', 'on']\nsuites: []\nartifact_root: {folder / 'artifacts'}\n",
                    encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def paired_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """(artifact root, run id) of a real calibration `memtrial paired` over one task, graded by `memtrial report`."""
    root = str(tmp_path_factory.mktemp("paired") / "artifacts")
    assert main(["paired", "--embedder", "hashed", "--tasks", TASK, "--conditions", "off,on", "--artifacts", root, "--plain"]) == 0
    (run_id,) = run_files(open_store(root))
    assert main(["report", run_id, "--artifacts", root]) == 0
    return root, run_id


def test_a_finished_paired_run_is_listed_complete_with_its_headline(paired_run: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Without a marker a finished run could not be told from one still going; without the summary
    the listing would show no figures."""
    root, run_id = paired_run
    entry = next(e for e in runs_json(root, capsys) if e["run_id"] == run_id)
    assert (entry["state"], entry["state_from"], entry["stage"], entry["error"]) == ("complete", "marker", None, None)
    assert entry["agents"] == ["calibration"] and entry["memory_systems"] == [REFERENCE_BUILD]
    assert entry["headline"]["tasks"] == 1 and entry["headline"]["success_difference"] is not None
    assert entry["headline"]["net_mui"] is not None and entry["started_at"] is not None
    assert main(["runs", "--artifacts", root]) == 0
    shown = capsys.readouterr().out
    assert run_id in shown and "complete" in shown and "on - off" in shown and "net MUI" in shown and REFERENCE_BUILD in shown


def test_the_status_marker_is_never_sealed_evidence(paired_run: tuple[str, str]) -> None:
    """A marker written after the seal (every `complete` one) must not read as evidence added after the run."""
    root, run_id = paired_run
    store = open_store(root)
    status = read_status(store, run_id)
    assert status is not None and status.state == "complete" and status.ended_at is not None
    assert status.memtrial_version.startswith("memtrial ")
    assert status_key(run_id) == f"runs/{run_id}/{RUN_STATUS_JSON}" and status_key(run_id) not in evidence_keys(store, run_id)
    assert status_key(run_id) not in {f.key for f in verify_run(store, run_id).files}
    mark_ended(store, status, RuntimeError("rewritten"), "report")
    verify_run(store, run_id)  # a changed marker is no tampering
    mark_ended(store, status)


def test_show_run_prints_the_headline_delivery_and_seal(paired_run: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    root, run_id = paired_run
    capsys.readouterr()
    assert main(["show", run_id, "--artifacts", root]) == 0
    shown = capsys.readouterr().out
    assert "status:        complete" in shown and "agents:        calibration" in shown
    assert "success on - off:" in shown and "net MUI" in shown
    assert "delivery per condition:" in shown and "on             1/1 confirmed" in shown and "off            0/1 confirmed" in shown
    assert "evidence:      sealed," in shown and "intact" in shown


def test_show_attempt_prints_record_transcript_audit_and_check_output(
        paired_run: tuple[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    """Everything a failed or surprising attempt is judged by, in one place, the check's stored output included;
    an attempt whose check never ran says so rather than showing nothing."""
    root, run_id = paired_run
    capsys.readouterr()
    assert main(["show", run_id, TASK, "on", "t0", "--artifacts", root]) == 0
    shown = capsys.readouterr().out
    for line in ("outcome:          pass", "failure reason:   -", "injection:        yes", "check exit code:  0",
                 "check sandbox:    local/", "judged:           apart (a judge of its own uid", "audit receipt:    passed", "delivery receipt: 1 recall(s)",
                 f"check output:     runs/{run_id}/attempts/{TASK}/on/t0/check.txt", "exit code: 0", "transcript:       ",
                 "user/prompt: ", "hook/context: "):
        assert line in shown, line
    assert "delivered ids:    -" not in shown and "tokens:           " in shown and "wall time:" in shown
    assert main(["show", run_id, TASK, "off", "0", "--artifacts", root, "--json"]) == 0
    attempt = json.loads(capsys.readouterr().out)
    assert attempt["record"]["condition"] == "off" and attempt["delivery"] is None and attempt["evidence_problem"] is None


@pytest.mark.parametrize(("argv", "names"), [
    (["show", "no-such-run"], "runs there, newest first: {run_id}"),
    (["show", "{run_id}", TASK, "ablate:all", "0"], f"has no attempt {TASK} ablate:all 0; its attempts: {TASK} off 0; {TASK} on 0"),
    (["show", "{run_id}", "no-such-task", "on", "0"], f"its attempts: {TASK} off 0"),
    (["show", "{run_id}", TASK, "on", "first"], "trial 'first' is not a number"),
    (["show", "{run_id}", TASK], "an attempt is TASK CONDITION TRIAL"),
], ids=["unknown-run", "unknown-condition", "unknown-task", "bad-trial", "half-an-attempt"])
def test_an_unknown_run_or_attempt_is_one_line_naming_what_exists(
        paired_run: tuple[str, str], capsys: pytest.CaptureFixture[str], argv: list[str], names: str) -> None:
    """A typo must not end in a traceback or a silent empty answer."""
    root, run_id = paired_run
    capsys.readouterr()
    assert main([a.format(run_id=run_id) for a in argv] + ["--artifacts", root]) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtrial: error: ") and names.format(run_id=run_id) in lines[0]
    assert "Traceback" not in captured.err + captured.out


def test_runs_and_show_read_an_s3_root(paired_run: tuple[str, str], s3_env: str, capsys: pytest.CaptureFixture[str]) -> None:
    """The same run, copied file for file to an S3-compatible server, lists and shows the same."""
    root, run_id = paired_run
    bucket = f"runs-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    local, remote = open_store(root), open_store(f"s3://{bucket}/team")
    for key in local.list_keys(f"runs/{run_id}"):
        remote.put_bytes(key, local.get_bytes(key))
    (entry,) = runs_json(f"s3://{bucket}/team", capsys)
    assert entry == next(e for e in runs_json(root, capsys) if e["run_id"] == run_id)
    assert main(["show", run_id, TASK, "on", "0", "--artifact-root", f"s3://{bucket}/team"]) == 0
    assert "outcome:          pass" in capsys.readouterr().out
    assert main(["show", "no-such-run", "--artifact-root", f"s3://{bucket}/team"]) == 2
    assert f"not under s3://{bucket}/team/runs/; runs there, newest first: {run_id}" in capsys.readouterr().err


def test_a_failed_paired_run_is_listed_failed_with_its_stage_and_newest_first(
        paired_run: tuple[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A run that raised used to leave only its partial files: it read as unknown (or, had it got
    as far as its records, as complete)."""
    root, finished = paired_run
    monkeypatch.setenv(FAIL_STAGE_ENV, "run-agent")
    assert main(["paired", "--embedder", "hashed", "--tasks", TASK, "--conditions", "off,on", "--artifacts", root, "--plain"]) == 2
    assert "failed on purpose" in capsys.readouterr().err
    listed = runs_json(root, capsys)
    failed = listed[0]
    assert [e["run_id"] for e in listed].index(finished) > 0, "newest first"
    assert (failed["state"], failed["state_from"], failed["stage"]) == ("failed", "marker", "arms: calibration")
    assert "failed on purpose" in failed["error"] and failed["agents"] == ["calibration"]
    assert main(["runs", "--artifacts", root]) == 0
    shown = capsys.readouterr().out
    assert "failed (arms: calibration)" in shown and f"{failed['run_id']}: failed in arms: calibration: stage 'run-agent'" in shown
    assert main(["show", failed["run_id"], "--artifacts", root]) == 0
    assert "status:        failed (arms: calibration)" in (shown := capsys.readouterr().out) and "error:         stage 'run-agent'" in shown


def test_a_run_stored_without_a_marker_is_complete_only_when_sealed(tmp_path: Path) -> None:
    """Runs stored before markers existed: sealed records read as complete, anything less as unknown, never complete."""
    from test_grading import scenario_records, store_scenario

    store = LocalStore(tmp_path / "artifacts")
    store_scenario(store, scenario_records("old-run"))
    (entry,) = list_runs(store)
    assert (entry.state, entry.state_from, entry.started_at) == ("complete", "files", None)
    store.delete("runs/old-run/manifest.json")
    assert list_runs(store)[0].state == "unknown"


def test_a_run_that_has_started_is_listed_running(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Between its start and its end a run has partial files only: its marker says it is going."""
    from tasks_lib.run.status import mark_running

    root = str(tmp_path / "artifacts")
    mark_running(open_store(root), "paired-20990101-000000-abcdef", version="memtrial 0+test", agents=["calibration"],
                 memory_system="reference")
    (entry,) = runs_json(root, capsys)
    assert (entry["state"], entry["agents"], entry["memory_systems"], entry["headline"]) == ("running", ["calibration"], ["reference"], None)


def test_a_run_killed_outright_is_listed_stopped_not_running_forever(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A run killed with SIGKILL cannot write `failed`: its marker said `running` for ever. The marker
    names its host, process and the process's start time, so the listing sees the process is gone."""
    root = str(tmp_path / "artifacts")
    run_id = "paired-20990101-000000-abcdef"
    child = subprocess.Popen(
        [sys.executable, "-c",
         "import sys, time; from tasks_lib.artifacts import open_store; from tasks_lib.run.status import mark_running; "
         f"mark_running(open_store({root!r}), {run_id!r}, version='memtrial 0+test'); print('marked', flush=True); time.sleep(600)"],
        stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "marked"
        (entry,) = runs_json(root, capsys)
        assert entry["state"] == "running"
    finally:
        child.kill()
        child.wait()
    (entry,) = runs_json(root, capsys)
    assert entry["state"] == "stopped"
    main(["runs", "--artifact-root", root])
    assert "killed before it could end" in capsys.readouterr().out


def test_a_rerun_keeps_when_the_run_first_started(tmp_path: Path) -> None:
    """A rerun of the same run id rewrote the marker with a new start time, so the run looked as if
    it had started at its rerun; the first start stays and the rerun is `resumed_at`."""
    from tasks_lib.run.status import mark_running

    store = open_store(str(tmp_path / "artifacts"))
    first = mark_running(store, "paired-20990101-000000-abcdef", version="memtrial 0+test")
    mark_ended(store, first, RuntimeError("report failed"), "report")
    again = mark_running(store, "paired-20990101-000000-abcdef", version="memtrial 0+test")
    assert (again.started_at, again.state, again.error) == (first.started_at, "running", None)
    assert first.resumed_at is None and again.resumed_at is not None and again.resumed_at >= first.started_at
    assert read_status(store, "paired-20990101-000000-abcdef") == again


def test_a_reused_pid_or_another_hosts_run_is_not_taken_for_the_run(tmp_path: Path) -> None:
    """The PID alone could be alive again as another process; a marker from another host cannot be
    checked here. Neither may flip the listed state the wrong way."""
    from tasks_lib.run.status import RunStatus, stopped_outright

    mine = RunStatus(run_id="r", state="running", started_at=datetime.now(UTC), memtrial_version="memtrial 0+test",
                     host=socket.gethostname(), pid=os.getpid(), pid_started=process_started(os.getpid()))
    assert not stopped_outright(mine)
    assert stopped_outright(mine.model_copy(update={"pid_started": (mine.pid_started or 0) + 1}))
    assert not stopped_outright(mine.model_copy(update={"host": "another-host.invalid", "pid_started": 1}))
    assert not stopped_outright(mine.model_copy(update={"host": None, "pid": None, "pid_started": None}))


def flow_run_named(name: str) -> Any:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterName

    async def read() -> Any:
        async with get_client() as client:
            return await client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[name])))

    return asyncio.run(read())


def test_the_nightly_flow_run_is_named_tagged_and_publishes_its_headline(
        prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In the Prefect UI a nightly run was an anonymous flow run (a random name, no tags) and its
    headline was only in the artifact root."""
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import ArtifactFilter, ArtifactFilterKey

    from flows.nightly import nightly
    from flows.report_artifacts import artifact_key

    run_id = new_run_id("named")
    result = nightly(config_path=str(write_config(tmp_path)), run_id=run_id)
    (flow_run,) = flow_run_named(run_id)
    assert flow_run.name == run_id and flow_run.state.is_completed()
    assert {"agent:calibration", "memory:reference", f"memory:{REFERENCE_BUILD}"} <= set(flow_run.tags)
    keys = [artifact_key(run_id, "headline"), artifact_key(run_id, "headline-table")]

    async def artifacts() -> Any:
        async with get_client() as client:
            return await client.read_artifacts(artifact_filter=ArtifactFilter(key=ArtifactFilterKey(any_=keys)))

    published = {a.key: a for a in asyncio.run(artifacts())}
    assert set(published) == set(keys) and all(a.flow_run_id == flow_run.id for a in published.values())
    assert published[keys[0]].type == "markdown" and "on - off" in published[keys[0]].data and "**calibration**" in published[keys[0]].data
    table = published[keys[1]]
    rows = json.loads(table.data) if isinstance(table.data, str) else table.data
    assert table.type == "table" and [r["agent"] for r in rows] == ["calibration"] and rows[0]["run"] == f"{run_id}-calibration"

    root = str(tmp_path / "artifacts")
    listed = runs_json(root, capsys)
    assert [e["run_id"] for e in listed] == [run_id, result.agents[0].run_id], "the agent's run right under its nightly run"
    parent, child = listed
    assert (parent["state"], parent["agents"], parent["headline"]) == ("complete", ["calibration"], None)
    assert (child["state"], child["state_from"], child["parent"]) == ("complete", "parent", run_id) and child["headline"]["tasks"] == 1
    assert main(["runs", "--artifacts", root]) == 0
    assert "see its agents' runs below" in capsys.readouterr().out
    assert main(["show", run_id, "--artifacts", root]) == 0
    shown = capsys.readouterr().out
    assert f"agent run:     {run_id}-calibration" in shown and "evidence:      none of its own" in shown
    # the nightly run's own id answers too: its agent run's headline, and its attempts by the same id
    assert f"headline of {run_id}-calibration:\n  success on - off: " in shown, shown
    assert main(["show", run_id, TASK, "on", "0", "--artifacts", root]) == 0
    attempt = capsys.readouterr()
    assert f"attempt of {run_id}-calibration" in attempt.err and TASK in attempt.out
    # and `report` (it refused the nightly run's id: "no records.parquet under runs/<id>/")
    assert main(["report", run_id, "--artifacts", root]) == 0
    reported = capsys.readouterr()
    assert f"report of {run_id}-calibration" in reported.err and reported.out.startswith("success on - off: "), reported
    assert f"report: {root}/runs/{run_id}-calibration/report.html" in reported.out


def test_a_failed_nightly_run_is_listed_failed_and_its_flow_run_still_named(
        prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A nightly run started without a run id (as a deployment starts it) is renamed once its id is drawn,
    and a failure leaves the failed marker with the stage."""
    from flows.nightly import nightly

    monkeypatch.setenv(FAIL_STAGE_ENV, "run-agent")
    with pytest.raises(InjectedFailure):
        nightly(config_path=str(write_config(tmp_path)))
    root = str(tmp_path / "artifacts")
    listed = runs_json(root, capsys)
    parent = listed[0]
    assert parent["run_id"].startswith("nightly-") and (parent["state"], parent["stage"]) == ("failed", "arms: calibration")
    assert all(e["state"] == "failed" for e in listed), "an agent's run of a failed nightly run is not complete"
    (flow_run,) = flow_run_named(parent["run_id"])
    assert flow_run.state.is_failed() and "agent:calibration" in flow_run.tags
