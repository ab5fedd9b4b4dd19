"""The real thing: a Prefect server on 127.0.0.1, a process work pool and worker, the nightly
deployment from deployments/prefect.yaml, one triggered run, and its artifacts.

Everything runs as separate processes (`prefect server start`, `prefect worker start`, `prefect
deploy`), each with its own PREFECT_HOME in tmp_path and a SQLite database; the server and the
worker are stopped by their PIDs in a finalizer, also when the test fails.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from flows.settings import PROJECT_ROOT

PREFECT = str(Path(sys.executable).parent / "prefect")
SERVER_START_SECONDS = 240
RUN_SECONDS = 900
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


class Processes:
    """Processes this test started, each in its own session, stopped by PID (process group = PID)."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.started: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, argv: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen[bytes]:
        log = open(self.logs / f"{name}.log", "wb")
        process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        log.close()
        self.started.append((name, process))
        return process

    def stop_all(self) -> None:
        for _, process in reversed(self.started):
            if process.poll() is None:
                os.killpg(process.pid, signal.SIGTERM)  # the group this test created with start_new_session
        for _, process in reversed(self.started):
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)

    def log(self, name: str) -> str:
        path = self.logs / f"{name}.log"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""


@pytest.fixture(scope="module")
def processes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Processes]:
    logs = tmp_path_factory.mktemp("logs")
    started = Processes(logs)
    try:
        yield started
    finally:
        started.stop_all()


def api(base: str, method: str, path: str, body: object | None = None) -> object:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(f"{base}{path}", data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read() or b"null")


def wait_for_server(base: str, server: subprocess.Popen[bytes], processes: Processes) -> None:
    deadline = time.monotonic() + SERVER_START_SECONDS
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"prefect server exited with {server.returncode}:\n{processes.log('server')}")
        try:
            if api(base, "GET", "/health") is True:
                return
        except (urllib.error.URLError, ConnectionError, TimeoutError):
            pass
        time.sleep(1)
    pytest.fail(f"prefect server did not answer within {SERVER_START_SECONDS} s:\n{processes.log('server')}")


def source_repository(tmp_path: Path) -> Path:
    """A clone of this checkout's HEAD: the source the deployment is built and pulled from."""
    source = tmp_path / "source"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(source)], check=True)
    return source


@dataclass(frozen=True)
class DeployedRun:
    """What the module's one deployment and triggered run left behind."""

    sha: str
    deployment: dict[str, Any]
    state: str | None
    artifacts: Path
    run_id: str
    worker_log: str


@pytest.fixture(scope="module")
def deployed_run(tmp_path_factory: pytest.TempPathFactory, processes: Processes) -> DeployedRun:
    """Server, pool, `prefect deploy` of nightly-process, a worker, one triggered smoke run, waited for."""
    tmp_path = tmp_path_factory.mktemp("deployment")
    source = source_repository(tmp_path)
    if not (source / "flows" / "nightly.py").exists():
        pytest.fail("flows/nightly.py is not committed at HEAD; the deployment's entrypoint is missing")
    sha = git(source, "rev-parse", "HEAD")
    port = free_port()
    base = f"http://127.0.0.1:{port}/api"
    artifacts = tmp_path / "artifacts"
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MEMTRIAL_"))},
        "PREFECT_HOME": str(tmp_path / "prefect-home"),
        "PREFECT_API_URL": base,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "PREFECT_UI_ENABLED": "false",
        "PREFECT_API_DATABASE_CONNECTION_URL": f"sqlite+aiosqlite:///{tmp_path / 'prefect.db'}",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
        "MEMTRIAL_HOME": str(tmp_path / "memtrial-home"),
        "MEMTRIAL_ARTIFACT_ROOT": str(artifacts),
        "MEMTRIAL_GIT_REPOSITORY": str(source),
    }
    server = processes.start("server", [PREFECT, "server", "start", "--host", "127.0.0.1", "--port", str(port)], env, tmp_path)
    wait_for_server(base, server, processes)

    def cli(*args: str) -> str:
        done = subprocess.run([PREFECT, "--no-prompt", *args], env=env, cwd=source, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"prefect {' '.join(args)} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    cli("work-pool", "create", "memtrial-process", "--type", "process")
    cli("deploy", "--prefect-file", "deployments/prefect.yaml", "--name", "nightly-process")

    deployment = api(base, "GET", "/deployments/name/nightly/nightly-process")
    assert isinstance(deployment, dict), deployment

    worker = processes.start("worker", [PREFECT, "worker", "start", "--pool", "memtrial-process", "--limit", "1"], env, tmp_path)
    run_id = "nightly-deployment-test"
    triggered = cli("deployment", "run", "nightly/nightly-process",
                    "--param", "config_path=configs/smoke.yaml", "--param", f"run_id={run_id}")
    flow_run_id = UUID.search(triggered)
    assert flow_run_id, triggered

    deadline = time.monotonic() + RUN_SECONDS
    state = None
    while time.monotonic() < deadline:
        if worker.poll() is not None:
            pytest.fail(f"the worker exited with {worker.returncode}:\n{processes.log('worker')}")
        flow_run = api(base, "GET", f"/flow_runs/{flow_run_id.group(0)}")
        assert isinstance(flow_run, dict)
        state = flow_run["state"]["type"]
        if state in ("COMPLETED", "FAILED", "CRASHED", "CANCELLED"):
            break
        time.sleep(3)
    return DeployedRun(sha=sha, deployment=deployment, state=state, artifacts=artifacts, run_id=run_id,
                       worker_log=(processes.logs / "worker.log").read_text(errors="replace"))


def test_deployment_version_is_the_commit_and_schedule_is_nightly(deployed_run: DeployedRun) -> None:
    deployment = deployed_run.deployment
    assert deployment["version"] == deployed_run.sha, "deployment version must be the deployed commit"
    assert deployment["work_pool_name"] == "memtrial-process"
    assert deployment["entrypoint"] == "flows/nightly.py:nightly"
    schedules = [s["schedule"] for s in deployment["schedules"]]
    assert [(s["cron"], s["timezone"]) for s in schedules] == [("30 2 * * *", "UTC")]
    clone = deployment["pull_steps"][0]["prefect.deployments.steps.git_clone"]
    assert clone["commit_sha"] == deployed_run.sha, "the worker clones exactly the deployed commit"


def test_triggered_run_completes_on_the_worker_and_writes_artifacts(deployed_run: DeployedRun) -> None:
    assert deployed_run.state == "COMPLETED", f"flow run ended {deployed_run.state}:\n{deployed_run.worker_log[-4000:]}"
    runs = deployed_run.artifacts / "runs"
    summary = json.loads((runs / deployed_run.run_id / "nightly.json").read_text())
    assert summary["run_id"] == deployed_run.run_id
    assert (runs / deployed_run.run_id / "run-config.json").is_file()
    agent_runs = [a["run_id"] for a in summary["agents"]]
    assert agent_runs, summary
    for agent_run in agent_runs:
        records = pq.read_table(runs / agent_run / "records.parquet")
        assert records.num_rows > 0
        assert (runs / agent_run / "report.html").is_file()


def test_deployed_run_persists_stage_results(deployed_run: DeployedRun) -> None:
    """Regression: a worker-run flow persisted no stage results (the result storage did not take
    Prefect's `_sync=True`), leaving nothing for a rerun to take from cache."""
    assert "unexpected keyword argument '_sync'" not in deployed_run.worker_log
    assert any((deployed_run.artifacts / "prefect-results").rglob("*"))
