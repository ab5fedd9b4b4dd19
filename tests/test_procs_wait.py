"""`procs.wait_exit`, how the local sandbox waits for its command: it reports the exit and reaps the
child, reports a child still running as such when the time is up, and falls back to `Popen.wait`
where no pidfd can be opened (an older kernel)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tasks_lib.sandbox import procs


def test_an_exited_child_is_reported_and_reaped() -> None:
    proc = subprocess.Popen(["sh", "-c", "exit 3"])
    assert procs.wait_exit(proc, 30)
    assert proc.returncode == 3
    with pytest.raises(ChildProcessError):
        os.waitpid(proc.pid, os.WNOHANG)  # reaped: no zombie left behind


def test_a_running_child_is_not_reported_as_exited_when_the_time_is_up() -> None:
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert not procs.wait_exit(proc, 0.1)
        assert proc.returncode is None and procs.is_running(proc.pid)
    finally:
        proc.kill()
        proc.wait()


def test_without_pidfd_the_wait_falls_back_to_popen(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_pidfd(_pid: int) -> int:
        raise OSError(38, "Function not implemented")

    monkeypatch.setattr(procs.os, "pidfd_open", no_pidfd)
    running = subprocess.Popen(["sleep", "30"])
    try:
        assert not procs.wait_exit(running, 0.1)
    finally:
        running.kill()
        running.wait()
    done = subprocess.Popen(["true"])
    assert procs.wait_exit(done, 30) and done.returncode == 0
