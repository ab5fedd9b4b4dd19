"""Scale-out on an external, stock Dask scheduler (no Dask setting): two workers started from another
folder, sharing with the flow only the S3-compatible bucket (moto's server on 127.0.0.1) and the
Prefect API, run the default matrix's arms and produce the same records and headline as a local run.
Where this machine allows a mount namespace, the workers cannot see `<tmp_path>/checkout` (an empty
read-only tmpfs over it), so a flow run on a clone there proves every stage sent to a worker is
location-independent."""

from __future__ import annotations

import functools
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from tasks_lib.artifacts import new_run_id
from test_flow_s3 import read_parquet, s3_client

TASKS = ["rotlog-keep-count"]
COMPARED = ("task_id", "condition", "trial", "outcome", "infra_failure", "audit_passed", "check_exit_code", "injection",
            "input_tokens", "output_tokens", "cost_usd", "source_commit", "manifest_digest")


NO_WORKERS_SECONDS = 5
"""The run config's `runner.no_workers_timeout` in the lost-workers test (short here)."""
REPO = Path(__file__).resolve().parents[1]
HIDE = ["unshare", "--mount", "--propagation", "private", "sh", "-c", 'mount -t tmpfs -o ro,size=64k memtrial-hidden "$0" && exec "$@"']
"""Prefix that runs a command in its own mount namespace with an empty read-only tmpfs over the folder given next.
Not in a user namespace of its own (`unshare --map-root-user`): the check sandbox (bwrap) cannot start in one."""


@functools.cache
def can_hide() -> bool:
    """Whether this process may mount a tmpfs in a mount namespace of its own (root, or CAP_SYS_ADMIN)."""
    with tempfile.TemporaryDirectory() as folder:
        try:
            return subprocess.run([*HIDE, folder, "true"], capture_output=True, timeout=20).returncode == 0
        except (OSError, subprocess.TimeoutExpired):
            return False


def start(argv: list[str], cwd: Path, env: dict[str, str], log: Path, hide: Path | None = None) -> subprocess.Popen[bytes]:
    """`python -m argv` in `cwd`; with `hide`, in a mount namespace where `hide` is an empty tmpfs (same PID)."""
    prefix = [*HIDE, str(hide)] if hide is not None else []
    with open(log, "wb") as out:
        return subprocess.Popen([*prefix, sys.executable, "-m", *argv], cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT)


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


def stock(env: dict[str, str]) -> dict[str, str]:
    """`env` without any Dask setting (`DASK_*`): what a scheduler someone else runs may well have."""
    return {k: v for k, v in env.items() if not k.startswith("DASK_")}


def start_scheduler(folder: Path, env: dict[str, str]) -> tuple[str, subprocess.Popen[bytes]]:
    """A stock Dask scheduler (no `DASK_*` setting, only the address options) on 127.0.0.1 (a free port),
    started in `folder`; returns its address."""
    scheduler_file = folder / "scheduler.json"
    proc = start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                  "--scheduler-file", str(scheduler_file)], folder, stock(env), folder / "scheduler.log")
    try:  # the scheduler writes the file in place: wait until it parses, not only until it exists
        wait_for(lambda: _address(scheduler_file) is not None, "the Dask scheduler")
    except AssertionError:
        stop([proc])
        raise
    return str(_address(scheduler_file)), proc


def _address(scheduler_file: Path) -> str | None:
    """The address a scheduler file holds, or None while it is missing or half-written."""
    try:
        return str(json.loads(scheduler_file.read_text())["address"])
    except (OSError, ValueError, KeyError):
        return None


def start_worker(address: str, folder: Path, env: dict[str, str], hide: Path | None = None) -> subprocess.Popen[bytes]:
    """One single-threaded Dask worker without a nanny (its PID is the PID that runs the arms)."""
    return start(["distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "1", "--no-dashboard",
                  "--host", "127.0.0.1"], folder, env, folder / "worker.log", hide)


def worker_env(home: Path) -> dict[str, str]:
    """A worker's environment: the flow's S3 endpoint and Prefect API, its own home, pack cache and stage trace."""
    from prefect.settings import PREFECT_API_URL

    base = {k: v for k, v in os.environ.items() if not k.startswith(("MEMTRIAL_HOME", "MEMTRIAL_PACK", "PREFECT_HOME", "MEMTRIAL_STAGE"))}
    home.mkdir(exist_ok=True)
    return {**base, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "MEMTRIAL_HOME": str(home), "MEMTRIAL_PACK_CACHE": str(home / "packs"),
            "PREFECT_HOME": str(home / "prefect"), "MEMTRIAL_STAGE_TRACE": str(home / "stages.tsv")}


