"""Scale-out on an external Dask scheduler: two workers started from another folder, sharing with the
flow only the S3-compatible bucket (moto's server on 127.0.0.1) and the Prefect API, run the default
matrix's arms and produce the same records and headline as a local run."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from test_flow_s3 import read_parquet, s3_client

from tasks_lib.artifacts import new_run_id

TASKS = ["rotlog-keep-count"]
COMPARED = ("task_id", "condition", "trial", "outcome", "infra_failure", "audit_passed", "check_exit_code", "injection",
            "input_tokens", "output_tokens", "cost_usd", "source_commit", "manifest_digest")


BOUNDED = {"DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT": "30s"}
"""What docs/DEPLOY.md tells you to start a scheduler with: tasks without any worker fail after 30 s."""


def start(argv: list[str], cwd: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen([sys.executable, "-m", *argv], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


def wait_for(predicate, what: str, timeout: float = 90.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.2)


def stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def start_scheduler(folder: Path, env: dict[str, str]) -> tuple[str, subprocess.Popen[bytes]]:
    """A Dask scheduler on 127.0.0.1 (a free port), started in `folder`; returns its address."""
    scheduler_file = folder / "scheduler.json"
    proc = start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                  "--scheduler-file", str(scheduler_file)], folder, env, folder / "scheduler.log")
    try:
        wait_for(scheduler_file.exists, "the Dask scheduler")
    except AssertionError:
        stop([proc])
        raise
    return json.loads(scheduler_file.read_text())["address"], proc


def start_worker(address: str, folder: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """One single-threaded Dask worker without a nanny (its PID is the PID that runs the arms)."""
    return start(["distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "1", "--no-dashboard",
                  "--host", "127.0.0.1"], folder, env, folder / "worker.log")


@pytest.fixture
def dask_cluster(prefect_harness: None, s3_env: str, tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A Dask scheduler and two single-threaded workers, each started from its own folder with its own
    memtrial home and pack cache; they share the S3 endpoint and the Prefect API, nothing else."""
    from prefect.settings import PREFECT_API_URL

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMTRIAL_HOME", "MEMTRIAL_PACK", "PREFECT_HOME"))}
    base["PREFECT_API_URL"] = str(PREFECT_API_URL.value())
    address, scheduler = start_scheduler(elsewhere, {**base, **BOUNDED})
    procs = [scheduler]
    try:
        for n in (1, 2):
            home = elsewhere / f"worker{n}"
            home.mkdir()
            env = {**base, "MEMTRIAL_HOME": str(home), "MEMTRIAL_PACK_CACHE": str(home / "packs"), "PREFECT_HOME": str(home / "prefect")}
            procs.append(start_worker(address, home, env))
        from distributed import Client

        with Client(address, timeout=60) as client:
            wait_for(lambda: len(client.scheduler_info()["workers"]) == 2, "two Dask workers")
        yield address, procs[1:]
    finally:
        stop(procs)


def nightly_on(bucket: str, prefix: str, tmp_path: Path, runner: str) -> tuple[object, list[dict]]:
    from flows.nightly import nightly

    config = tmp_path / f"{prefix}.yaml"
    config.write_text(f"tasks: {json.dumps(TASKS)}\nconditions: ['off', 'on']\ntrials: 2\nsuites: []\n"
                      f"artifact_root: s3://{bucket}/{prefix}\nrunner: {runner}\n", encoding="utf-8")
    run_id = new_run_id(prefix)
    result = nightly(config_path=str(config), run_id=run_id)
    records = read_parquet(s3_client(os.environ["MEMTRIAL_S3_ENDPOINT_URL"]), bucket, f"{prefix}/runs/{run_id}-calibration/records.parquet")
    return result, records.to_dict("records")


def comparable(records: list[dict]) -> list[tuple]:
    """What must match between two runs of the same matrix (ids that embed the run id differ)."""
    return sorted((*(str(r[f]) for f in COMPARED), len(r["planted_ids"]), len(r["delivered_ids"])) for r in records)


def test_external_dask_scheduler_with_two_workers_elsewhere_gives_the_local_records_and_headline(
        dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], s3_env: str, tmp_path: Path) -> None:
    """The failure prevented: workers that do not share the flow's folder either failing (paths of the
    flow's machine) or grading arms without their evidence, and arms that all run in one process."""
    address, workers = dask_cluster
    bucket = f"dask-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)

    local, local_records = nightly_on(bucket, "local", tmp_path, "{kind: thread, workers: 2}")
    remote, remote_records = nightly_on(bucket, "dask", tmp_path, f"{{kind: dask, address: '{address}'}}")

    assert len(remote_records) == len(TASKS) * 2 * 2
    assert comparable(remote_records) == comparable(local_records)
    (local_agent,), (remote_agent,) = local.agents, remote.agents  # type: ignore[attr-defined]
    assert (remote_agent.passes, remote_agent.attempts, remote_agent.cells) == (local_agent.passes, local_agent.attempts, local_agent.cells)
    ran_in = {r["worker"].rsplit(":", 1)[1] for r in remote_records}
    assert ran_in == {str(w.pid) for w in workers}, f"arms ran in {ran_in}, not in both workers"
    assert str(os.getpid()) not in ran_in


