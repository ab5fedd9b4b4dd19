"""Ctrl-C and SIGTERM for a command that runs a flow: stop within seconds, never cache what was cut short.

`interruptible()` wraps the flow call of `memtrial run`, `rerun` and `paired`. The first SIGINT or
SIGTERM trips the run (`tripped()`), kills every process the command started except its own local
Prefect server (the arms' sandboxes, checks and provisioners: every descendant in /proc), and raises
KeyboardInterrupt in the main thread so the flow unwinds; processes started after that are killed as
they appear, and a run that still has not ended after `HARD_STOP_SECONDS` exits 130 outright. Later
signals change nothing. A process that left its parent (a daemon a provisioner started) is no longer
a descendant and is not found; this process is not made a child subreaper, because orphans it would
adopt stay zombies that a liveness check by `kill(pid, 0)` takes for running.

A result computed while the run was interrupted is not a result: `flows.stages.ArtifactResultStorage`
refuses to persist anything once `tripped()` (`StageInterrupted`), so an interrupted stage never
stores a cache entry and a rerun computes it again. `tripped()` does not wait for the Python-level
handler (which runs only in the main thread, maybe late): the signal's C handler writes its number
to a wakeup pipe at once, and `tripped()` reads that pipe, so a check killed by the same Ctrl-C is
seen as interrupted by the thread that collects it before it can hand back a verdict.

What a run started that is not a process of it (a container a Docker engine runs) registers a stop
action (`tasks_lib.sandbox.stops`); the interrupt runs them all once, and the command does not exit
while they run. An arm on an external Dask cluster runs in a worker this process does not own: the
Dask task runner registers an action that halts the run on every worker (`halt`: its flow runs'
stages raise `StageInterrupted` and their results are refused there too, see
`flows.runtime.dask_runner.halt_on_worker`).
"""

from __future__ import annotations

import faulthandler
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from types import FrameType

from tasks_lib.errors import MemtrialError
from tasks_lib.sandbox import stops
from tasks_lib.sandbox.procs import all_pids, kill_all, process_info

SIGNALS = (signal.SIGINT, signal.SIGTERM)
"""The signals that interrupt a run."""
EXIT_STATUS = 130
"""What an interrupted command exits with (128 + SIGINT, as a shell reports Ctrl-C)."""
KILL_INTERVAL_SECONDS = 0.2
"""How often, once interrupted, processes the run started since are looked for and killed."""
HARD_STOP_SECONDS = 20.0
"""How long an interrupted run may take to unwind before the command exits outright."""


class StageInterrupted(MemtrialError):
    """A stage's result was computed while the run was interrupted: it is not stored, a rerun computes it."""


class _State:
    """The interrupt of this process: the signal that tripped it and the wakeup pipe the C handler writes."""

    def __init__(self) -> None:
        # Re-entrant: a second signal's Python handler can run inside the first one's `with lock`
        # (Ctrl-C reaches the process group and the watcher forwards one more), in the same thread.
        self.lock = threading.RLock()
        self.signal: int | None = None
        self.pipe: tuple[int, int] | None = None
        self.raised = False
        self.spared: set[int] = set()


_state = _State()


def _drain() -> None:
    """Read what the C handler wrote (call with the lock held); trip on SIGINT or SIGTERM."""
    if _state.pipe is None:
        return
    while select.select([_state.pipe[0]], [], [], 0)[0]:
        try:
            data = os.read(_state.pipe[0], 64)
        except BlockingIOError:
            return
        if not data:
            return
        for number in data:
            if number in SIGNALS and _state.signal is None:
                _state.signal = number


def tripped() -> int | None:
    """The signal that interrupted this process's run (SIGINT or SIGTERM), or None."""
    with _state.lock:
        if _state.signal is None:
            _drain()
        return _state.signal


_halted: dict[str, str] = {}
"""Flow run id -> why: the runs halted in this process by the process that interrupted them (a Dask worker)."""
_working: dict[int, tuple[str, object]] = {}
"""Thread id -> (flow run id, Dask task key or None) of the last stage the thread entered."""


def halt(flow_runs: list[str], why: str) -> None:
    """Mark `flow_runs` interrupted in this process (a worker of a cluster whose client was interrupted):
    `halted` names them from then on."""
    with _state.lock:
        _halted.update(dict.fromkeys(flow_runs, why))


def halted(flow_run: str | None) -> str | None:
    """Why `flow_run` was halted in this process (`halt`), or None."""
    if flow_run is None:
        return None
    with _state.lock:
        return _halted.get(flow_run)


