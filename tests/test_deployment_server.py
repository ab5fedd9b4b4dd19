"""The real thing, as docs/DEPLOY.md section 1 writes it: a Prefect server on 127.0.0.1, a process work
pool and worker, the nightly deployment from deployments/prefect.yaml, one triggered run, and its
artifacts.

The doc's command lines are run as written (only the port is replaced by a free one), each terminal a
bash process in a fresh clone with HOME a temporary folder; the server and the worker are stopped by
their PIDs in a finalizer, also when the test fails.
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

from flows.runtime.settings import PROJECT_ROOT

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
    """A fresh clone of this checkout's HEAD (no `.memtrial/`, nothing pushed anywhere): the checkout the
    deployment is built from, and the repository its worker fetches the commit from."""
    source = tmp_path / "source"
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(PROJECT_ROOT), str(source)], check=True)
    return source


DOC_PORT = "4200"
"""The server port docs/DEPLOY.md section 1 uses; the test replaces it with a free port (tests run in parallel)."""


def section_one_blocks() -> tuple[list[list[str]], list[str]]:
    """docs/DEPLOY.md section 1 as written: its three terminals (each the lines after `# N.`) and the
    trigger block, comments dropped."""
    text = (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text(encoding="utf-8")
    section = text.split("\n## 1. ", 1)[1].split("\n## 2. ", 1)[0]
    blocks = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    assert len(blocks) == 2, f"docs/DEPLOY.md section 1 should hold the terminals and the trigger block, found {len(blocks)}"
    terminals: list[list[str]] = []
    for line in blocks[0].splitlines():
        if re.match(r"# \d+\. ", line):
            terminals.append([])
        elif line.strip() and not line.lstrip().startswith("#"):
            terminals[-1].append(line)
    trigger = [line for line in blocks[1].splitlines() if line.strip() and not line.lstrip().startswith("#")]
    assert len(terminals) == 3 and all(terminals), terminals
    return terminals, trigger


def as_run(lines: list[str], port: int) -> str:
    """A bash script of the doc's `lines`, stopping at the first failing command, on `port`."""
    return "set -e\n" + "\n".join(line.replace(f":{DOC_PORT}", f":{port}").replace(f"--port {DOC_PORT}", f"--port {port}")
                                   for line in lines) + "\n"


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
    """docs/DEPLOY.md section 1 run as written in a fresh clone, each terminal a bash process (the port
    replaced by a free one, HOME a temporary folder): server, pool, `prefect deploy` of nightly-process,
    a worker, then the documented trigger of one smoke run, waited for."""
    tmp_path = tmp_path_factory.mktemp("deployment")
    source = source_repository(tmp_path)
    if not (source / "flows" / "nightly.py").exists():
        pytest.fail("flows/nightly.py is not committed at HEAD; the deployment's entrypoint is missing")
    git(source, "-c", "user.name=memtrial-test", "-c", "user.email=test@memtrial.invalid", "commit", "-q", "--allow-empty",
        "-m", "a commit that exists only in this clone (never pushed)")
    sha = git(source, "rev-parse", "HEAD")
    port = free_port()
    base = f"http://127.0.0.1:{port}/api"
    home = tmp_path / "home"
    home.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MEMTRIAL_", "AWS_"))},
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
        "PREFECT_SERVER_LOGGING_LEVEL": "WARNING",
    }
    (server_lines, deploy_lines, worker_lines), trigger = section_one_blocks()
    server = processes.start("server", ["bash", "-c", as_run(server_lines, port)], env, source)
    wait_for_server(base, server, processes)

    def terminal(name: str, lines: list[str]) -> str:
        done = subprocess.run(["bash", "-c", as_run(lines, port)], env=env, cwd=source, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"docs/DEPLOY.md section 1, {name}, failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
        return done.stdout

    terminal("terminal 2", deploy_lines)
    deployment = api(base, "GET", "/deployments/name/nightly/nightly-process")
    assert isinstance(deployment, dict), deployment

    worker = processes.start("worker", ["bash", "-c", as_run(worker_lines, port)], env, source)
    exports = [line for line in deploy_lines if line.startswith("export PREFECT_API_URL=")]
    triggered = terminal("the trigger (in terminal 2)", [*exports, *trigger])
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
    artifacts = home / "memtrial-artifacts"
    summaries = sorted(artifacts.glob("runs/*/nightly.json"))
    run_id = summaries[0].parent.name if len(summaries) == 1 else ""
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


def test_deploy_section_one_runs_as_written_on_a_fresh_clone_with_an_unpushed_commit(deployed_run: DeployedRun) -> None:
    """The failure prevented: docs/DEPLOY.md section 1 failing when followed literally on a fresh clone:
    the server could not open its database under a missing `.memtrial/`, and the worker's
    `git fetch origin <sha>` failed for a commit that was committed but not pushed."""
    assert deployed_run.deployment["version"] == deployed_run.sha
    assert deployed_run.state == "COMPLETED", f"flow run ended {deployed_run.state}:\n{deployed_run.worker_log[-4000:]}"
    assert deployed_run.run_id, f"no run under {deployed_run.artifacts} (the documented MEMTRIAL_ARTIFACT_ROOT)"
