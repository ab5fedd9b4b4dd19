"""Progress display and task runner selection (no Prefect flow run needed)."""

from __future__ import annotations

import io

import pytest
from prefect.task_runners import ThreadPoolTaskRunner
from rich.console import Console

from flows.runners import RunnerError, task_runner
from flows.runtime.progress import (
    NullReporter,
    PlainReporter,
    RichReporter,
    reporter,
    reporting,
)
from tasks_lib.run.config import RunnerSpec


def drive(stages_reporter) -> None:  # type: ignore[no-untyped-def]
    stages_reporter.plan(["prepare", "arms: calibration", "report"])
    stages_reporter.start("prepare", 2)
    stages_reporter.advance("prepare", cached=True)
    stages_reporter.advance("prepare")
    stages_reporter.finish("prepare")
    stages_reporter.start("arms: calibration", 4)
    for _ in range(3):
        stages_reporter.advance("arms: calibration")


def test_plain_lines_give_stage_position_and_task_counts() -> None:
    buffer = io.StringIO()
    plain = PlainReporter(Console(file=buffer, width=200))
    drive(plain)
    plain.finish("arms: calibration", "3 passed")
    assert buffer.getvalue().splitlines() == [
        "stage 1/3 prepare: 2 task(s)",
        "stage 1/3 prepare: done, 2 task(s), 1 from cache",
        "stage 2/3 arms: calibration: 4 task(s)",
        "stage 2/3 arms: calibration: done, 3 task(s), 0 from cache; 3 passed",
    ]


def test_live_bar_shows_stage_position_done_of_total_and_cache_hits() -> None:
    buffer = io.StringIO()
    live = RichReporter(Console(file=buffer, force_terminal=True, width=160))
    with live.progress:
        drive(live)
    text = buffer.getvalue()
    assert "1/3" in text and "2/2" in text and "1 cached" in text
    assert "2/3" in text and "3/4" in text


def test_reporting_installs_plain_reporter_off_a_terminal_and_restores_the_null_one() -> None:
    assert isinstance(reporter(), NullReporter)
    with reporting(Console(file=io.StringIO()), live=None) as installed:
        assert isinstance(installed, PlainReporter) and reporter() is installed
    assert isinstance(reporter(), NullReporter)


def test_thread_runner_is_the_default_and_dask_is_a_config_switch() -> None:
    runner = task_runner(RunnerSpec())
    assert isinstance(runner, ThreadPoolTaskRunner) and runner._max_workers == 2
    from prefect_dask import DaskTaskRunner

    dask = task_runner(RunnerSpec(kind="dask", workers=2))
    assert isinstance(dask, DaskTaskRunner)
    assert task_runner(RunnerSpec(kind="dask", address="tcp://127.0.0.1:8786")).address == "tcp://127.0.0.1:8786"


def test_a_scheduler_address_without_dask_is_refused() -> None:
    with pytest.raises(RunnerError, match="runner.address is only for runner.kind dask"):
        task_runner(RunnerSpec(address="tcp://127.0.0.1:8786"))
