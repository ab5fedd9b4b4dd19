"""Ctrl-C during a run: `memtrial run` interrupted by SIGINT in the corpus invariants, in the arms and in
grading, then `memtrial rerun`; and `memtrial cache`. Real `memtrial` processes (each with its own local
Prefect server), the calibration agent on two tasks, one uninterrupted baseline run shared by the tests.
The signal goes to the command's process group, as a terminal's Ctrl-C does."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from tasks_lib.sandbox.procs import TreeWatcher, is_running

CLI = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]
TASKS = "[rotlog-keep-count, tabmill-delimiter]"
VARYING = {"run_id", "worker", "wall_seconds", "transcript", "audit_receipt", "delivery_receipt", "delivery_nonce",
           "planted_ids", "delivered_ids", "served_ids", "check_output"}
"""Record fields that differ between two uninterrupted runs (ids and keys derived from the run id or its
secret, timings, the check's output with its nonce); the id lists are compared by length."""
EXIT_SECONDS = 10.0
"""The longest a run may take from the signal to its exit."""


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API") and k != "MEMTRIAL_STAGE_TRACE"}
    return {**env, "PREFECT_HOME": str(home / "prefect"), "MEMTRIAL_HOME": str(home / "memtrial"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _config(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "run.yaml"
    config.write_text(f"name: interrupt\ntasks: {TASKS}\nconditions: ['off', 'on']\ntrials: 1\nsuites: []\nembedder: hashed\n"
                      f"artifact_root: {folder / 'artifacts'}\n", encoding="utf-8")
    return config


def _rows(folder: Path) -> list[dict[str, Any]]:
    """The calibration agent's records, in cell order, without the fields that differ between runs."""
    (table,) = (folder / "artifacts" / "runs").glob("*-calibration/records.parquet")
    rows = []
    for row in pq.read_table(table).to_pylist():
        kept = {k: v for k, v in row.items() if k not in VARYING}
        kept.update({f"{k} count": len(row[k] or ()) for k in ("planted_ids", "delivered_ids", "served_ids")})
        rows.append(kept)
    return sorted(rows, key=lambda r: (r["task_id"], r["condition"], r["trial"]))


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("interrupt-home")


@pytest.fixture(scope="module")
def baseline(home: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, list[dict[str, Any]]]]:
    """One uninterrupted run (its folder, its records), shared by the tests."""
    folder = tmp_path_factory.mktemp("baseline")
    done = subprocess.run([*CLI, "run", "--config", str(_config(folder)), "--plain"], env=_env(home), cwd=folder,
                          capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    yield folder, _rows(folder)


def _interrupt(argv: list[str], stage: str, home: Path, folder: Path, delay: float = 0.0) -> str:
    """Run `memtrial ARGV`, send SIGINT to its process group once stage `stage` started (the trace file),
    check it stopped as promised (exit 130 within EXIT_SECONDS, one line, no traceback or Prefect dump,
    no process of it left, its marker `interrupted`); return the run id the line names."""
    trace = folder / "trace.txt"
    trace.unlink(missing_ok=True)
    env = {**_env(home), "MEMTRIAL_STAGE_TRACE": str(trace)}
    flow = subprocess.Popen([*CLI, *argv, "--plain"], env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    watcher = TreeWatcher(flow.pid, interval=0.05).start()
    try:
        deadline = time.monotonic() + 300
        while not (trace.is_file() and f"{stage}\t" in trace.read_text(encoding="utf-8")):
            assert flow.poll() is None and time.monotonic() < deadline, f"the run ended before stage {stage} started"
            time.sleep(0.05)
        time.sleep(delay)
        os.killpg(flow.pid, signal.SIGINT)
        signalled = time.monotonic()
        try:
            _, stderr = flow.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(flow.pid, signal.SIGKILL)
            _, stderr = flow.communicate()
        took = time.monotonic() - signalled
    finally:
        watcher.stop()
        if flow.poll() is None:
            os.killpg(flow.pid, signal.SIGKILL)
            flow.wait()

    assert flow.returncode == 130 and took < EXIT_SECONDS, f"{stage}: exit {flow.returncode} after {took:.1f} s: {stderr[-2000:]}"
    assert "Traceback" not in stderr and "EventsWorker" not in stderr and "Connection refused" not in stderr, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines() if "interrupted" in line]
    run_id = line.split()[2]
    assert f"'memtrial rerun {run_id}' resumes" in line and "(SIGINT)" in line, line
    time.sleep(0.5)  # the local server's watchdog and the kernel's reaping
    survivors = [pid for pid, started in watcher.seen.items() if pid != flow.pid and is_running(pid, started)]
    assert not survivors, f"{stage}: processes of the interrupted run still run: {survivors}"
    listed = subprocess.run([*CLI, "runs", "--json", "--artifact-root", str(folder / "artifacts")], env=_env(home),
                            capture_output=True, text=True, timeout=120, check=False)
    (entry,) = [e for e in json.loads(listed.stdout) if e["run_id"] == run_id]
    assert entry["state"] == "interrupted", entry
    return run_id


def test_ctrl_c_in_each_stage_stops_in_seconds_caches_nothing_cut_short_and_rerun_gives_the_uninterrupted_records(
        home: Path, baseline: tuple[Path, list[dict[str, Any]]], tmp_path: Path) -> None:
    """The failures prevented: a Ctrl-C cached as a task's verdict (an invariants check killed by the
    signal excluded the task from every later run on the root), a run that went on for minutes after
    the signal with Prefect dumps and 'Connection refused' instead of one line, processes of the run
    left running, and a marker that did not say the run was interrupted. One run, interrupted in the
    fixtures' preparation, resumed and interrupted in the corpus invariants, in its arms, in storing
    its records and in grading, then resumed to the end: the records of an uninterrupted run."""
    run_id = _interrupt(["run", "--config", str(_config(tmp_path))], "prepare", home, tmp_path)
    assert _interrupt(["rerun", run_id], "corpus-invariants", home, tmp_path, delay=0.5) == run_id
    assert _interrupt(["rerun", run_id], "run-agent", home, tmp_path) == run_id
    assert _interrupt(["rerun", run_id], "store-records", home, tmp_path) == run_id
    assert _interrupt(["rerun", run_id], "aggregate", home, tmp_path) == run_id

    rerun = subprocess.run([*CLI, "rerun", run_id, "--plain"], env=_env(home), cwd=tmp_path,
                           capture_output=True, text=True, timeout=600, check=False)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert "excluded" not in rerun.stdout, rerun.stdout[-2000:]
    assert _rows(tmp_path) == baseline[1]


def _cache(home: Path, root: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, "cache", *argv, "--artifact-root", str(root)], env=_env(home), capture_output=True, text=True,
                          timeout=120, check=False)


def _cached(home: Path, root: Path) -> list[dict[str, Any]]:
    listed = _cache(home, root, "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return list(json.loads(listed.stdout))


def test_memtrial_cache_lists_each_stage_result_and_clears_it_per_task_per_stage_and_whole(
        home: Path, baseline: tuple[Path, list[dict[str, Any]]]) -> None:
    """The failure prevented: a poisoned or stale cached result the user could neither see nor clear
    (nothing said which stored result belonged to which stage or task)."""
    root = baseline[0] / "artifacts"
    entries = _cached(home, root)
    stages = {e["stage"] for e in entries}
    assert {"prepare-task-corpus", "corpus-invariants", "run-arm", "matrix-seal", "store-records", "aggregate", "report"} <= stages, stages
    arms = [e for e in entries if e["stage"] == "run-arm"]
    assert sorted(e["tasks"][0] for e in arms) == ["rotlog-keep-count"] * 2 + ["tabmill-delimiter"] * 2

    refused = _cache(home, root, "clear", "--stage", "no-such-stage")
    assert refused.returncode == 2 and "cached stages: " in refused.stderr and "Traceback" not in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and len(_cached(home, root)) == len(entries)

    cleared = _cache(home, root, "clear", "--task", "rotlog-keep-count")
    assert cleared.returncode == 0, cleared.stderr
    left = _cached(home, root)
    assert not [e for e in left if "rotlog-keep-count" in e["tasks"]], left
    assert [e for e in left if e["stage"] == "prepare-task-corpus"] and not [e for e in left if e["stage"] == "matrix-seal"]
    assert len(list((root / "prefect-results").iterdir())) == len(left)

    assert _cache(home, root, "clear", "--stage", "report").returncode == 0
    assert not [e for e in _cached(home, root) if e["stage"] == "report"]
    assert _cache(home, root, "clear", "--all").returncode == 0
    assert _cached(home, root) == [] and not list((root / "prefect-results").iterdir())
