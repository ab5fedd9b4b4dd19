"""The local Prefect server of a `memtrial` command: the one it starts dies with it (even by SIGKILL),
and a running `memtrial server` is reused, so no command starts one of its own. Real `memtrial`
processes and real Prefect servers on 127.0.0.1; every process is found through the process tree of
one this test started, and the test's own process groups are cleaned up at the end."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from flows.runtime.localserver import SERVER_FILE, free_port, healthy, running_server

CLI = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]
PROBE = """
from flows.cli.run import _api_ready, _start_prefect
_start_prefect()  # what run, rerun and paired do first
_api_ready()  # and once their input is checked
from prefect import flow
from prefect.runtime import flow_run
print(flow(name="probe")(lambda: flow_run.name)())
"""
"""A process that sets up Prefect as `memtrial run` does, then runs one flow (no corpus preparation)."""
SERVER_MARKS = ("flows.runtime.localserver", "prefect.server.api.server:create_app", "uvicorn")


def env_for(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def one_task_config(tmp_path: Path) -> Path:
    config = tmp_path / "one.yaml"
    config.write_text(f"name: server-test\ntasks: [rotlog-keep-count]\nconditions: ['off']\nsuites: []\n"
                      f"artifact_root: {tmp_path / 'artifacts'}\n", encoding="utf-8")
    return config


def servers_under(pid: int) -> list[psutil.Process]:
    """The Prefect server processes in the process tree of `pid`."""
    found = []
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    for child in children:
        try:
            if any(mark in " ".join(child.cmdline()) for mark in SERVER_MARKS):
                found.append(child)
        except (psutil.NoSuchProcess, psutil.ZombieProcess):
            pass
    return found


def stopped(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.fixture
def groups() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes this test starts, each in its own session; their groups are killed at the end."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        process.wait()


def test_a_sigkilled_flow_process_leaves_no_prefect_server_running(tmp_path: Path, groups: list[subprocess.Popen[bytes]]) -> None:
    """The failure prevented: `kill -9` of a `memtrial run` orphaning the Prefect server it started
    (a uvicorn process holding a port and the database until someone finds it)."""
    flow = subprocess.Popen([*CLI, "run", "--config", str(one_task_config(tmp_path)), "--plain"], env=env_for(tmp_path),
                            cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    groups.append(flow)  # type: ignore[arg-type]
    assert flow.stderr is not None
    line = flow.stderr.readline()  # said once the server answers
    assert "started a local Prefect server at http://127.0.0.1:" in line, line
    url = line.split(" at ")[1].split()[0]
    (server,) = servers_under(flow.pid)
    assert healthy(url, timeout=2.0)

    flow.kill()  # SIGKILL of the flow process alone, not its group
    flow.wait()

    deadline = time.monotonic() + 10
    while not stopped(server):
        assert time.monotonic() < deadline, f"the server (PID {server.pid}) outlived its killed flow process by 10 s"
        time.sleep(0.05)
    assert not healthy(url, timeout=0.5)


def test_a_running_memtrial_server_is_reused_and_the_command_starts_no_server(tmp_path: Path, groups: list[subprocess.Popen[bytes]]) -> None:
    """The failure prevented: every command paying ~6 s for a server of its own while one is running
    in the same PREFECT_HOME (and its runs missing from that server's UI)."""
    env, port = env_for(tmp_path), free_port()
    standing = subprocess.Popen([*CLI, "server", "--port", str(port)], env=env, cwd=tmp_path, stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, start_new_session=True)
    groups.append(standing)
    url = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 120
    while running_server(tmp_path / "prefect") != url:
        assert standing.poll() is None and time.monotonic() < deadline, "memtrial server did not come up"
        time.sleep(0.1)
    assert standing.stdout is not None and standing.stdout.readline().decode().strip() == f"export PREFECT_API_URL={url}"
    second = subprocess.run([*CLI, "server", "--port", str(free_port())], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert second.returncode == 2 and f"a memtrial server already runs at {url}" in second.stderr, second.stderr

    run = subprocess.Popen([sys.executable, "-c", PROBE], env=env, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, start_new_session=True)
    groups.append(run)  # type: ignore[arg-type]
    seen: list[str] = []
    while run.poll() is None:
        seen += [" ".join(p.cmdline()) for p in servers_under(run.pid)]
        time.sleep(0.05)
    stdout, stderr = run.communicate()
    assert run.returncode == 0, stderr[-2000:]
    assert not seen, f"the command started a server although one was running: {seen[:1]}"
    assert f"using the running memtrial server at {url}" in stderr
    request = urllib.request.Request(f"{url}/flow_runs/filter", data=b"{}", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        names = {r["name"] for r in json.load(response)}
    assert stdout.strip() in names, "the command's flow run is not in the running server"

    standing.send_signal(signal.SIGINT)
    standing.wait(30)
    assert not (tmp_path / "prefect" / SERVER_FILE).exists(), "a stopped memtrial server left its record behind"


@pytest.mark.parametrize("record", ["{not json", '{"url": "http://127.0.0.1:9/api", "pid": 999999999}', '{"pid": 1}'],
                         ids=["garbage", "dead-pid", "no-url"])
def test_a_stale_or_broken_server_record_is_not_reused(tmp_path: Path, record: str) -> None:
    """The failure prevented: a record left by a killed `memtrial server` sending every command to a
    dead API instead of starting its own."""
    (tmp_path / SERVER_FILE).write_text(record, encoding="utf-8")
    assert running_server(tmp_path) is None


def test_pruning_deletes_the_flow_runs_that_ended_before_the_cutoff_and_keeps_the_rest(prefect_harness: None,
                                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: Prefect's database growing without bound (~24 KB per task run), or a
    prune that deletes runs it was not asked to (a newer run, one still in progress)."""
    import asyncio
    import uuid
    from datetime import UTC, datetime

    from prefect import flow, task
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterId,
    )

    from flows.cli.main import main
    from flows.runtime.history import prune_flow_runs

    name = f"prune-probe-{uuid.uuid4().hex[:8]}"
    probe = flow(name=name)(lambda: task(name="step")(lambda: 1)())
    probe()
    cutoff = datetime.now(UTC)
    time.sleep(0.05)
    probe()

    async def runs() -> list[tuple[str, int]]:
        async with get_client() as client:
            found = await client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=[name])))
            return [(str(r.id), len(await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[r.id])))))
                    for r in found]

    before = asyncio.run(runs())
    assert len(before) == 2 and all(tasks == 1 for _, tasks in before)

    assert prune_flow_runs(cutoff, flows=[name]) == 1
    (kept,) = asyncio.run(runs())
    (gone,) = [run_id for run_id, _ in before if run_id != kept[0]]

    async def task_runs_of(run_id: str) -> int:
        async with get_client() as client:
            return len(await client.read_task_runs(flow_run_filter=FlowRunFilter(id=FlowRunFilterId(any_=[uuid.UUID(run_id)]))))

    assert kept in before and asyncio.run(task_runs_of(gone)) == 0, "the pruned run's task runs stayed"
    assert prune_flow_runs(cutoff, flows=[name]) == 0
    assert main(["prune-history", "--older-than-days", "36500"]) == 0
    assert "deleted 0 flow run(s)" in capsys.readouterr().out
