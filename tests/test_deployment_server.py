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
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

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


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    logs = tmp_path / "logs"
    logs.mkdir()
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


STAND_IN_FLOW = """
import json, os
from pathlib import Path
from prefect import flow

@flow(name="nightly")
def nightly(config_path: str = "configs/default.yaml", run_id: str | None = None, artifact_root: str | None = None) -> str:
    root = Path(artifact_root or os.environ["MEMTRIAL_ARTIFACT_ROOT"]) / "runs" / run_id
    root.mkdir(parents=True)
    (root / "run-config.json").write_text(json.dumps({"config_path": config_path, "cwd": os.getcwd()}))
    (root / "nightly.json").write_text(json.dumps({"run_id": run_id}))
    return run_id
"""


def stand_in_repository(tmp_path: Path) -> Path:
    """DEVELOPMENT ONLY: a git repo with a tiny `nightly` flow and this checkout's prefect.yaml."""
    source = tmp_path / "source"
    (source / "flows").mkdir(parents=True)
    (source / "deployments").mkdir()
    (source / "flows" / "nightly.py").write_text(STAND_IN_FLOW)
    shutil.copy(PROJECT_ROOT / "deployments" / "prefect.yaml", source / "deployments" / "prefect.yaml")
    git(source, "init", "-q", "-b", "main")
    git(source, "add", "-A")
    git(source, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "stand-in")
    return source


def test_nightly_deployment_runs_on_a_process_worker(tmp_path: Path, processes: Processes) -> None:
    source = stand_in_repository(tmp_path) if os.environ.get("MEMTRIAL_DEV_STAND_IN") else source_repository(tmp_path)
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
    assert isinstance(deployment, dict)
    assert deployment["version"] == sha, "deployment version must be the deployed commit"
    assert deployment["work_pool_name"] == "memtrial-process"
    schedules = [s["schedule"] for s in deployment["schedules"]]
    assert schedules and schedules[0]["cron"] == "30 2 * * *"

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
    assert state == "COMPLETED", f"flow run ended {state}:\n{processes.log('worker')}"

    summary = json.loads((artifacts / "runs" / run_id / "nightly.json").read_text())
    assert summary["run_id"] == run_id
    assert (artifacts / "runs" / run_id / "run-config.json").is_file()
    records = list((artifacts / "runs").glob(f"{run_id}*/records.parquet"))
    assert records, f"no records table under {artifacts / 'runs'}"
    assert shutil.which("git")  # the pull step cloned with it