def wait_for_workers(address: str, count: int) -> None:
    from distributed import Client

    with Client(address, timeout=60) as client:
        wait_for(lambda: len(client.scheduler_info()["workers"]) == count, f"{count} Dask worker(s)")


@pytest.fixture
def dask_cluster(prefect_harness: None, s3_env: str, tmp_path: Path) -> Iterator[tuple[str, list[subprocess.Popen[bytes]]]]:
    """A stock Dask scheduler (no Dask setting) and two single-threaded workers, each started from its own folder with its own
    memtrial home and pack cache; they share the S3 endpoint and the Prefect API, nothing else. Where
    the machine allows (`can_hide`), `<tmp_path>/checkout` is an empty read-only folder to the workers."""
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "checkout").mkdir()
    hide = tmp_path / "checkout" if can_hide() else None
    address, scheduler = start_scheduler(elsewhere, worker_env(elsewhere / "scheduler"))
    procs = [scheduler]
    try:
        procs += [start_worker(address, elsewhere / f"worker{n}", worker_env(elsewhere / f"worker{n}"), hide) for n in (1, 2)]
        wait_for_workers(address, 2)
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
    address, scheduler = start_scheduler(tmp_path, dict(os.environ))
    worker = start_worker(address, tmp_path / "shadow", {**os.environ, "PYTHONPATH": str(tmp_path / "shadow")})
    try:
        started = time.monotonic()
        with pytest.raises(RunnerError, match=r"Dask worker tcp://127.0.0.1:\d+ cannot run memtrial's arms .*install this memtrial") as raised:
            check_cluster(address, 60)
        assert "\n" not in str(raised.value) and time.monotonic() - started < 60
    finally:
        stop([worker, scheduler])


def test_the_smoke_matrix_runs_on_a_stock_scheduler_that_has_no_dask_setting(
        dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], s3_env: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: `memtrial run` refusing (exit 2) a `dask scheduler` started with its defaults
    until it is restarted with a no-workers timeout, a setting people who use a cluster rarely own. The
    bundled smoke matrix runs through the CLI on a stock scheduler and two workers sharing only the bucket."""
    import yaml

    from flows.cli.main import main

    address, workers = dask_cluster
    bucket = f"stock-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    smoke = yaml.safe_load((REPO / "configs" / "smoke.yaml").read_text())
    config = tmp_path / "smoke-dask.yaml"
    config.write_text(yaml.safe_dump({**smoke, "runner": {"kind": "dask", "address": address}}))
    capsys.readouterr()
    status = main(["run", "--config", str(config), "--artifacts", f"s3://{bucket}/smoke", "--json"])
    out, err = capsys.readouterr()
    assert status == 0, err
    (agent,) = json.loads(out)["agents"]
    records = read_parquet(s3_client(s3_env), bucket, f"smoke/runs/{agent['run_id']}/records.parquet").to_dict("records")
    assert sorted((r["task_id"], r["condition"]) for r in records) == sorted(
        (task, condition) for task in smoke["tasks"] for condition in smoke["conditions"])
    assert {r["worker"].rsplit(":", 1)[1] for r in records} <= {str(w.pid) for w in workers}


def test_a_local_cluster_fails_tasks_left_without_workers_after_runner_no_workers_timeout() -> None:
    """The failure prevented: a local cluster whose workers all die waiting forever, or for a bound the
    run config cannot change. (Its scheduler runs in the flow process and reads this setting.)"""
    import dask

    from flows.runners import NO_WORKERS_TIMEOUT, task_runner
    from tasks_lib.run.config import RunnerSpec

    before = dask.config.get(NO_WORKERS_TIMEOUT, None)
    try:
        task_runner(RunnerSpec(kind="dask", no_workers_timeout=7.5))
        assert dask.config.get(NO_WORKERS_TIMEOUT) == "7.5s"
    finally:
        dask.config.set({NO_WORKERS_TIMEOUT: before})


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


def bucket_holding(text: str, bucket: str, endpoint: str) -> list[str]:
    """Keys of `bucket` whose name or content holds `text`."""
    client = s3_client(endpoint)
    found = []
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket):
        for item in page.get("Contents", []):
            body = client.get_object(Bucket=bucket, Key=item["Key"])["Body"].read()
            if text in item["Key"] or text.encode() in body:
                found.append(item["Key"])
    return found


def test_workers_that_cannot_see_the_checkout_prepare_check_and_run_its_tasks_from_the_pack(
        dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], s3_env: str, tmp_path: Path) -> None:
    """The failure prevented: the prepare and corpus-invariants stages sent the flow's checkout paths to
    Dask workers, so a worker on another machine failed them (or read whatever sat at that path), and
    the checkout's absolute path went into cache keys and stored results. The flow runs on a clone the
    workers cannot see; both stages and the arms run in the workers; nothing stored names the clone.
    The invariant that reads the working tree (a task folder the commit lacks) is the flow's own."""
    from conftest import unavailable

    if not can_hide():
        unavailable("MEMTRIAL_REQUIRE_NAMESPACES", "no mount namespace here (needs root): cannot hide the checkout from the workers")
    from distributed import Client

    from flows.paired import paired_flow
    from flows.runners import ready_task_runner
    from tasks_lib.run.config import RunConfig, RunnerSpec

    address, workers = dask_cluster
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(clone)], check=True)
    with Client(address, timeout=30) as client:
        seen = client.run(os.path.exists, str(clone / ".git"))
    assert (clone / ".git").exists() and set(seen.values()) == {False}, f"the workers see the checkout: {seen}"
    bucket = f"hidden-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)

    uncommitted = clone / "corpora" / "tasks" / "uncommitted-copy"
    shutil.copytree(clone / "corpora" / "tasks" / TASKS[0], uncommitted)
    manifest = json.loads((uncommitted / "task.json").read_text())
    (uncommitted / "task.json").write_text(json.dumps({**manifest, "task_id": uncommitted.name}))

    config = RunConfig(tasks=[*TASKS, uncommitted.name], conditions=["off", "on"], trials=1, suites=[],
                       runner=RunnerSpec(kind="dask", address=address))
    result = paired_flow.with_options(task_runner=ready_task_runner(config.runner))(
        config, new_run_id("hidden"), str(clone), f"s3://{bucket}/hidden")

    assert list(result.excluded) == [uncommitted.name] and result.excluded[uncommitted.name].startswith("invariants: layout (not committed")
    assert sorted((r.task_id, r.condition) for r in result.records) == [(TASKS[0], "off"), (TASKS[0], "on")]
    assert [r.failure_reason for r in result.records if r.infra_failure or r.outcome == "ungradable"] == []
    ran = [line.split("\t")[0] for w in (1, 2) if (trace := tmp_path / "elsewhere" / f"worker{w}" / "stages.tsv").exists()
           for line in trace.read_text().splitlines()]
    assert {"prepare", "corpus-invariants", "run-arm"} <= set(ran), f"stages run in the workers: {sorted(set(ran))}"
    assert {r.worker.rsplit(":", 1)[1] for r in result.records} <= {str(w.pid) for w in workers}
    assert bucket_holding(str(clone), bucket, s3_env) == [], "the checkout's path is in a stored key or object"


