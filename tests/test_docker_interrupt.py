"""Ctrl-C while a `sandbox: docker` command runs: the container is the engine's child, not the run's, so
killing the run's descendants misses it; the interrupt must remove it before the command exits.

The command is a real process that runs a sandboxed command the way `memtrial run` does: inside
`flows.runtime.interrupt.interruptible()`, the `docker` provider on the private dockerd the tests start, called
from a worker thread (the flow's task runner runs arms in threads) while the main thread waits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from test_flow_interrupt import EXIT_SECONDS

COMMAND = """
import sys, threading
from pathlib import Path
from flows.runtime.interrupt import EXIT_STATUS, interruptible
from tasks_lib.sandbox.base import SandboxRequest
from tasks_lib.sandbox.docker import DockerSandbox

base_url, image, workspace = sys.argv[1:4]
box = DockerSandbox(base_url=base_url, image=image)
request = SandboxRequest(argv=("sh", "-c", "sleep 600"), workspace=Path(workspace))
try:
    with interruptible():
        check = threading.Thread(target=box.run, args=(request,), daemon=True)
        check.start()
        check.join()
except KeyboardInterrupt:
    sys.exit(EXIT_STATUS)
"""


def _containers(base_url: str) -> dict[str, str]:
    """Id -> status of every container the engine has, running or not."""
    import docker

    client = docker.DockerClient(base_url=base_url)
    try:
        return {c.id: c.status for c in client.containers.list(all=True)}
    finally:
        client.close()


def test_ctrl_c_during_a_docker_command_leaves_no_container_of_the_run_in_the_engine(
        private_docker: dict[str, str], tmp_path: Path) -> None:
    """The failure prevented: Ctrl-C of a run with `sandbox: docker` killed the run's processes and
    exited, while the container running the arm's command (a child of the engine) went on running,
    and stayed in the engine, after the command had returned to the prompt."""
    base_url = private_docker["base_url"]
    before = set(_containers(base_url))
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    command = subprocess.Popen([sys.executable, "-c", COMMAND, base_url, private_docker["image"], str(workspace)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not any(status == "running" for cid, status in _containers(base_url).items() if cid not in before):
            assert command.poll() is None and time.monotonic() < deadline, f"no container started: {command.stderr.read() if command.stderr else ''}"
            time.sleep(0.1)
        os.killpg(command.pid, signal.SIGINT)
        signalled = time.monotonic()
        _, stderr = command.communicate(timeout=60)
        took = time.monotonic() - signalled
    finally:
        if command.poll() is None:
            os.killpg(command.pid, signal.SIGKILL)
            command.wait()
    left = {cid: status for cid, status in _containers(base_url).items() if cid not in before}
    assert command.returncode == 130 and took < EXIT_SECONDS, f"exit {command.returncode} after {took:.1f} s: {stderr[-2000:]}"
    assert left == {}, f"containers of the interrupted command are still in the engine: {left}"


def test_a_second_stop_caller_waits_for_the_removal_in_progress() -> None:
    """The failure prevented: the main thread leaving `interruptible()` (and the process exiting) while the
    interrupt's watcher was still removing a container: a concurrent `run_all` returned at once."""
    import threading

    from tasks_lib.sandbox import stops

    removing, removed = threading.Event(), threading.Event()

    def slow_removal() -> None:
        removing.set()
        time.sleep(1.0)
        removed.set()

    handle = stops.register("a slow container", slow_removal)
    try:
        watcher = threading.Thread(target=stops.run_all, kwargs={"latch": False})
        watcher.start()
        assert removing.wait(10)
        assert stops.run_all(latch=False) == 0 and removed.is_set(), "the second caller returned before the removal ended"
        watcher.join()
    finally:
        stops.forget(handle)
        stops.reset()
    assert stops.pending() == []
