"""Process trees from /proc: follow a command's descendants and kill all of them.

A process that calls setsid() leaves its parent's process group, so killing the group is not
enough. `TreeWatcher` polls /proc while the command runs and remembers every descendant (by PID
and start time, so a reused PID is never killed by mistake); `kill_tree` kills the group, the
session and every remembered descendant still alive.
"""

from __future__ import annotations

import math
import os
import select
import signal
import subprocess
import threading
from collections.abc import Iterable
from pathlib import Path

PROC = Path("/proc")


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name, or None when the process is gone."""
    try:
        raw = (PROC / str(pid) / "stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_info(pid: int) -> tuple[str, int, int, int, int] | None:
    """(state, ppid, pgid, sid, start time) of `pid`, or None when it is gone."""
    fields = _stat_fields(pid)
    if fields is None:
        return None
    return fields[0], int(fields[1]), int(fields[2]), int(fields[3]), int(fields[19])


def is_running(pid: int, start_time: int | None = None) -> bool:
    """True when `pid` exists, is not a zombie and (if given) started at `start_time`."""
    info = process_info(pid)
    if info is None or info[0] in ("Z", "X"):
        return False
    return start_time is None or info[4] == start_time


def all_pids() -> list[int]:
    """Every PID visible in /proc."""
    return [int(name) for name in os.listdir(PROC) if name.isdigit()]


def cmdline(pid: int) -> str:
    """The command line of `pid` with spaces between arguments ('' when gone)."""
    try:
        return (PROC / str(pid) / "cmdline").read_bytes().replace(b"\x00", b" ").decode(errors="replace").strip()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return ""


def pids_matching(text: str) -> dict[int, int]:
    """PID -> start time of every running process whose command line contains `text`."""
    found = {}
    for pid in all_pids():
        if text in cmdline(pid):
            info = process_info(pid)
            if info is not None and info[0] not in ("Z", "X"):
                found[pid] = info[4]
    return found


class TreeWatcher:
    """Remembers every descendant of `root_pid` seen while it runs (polled every `interval`)."""

    def __init__(self, root_pid: int, interval: float = 0.02) -> None:
        self.root_pid = root_pid
        self.interval = interval
        self.seen: dict[int, int] = {}
        info = process_info(root_pid)
        if info is not None:
            self.seen[root_pid] = info[4]
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="sandbox-tree-watcher")

    def start(self) -> TreeWatcher:
        self._thread.start()
        return self

    def scan(self) -> None:
        """Add the current descendants of every remembered process."""
        parents: dict[int, list[tuple[int, int]]] = {}
        for pid in all_pids():
            info = process_info(pid)
            if info is not None:
                parents.setdefault(info[1], []).append((pid, info[4]))
        frontier = [pid for pid, start in list(self.seen.items()) if is_running(pid, start)]
        while frontier:
            for child, start in parents.get(frontier.pop(), []):
                if self.seen.get(child) != start:
                    self.seen[child] = start
                    frontier.append(child)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.scan()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def kill_all(pids: Iterable[int]) -> None:
    """SIGKILL each of `pids`; one already gone, or not ours to kill, is skipped."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def kill_tree(leader: int, watcher: TreeWatcher | None = None) -> None:
    """SIGKILL the process group and session led by `leader` and every descendant `watcher` saw."""
    if watcher is not None:
        watcher.scan()
    try:
        os.killpg(leader, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    targets: dict[int, int | None] = {}
    for pid in all_pids():
        info = process_info(pid)
        if info is not None and leader in (info[2], info[3]) and pid != os.getpid():
            targets[pid] = info[4]
    if watcher is not None:
        targets.update(watcher.seen)
    kill_all(pid for pid, start in targets.items() if pid != os.getpid() and is_running(pid, start))


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait up to `timeout` seconds for `proc` to exit and reap it; True when it has exited.

    Wakes the moment the child exits, through a pidfd (Linux 5.3 and later), where `Popen.wait(timeout=)`
    polls with sleeps of up to 50 ms (a 70 ms child came back after 114 ms). Where no pidfd can be
    opened (an older kernel, or the child already reaped), falls back to `Popen.wait`."""
    if proc.returncode is not None:
        return True
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(pidfd, select.POLLIN)
        if not poller.poll(max(0, math.ceil(timeout * 1000))):
            return False
    finally:
        os.close(pidfd)
    proc.wait()
    return True
