"""Hostile class: one attempt crashing the run. 25 nested folders with 200-byte names in an allowed
path made the runner's hand-back of the workspace build host paths past PATH_MAX; `memtrial run`
exited 2 with no records table or report, and a rerun crashed the same way. Through the real nightly
flow with a hostile `command` agent running unprivileged: the deep tree, a fifo, a socket and an
unreadable folder each make only their own attempt `ungradable` with its reason; the other attempts
are graded, the report is written, and a rerun of the same run completes from cache."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hostile_flow import run_hostile

from tasks_lib.analysis.aggregate import load_records
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the command agent runs unprivileged only under a root runner")

HOSTILE = """
import os, socket
if os.path.isdir("logship"):  # a tree deeper than PATH_MAX in an allowed path
    fd = os.open("logship", os.O_RDONLY)
    for i in range(25):
        name = "d%02d" % i + "x" * 197
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep")
    print("left a tree of", 25 * 201, "bytes of path")
elif os.path.isdir("tabmill"):  # a fifo, a socket and a folder nobody may read
    os.mkfifo("tabmill/pipe")
    socket.socket(socket.AF_UNIX).bind("tabmill/sock")
    os.makedirs("tabmill/closed/inner")
    open("tabmill/closed/inner/x", "w").close()
    os.chmod("tabmill/closed", 0)
    print("left a fifo, a socket and a closed folder")
else:
    print("did nothing")
"""
TASKS = ("alertfan-sms-channel", "logship-partial-exit", "tabmill-delimiter")
HOSTILE_TASKS = {"logship-partial-exit", "tabmill-delimiter"}


@pytest.fixture(scope="module")
def crashed_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    tmp_path = tmp_path_factory.mktemp("crash-the-run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return tmp_path, run_hostile(tmp_path, monkeypatch, HOSTILE, TASKS, conditions=["off"], run_id="crash")


def test_a_workspace_past_path_max_makes_only_its_attempt_ungradable(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: the deep tree crashed the whole run (no records table, no report) instead of failing itself."""
    _, records = crashed_run
    (deep,) = [r for r in records if r.task_id == "logship-partial-exit"]
    assert deep.outcome == "ungradable" and deep.infra_failure
    assert deep.failure_reason and "attempt error" in deep.failure_reason


def test_a_fifo_a_socket_and_an_unreadable_folder_fail_only_their_attempt(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: special files and unreadable folders in the workspace must not hang or crash the run;
    the attempt is graded (a fail naming the audit) or ungradable with its reason, never a pass."""
    _, records = crashed_run
    (odd,) = [r for r in records if r.task_id == "tabmill-delimiter"]
    assert odd.outcome in ("fail", "ungradable") and odd.failure_reason


def test_the_other_attempts_are_graded_and_the_report_is_written(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: one attempt's error took every other attempt's grade and the report with it."""
    tmp_path, records = crashed_run
    (plain,) = [r for r in records if r.task_id == "alertfan-sms-channel"]
    assert plain.outcome == "fail" and not plain.infra_failure and plain.failure_reason == "check failed"
    calibration = load_records(open_store(tmp_path / "artifacts"), "crash-calibration")
    assert {r.outcome for r in calibration} <= {"pass", "fail"} and len(calibration) >= len(TASKS)
    reports = list((tmp_path / "artifacts" / "runs" / "crash-command").rglob("report.html"))
    assert reports, "the hostile agent's run has no report"


def test_a_rerun_of_the_run_completes(crashed_run: tuple[Path, list[RunRecord]], prefect_harness: None) -> None:
    """Regression: `memtrial rerun` crashed again on the same attempt; it must complete with the same records."""
    from flows.nightly import nightly

    tmp_path, records = crashed_run
    with pytest.MonkeyPatch.context() as monkeypatch:
        from hostile_flow import KEY, KEY_ENV

        monkeypatch.setenv(KEY_ENV, KEY)
        nightly(config_path=str(tmp_path / "run.yaml"), run_id="crash")
    again = load_records(open_store(tmp_path / "artifacts"), "crash-command")
    assert [(r.task_id, r.outcome, r.failure_reason) for r in again] == [(r.task_id, r.outcome, r.failure_reason) for r in records]