def test_an_unreachable_scheduler_fails_with_one_line() -> None:
    """The failure prevented: a typo in runner.address surfacing as a distributed traceback or a hang."""
    from flows.runners import RunnerError, check_cluster

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(RunnerError, match=f"tcp://127.0.0.1:{port}: no Dask scheduler answers"):
        check_cluster(f"tcp://127.0.0.1:{port}", 3)
    assert time.monotonic() - started < 30


def test_a_cluster_without_workers_fails_in_bounded_time(tmp_path: Path) -> None:
    """The failure prevented: a flow submitting arms to a scheduler no worker ever joins, waiting forever."""
    from flows.runners import RunnerError, check_cluster

    address, scheduler = start_scheduler(tmp_path, dict(os.environ))
    try:
        started = time.monotonic()
        with pytest.raises(RunnerError, match="no Dask worker joined within 3s"):
            check_cluster(address, 3)
        assert time.monotonic() - started < 30
    finally:
        stop([scheduler])


def test_a_worker_that_cannot_import_memtrial_fails_fast_with_one_line(tmp_path: Path) -> None:
    """The failure prevented: workers without the project making the flow hang until a timeout (every
    arm task fails to unpickle on the worker and never reports a state)."""
    from flows.runners import RunnerError, check_cluster

    shadow = tmp_path / "shadow" / "flows"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('memtrial is not installed on this worker')\n")
    address, scheduler = start_scheduler(tmp_path, {**os.environ, **BOUNDED})
    worker = start_worker(address, tmp_path / "shadow", {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")})
    try:
        started = time.monotonic()
        with pytest.raises(RunnerError, match=r"Dask worker tcp://127.0.0.1:\d+ cannot run memtrial's arms .*install this memtrial") as raised:
            check_cluster(address, 60)
        assert "\n" not in str(raised.value) and time.monotonic() - started < 60
    finally:
        stop([worker, scheduler])


def test_a_scheduler_that_would_wait_forever_without_workers_is_refused(tmp_path: Path) -> None:
    """The failure prevented: a cluster that loses every worker mid-run leaving the run pending forever
    (Dask's default keeps tasks without a worker waiting)."""
    from flows.runners import RunnerError, check_cluster

    address, scheduler = start_scheduler(tmp_path, {k: v for k, v in os.environ.items() if "NO_WORKERS_TIMEOUT" not in k})
    worker = start_worker(address, tmp_path, dict(os.environ))
    try:
        with pytest.raises(RunnerError, match="no-workers-timeout.*DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT=120s"):
            check_cluster(address, 60)
    finally:
        stop([worker, scheduler])


def test_a_worker_killed_mid_run_leaves_exactly_one_record_per_cell(
        dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], s3_env: str, tmp_path: Path) -> None:
    """The failure prevented: a lost worker's arms lost (a hole in the matrix) or run twice (two records
    for one cell). One worker is SIGKILLed as soon as the first arm's record is stored."""
    import threading

    address, (doomed, survivor) = dask_cluster
    bucket = f"kill-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    client = s3_client(s3_env)
    stop_watching = threading.Event()

    def kill_on_first_record() -> None:
        while not stop_watching.is_set():
            listed = client.list_objects_v2(Bucket=bucket, Prefix="dask/runs/").get("Contents", [])
            if any(o["Key"].endswith("/record.json") for o in listed):
                doomed.kill()
                return
            time.sleep(0.1)

    watcher = threading.Thread(target=kill_on_first_record, daemon=True)
    watcher.start()
    try:
        _, records = nightly_on(bucket, "dask", tmp_path, f"{{kind: dask, address: '{address}'}}")
    finally:
        stop_watching.set()
        watcher.join(timeout=10)
    assert doomed.poll() is not None, "the worker was never killed"
    cells = [(r["task_id"], r["condition"], r["trial"]) for r in records]
    assert len(cells) == len(TASKS) * 2 * 2 and len(set(cells)) == len(cells), cells
    assert str(survivor.pid) in {r["worker"].rsplit(":", 1)[1] for r in records}