def test_a_cluster_that_loses_every_worker_fails_the_run_in_bounded_time_with_one_line_and_a_rerun_resumes(
        dask_cluster: tuple[str, list[subprocess.Popen[bytes]]], s3_env: str, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: every worker SIGKILLed mid-run leaving `memtrial run` waiting forever (or
    ending in a distributed traceback), and the arms it had finished lost. Both workers die as soon as
    the first arm has finished (its cached result stored): the run exits 2 within the no-workers
    timeout (plus slack for a loaded machine) with one line naming the scheduler; with a worker back,
    `memtrial rerun` takes the finished arms from cache and leaves exactly one record per cell. The
    scheduler is a stock one (it would keep the tasks waiting forever): the bound is memtrial's own."""
    from prefect.settings import PREFECT_API_URL

    from flows.cli.main import main

    address, workers = dask_cluster
    bucket = f"lost-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    config = tmp_path / "lost.yaml"
    config.write_text(f"tasks: {json.dumps(TASKS)}\nconditions: ['off', 'on']\ntrials: 2\nsuites: []\n"
                      f"artifact_root: s3://{bucket}/lost\nrunner: {{kind: dask, address: '{address}', no_workers_timeout: {NO_WORKERS_SECONDS}}}\n")
    env = {**os.environ, "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    flow = subprocess.Popen([sys.executable, "-c", "from flows.cli.main import entry; entry()", "run", "--config", str(config), "--plain"],
                            env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    client = s3_client(s3_env)

    def stored(suffix: str, prefix: str = "lost/runs/") -> list[str]:
        return [o["Key"] for o in client.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", []) if o["Key"].endswith(suffix)]

    def finished_arms() -> int:
        """Arms whose cached result is stored: every stored result but preparation's and the invariants' (one task each)."""
        return len(stored("", "lost/prefect-results/")) - 2 if stored("/record.json") else 0

    try:
        wait_for(lambda: finished_arms() >= 1 or flow.poll() is not None, "the first finished arm", timeout=180)
        for worker in workers:
            worker.kill()
        killed = time.monotonic()
        finished = finished_arms()
        _, err = flow.communicate(timeout=120)
    finally:
        if flow.poll() is None:
            flow.kill()
    waited = time.monotonic() - killed
    kept = stored("/record.json")
    lines = err.decode().strip().splitlines()
    assert flow.returncode == 2, lines
    assert waited < NO_WORKERS_SECONDS + 25, f"the run took {waited:.1f}s to fail after its last worker died"
    assert "Traceback" not in err.decode() and [line for line in lines if "error" in line.lower()] == lines[-1:], lines
    assert re.fullmatch(rf"memtrial: error: run (run-\S+) failed: Dask scheduler {re.escape(address)} has had no worker for "
                        rf"{NO_WORKERS_SECONDS}s, so stage 'arms: calibration' could not finish; start workers .*", lines[-1]), lines[-1]
    run_id = lines[-1].split()[3]
    assert 1 <= finished <= len(kept) < len(TASKS) * 2 * 2, (finished, kept)

    back = start_worker(address, tmp_path / "elsewhere" / "worker3", worker_env(tmp_path / "elsewhere" / "worker3"))
    try:
        wait_for_workers(address, 1)
        capsys.readouterr()
        status = main(["rerun", run_id, "--json"])
    finally:
        stop([back])
    (agent,) = json.loads(capsys.readouterr().out)["agents"]
    assert status == 0 or (status == 1 and agent["distrust"]), (status, agent)  # 1: the tiny matrix's distrust warnings
    records = read_parquet(client, bucket, f"lost/runs/{run_id}-calibration/records.parquet").to_dict("records")
    cells = [(r["task_id"], r["condition"], r["trial"]) for r in records]
    assert len(cells) == len(TASKS) * 2 * 2 and len(set(cells)) == len(cells), cells
    assert agent["arms_cached"] >= finished, f"{finished} arm(s) finished before the loss, {agent['arms_cached']} from cache"


def listening_on(pid: int) -> set[tuple[str, int]]:
    """The (address, port) pairs process `pid` listens on over TCP, read from /proc (no `ss` needed)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except FileNotFoundError:  # closed while listed
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    found = set()
    for table, family in (("tcp", socket.AF_INET), ("tcp6", socket.AF_INET6)):
        path = Path(f"/proc/{pid}/net/{table}")
        for line in path.read_text().splitlines()[1:] if path.exists() else []:  # no tcp6 where IPv6 is off
            fields = line.split()
            (address, port), state, inode = fields[1].split(":"), fields[3], fields[9]
            if state != "0A" or inode not in inodes:  # 0A: LISTEN
                continue
            raw = b"".join(bytes.fromhex(address[i:i + 8])[::-1] for i in range(0, len(address), 8))
            found.add((socket.inet_ntop(family, raw), int(port, 16)))
    return found


def test_the_documented_dask_scheduler_and_worker_listen_only_on_127_0_0_1(tmp_path: Path) -> None:
    """The failure prevented: a Dask scheduler and worker started as docs/DEPLOY.md section 4 writes them
    listening on every interface (the scheduler's dashboard and the worker's ports default to 0.0.0.0),
    which exposes a service that runs any code a client sends. The doc's two command lines are run as
    written (only the ports are replaced by free ones) and every socket they listen on must be loopback."""
    text = (REPO / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    section = text.split("\n## 4. ", 1)[1].split("\n## 5. ", 1)[0]
    lines = {kind: [line for line in section.splitlines() if re.search(rf"(^|\s)dask {kind} ", line)] for kind in ("scheduler", "worker")}
    assert [len(found) for found in lines.values()] == [1, 1], lines
    port, dashboard = (free_port() for _ in range(2))
    env = {**stock(dict(os.environ)), "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}

    def run(kind: str) -> subprocess.Popen[bytes]:
        line = lines[kind][0].replace(":8786", f":{port}").replace("--port 8786", f"--port {port}").replace(":8787", f":{dashboard}")
        with open(tmp_path / f"{kind}.log", "wb") as log:
            return subprocess.Popen(["bash", "-c", line], cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)  # bash execs it

    scheduler = run("scheduler")
    procs = [scheduler]
    try:
        wait_for(lambda: scheduler.poll() is not None or any(p == port for _, p in listening_on(scheduler.pid)), "the documented scheduler")
        assert scheduler.poll() is None, (tmp_path / "scheduler.log").read_text()
        procs.append(run("worker"))
        wait_for_workers(f"tcp://127.0.0.1:{port}", 1)
        listeners = {kind: listening_on(proc.pid) for kind, proc in zip(("scheduler", "worker"), procs)}
    finally:
        stop(procs)
    assert all(listeners.values()), listeners
    assert {address for found in listeners.values() for address, _ in found} == {"127.0.0.1"}, listeners


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