def working_for(flow_run: str) -> None:
    """Note that the calling thread now runs a stage of `flow_run` (on a Dask worker, under the task key
    it executes), for `only_halted`."""
    worker = sys.modules.get("distributed.worker")
    key = getattr(getattr(worker, "thread_state", None), "key", None)
    with _state.lock:
        _working[threading.get_ident()] = (flow_run, key)


def only_halted(active: Mapping[int, object]) -> bool:
    """Whether every thread of `active` (thread id -> the Dask task key it executes) runs a stage of a halted
    flow run: then every process this one started is the halted runs'."""
    with _state.lock:
        for ident, key in active.items():
            flow_run, noted = _working.get(ident, (None, None))
            if flow_run not in _halted or noted != key:
                return False
        return True


def spare(pid: int) -> None:
    """Never kill `pid` or its descendants on an interrupt (the command's own Prefect server, stopped last)."""
    _state.spared.add(pid)


def descendants(root: int, spared: set[int]) -> dict[int, int]:
    """PID -> start time of every live descendant of `root`, except `spared` processes and theirs."""
    children: dict[int, list[tuple[int, int]]] = {}
    for pid in all_pids():
        info = process_info(pid)
        if info is not None and info[0] not in ("Z", "X"):
            children.setdefault(info[1], []).append((pid, info[4]))
    found: dict[int, int] = {}
    frontier = [root]
    while frontier:
        for child, started in children.get(frontier.pop(), []):
            if child not in spared and child not in found:
                found[child] = started
                frontier.append(child)
    return found


def kill_descendants() -> int:
    """SIGKILL every process this one started (sparing `spare`d ones); return how many were alive."""
    found = descendants(os.getpid(), _state.spared)
    kill_all(found)
    return len(found)


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    """The Python-level handler (main thread): trip, then unwind the flow once."""
    with _state.lock:
        _drain()
        if _state.signal is None:
            _state.signal = signum
        if _state.raised:
            return
        _state.raised = True
    raise KeyboardInterrupt


def _watch(main: int, pipe: tuple[int, int], done: threading.Event) -> None:
    """Wait for the wakeup pipe; once tripped, wake the main thread, kill what runs until exit. When the
    flow ends untripped (`done`), close the pipe and return."""
    while tripped() is None:
        if done.is_set():
            for fd in pipe:
                os.close(fd)
            return
        select.select([pipe[0]], [], [], 0.5)
    with _state.lock:
        forward = not _state.raised
    if forward:  # the main thread may sit in a wait no signal reaches; this one does
        signal.pthread_kill(main, signal.SIGINT)
    deadline = time.monotonic() + HARD_STOP_SECONDS
    kill_descendants()
    stops.run_all(latch=True)  # containers, workers of a Dask cluster: what killing descendants misses
    while time.monotonic() < deadline:
        kill_descendants()
        time.sleep(KILL_INTERVAL_SECONDS)
    kill_descendants()
    os.write(2, f"memtrial: interrupted; the run did not stop within {HARD_STOP_SECONDS:g} s and was stopped outright "
                "(its marker may still say running); where each thread was:\n".encode())
    faulthandler.dump_traceback(all_threads=True)  # a hang names its frame
    os._exit(EXIT_STATUS)


@contextmanager
def interruptible() -> Iterator[None]:
    """Install the interrupt handling for the duration; see the module docstring. Outside the main thread
    (where no signal handler can be set) nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    with _state.lock:
        _state.signal, _state.raised = None, False
    stops.reset()
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    _state.pipe = (read_end, write_end)
    previous_fd = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    previous = {number: signal.signal(number, _on_signal) for number in SIGNALS}
    done = threading.Event()
    threading.Thread(target=_watch, args=(threading.main_thread().ident, (read_end, write_end), done),
                     name="memtrial-interrupt", daemon=True).start()
    try:
        yield
    finally:
        interrupted = tripped() is not None
        if interrupted:
            kill_descendants()
            stops.run_all(latch=True)  # or wait for the watcher's run of them: never exit mid-removal
        signal.set_wakeup_fd(previous_fd)
        for number, handler in previous.items():  # once interrupted, a late or repeated signal is ignored
            signal.signal(number, signal.SIG_IGN if interrupted else handler)
        if not interrupted:  # the watcher closes the pipe and ends
            with _state.lock:
                _state.pipe = None
            done.set()
