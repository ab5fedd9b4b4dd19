"""Ctrl-C of `memtrial run` whose arms run on an external, stock Dask cluster: a `dask scheduler` and one
`dask worker` started as real processes on 127.0.0.1, sharing the artifact folder and the Prefect API.

The worker's stage trace (`MEMTRIAL_STAGE_TRACE`) is a FIFO the test reads: once the arm's agent step
has started, the test stops reading, so the worker's next stage (the audit) blocks in `open()` until
the test reads again. That holds the arm after its agent step, in the worker, while the flow process
gets SIGINT; the test reads again once the command has exited, and sees whether the arm went on to its
record."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from test_flow_dask import (
    start_scheduler,
    start_worker,
    stop,
    wait_for,
    wait_for_workers,
    worker_env,
)
from test_flow_interrupt import CLI, EXIT_SECONDS, _rows

pytestmark = pytest.mark.slow  # three runs of one task on a Dask cluster: minutes on 2 busy cores


class FifoTrace:
    """A stage trace FIFO read by a thread; `hold_after(stage)` stops reading once `stage` was traced."""

    def __init__(self, path: Path) -> None:
        os.mkfifo(path)
        self.path = path
        self.lines: list[tuple[float, str]] = []
        self.held = threading.Event()
        self._hold_after: str | None = None
        self._reading = threading.Event()
        self._reading.set()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def hold_after(self, stage: str) -> None:
        self._hold_after = stage

    def release(self) -> None:
        self._hold_after = None
        self._reading.set()

    def stop(self) -> None:
        self._stopped.set()
        self._reading.set()
        self._thread.join(timeout=10)

    def stages_since(self, moment: float) -> list[str]:
        return [line.split("\t")[0] for at, line in list(self.lines) if at >= moment]

    def _read(self) -> None:
        pending = b""
        while not self._stopped.is_set():
            self._reading.wait()
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK)
            try:
                while not self._stopped.is_set():
                    try:
                        chunk = os.read(fd, 65536)
                    except BlockingIOError:
                        chunk = b""
                    if not chunk:
                        time.sleep(0.02)
                        continue
                    pending += chunk
                    *complete, pending = pending.split(b"\n")
                    for line in complete:
                        self.lines.append((time.monotonic(), line.decode()))
                    if self._hold_after and any(line.startswith(f"{self._hold_after}\t".encode()) for line in complete):
                        self._reading.clear()
                        self.held.set()
                        break
            finally:
                os.close(fd)


def blocked_opening_fifo(pid: int) -> bool:
    """Whether a thread of `pid` sleeps opening a FIFO no one reads (the held stage)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        with contextlib.suppress(OSError):
            if "fifo" in (task / "wchan").read_text() or "partner" in (task / "wchan").read_text():
                return True
    return False


def _env(home: Path) -> dict[str, str]:
    from prefect.settings import PREFECT_API_URL

    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIAL_STAGE")}
    return {**env, "PREFECT_API_URL": str(PREFECT_API_URL.value()), "MEMTRIAL_HOME": str(home / "memtrial"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false"}


def _config(folder: Path, address: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    config = folder / "run.yaml"
    config.write_text(f"name: dask-interrupt\ntasks: [rotlog-keep-count]\nconditions: ['off', 'on']\ntrials: 1\nsuites: []\n"
                      f"embedder: hashed\nartifact_root: {folder / 'artifacts'}\nrunner: {{kind: dask, address: '{address}'}}\n",
                      encoding="utf-8")
    return config


def _run(argv: list[str], home: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *argv, "--plain"], env=_env(home), cwd=folder, capture_output=True, text=True,
                          timeout=900, check=False)


def _idle(address: str) -> bool:
    """Whether no worker thread executes a task (the scheduler forgets a task its client dropped while a
    worker still runs it, so the workers are asked)."""
    from distributed import Client

    with Client(address, timeout=30) as client:
        busy = client.run(lambda dask_worker: len(dask_worker.active_threads))
    return not any(busy.values())


@pytest.fixture
def cluster(prefect_harness: None, tmp_path: Path) -> Iterator[tuple[str, subprocess.Popen[bytes], FifoTrace]]:
    """A stock scheduler and one single-threaded worker (no nanny) whose stage trace is a FIFO the test reads."""
    folder = tmp_path / "cluster"
    folder.mkdir()
    address, scheduler = start_scheduler(folder, worker_env(folder / "scheduler"))
    procs = [scheduler]
    trace = FifoTrace(folder / "worker-stages.fifo")
    try:
        env = {**worker_env(folder / "worker"), "MEMTRIAL_STAGE_TRACE": str(trace.path)}
        procs.append(start_worker(address, folder / "worker", env))
        wait_for_workers(address, 1)
        yield address, procs[1], trace
    finally:
        trace.release()
        stop(procs)
        trace.stop()


def test_ctrl_c_stops_the_arms_on_an_external_dask_cluster_caches_none_of_them_and_rerun_gives_the_uninterrupted_records(
        cluster: tuple[str, subprocess.Popen[bytes], FifoTrace], tmp_path: Path) -> None:
    """The failure prevented: Ctrl-C of a run whose arms ran on a Dask cluster stopped only the flow's
    process; the worker went on with the arm to its record and stored its result, so a rerun took from
    cache an arm whose run had been interrupted (and the worker spent on a run nobody waited for). The
    arm is held in the worker after its agent step; SIGINT goes to the command's process group as a
    terminal's Ctrl-C does: the command exits 130 within seconds, the arm never reaches its record step,
    nothing of the run is cached, and `memtrial rerun` ends with the records of an uninterrupted run."""
    address, worker, trace = cluster
    home = tmp_path / "home"
    baseline = _run(["run", "--config", str(_config(tmp_path / "baseline", address))], home, tmp_path / "baseline")
    assert baseline.returncode == 0, baseline.stderr[-2000:]
    wait_for(lambda: _idle(address), "the worker to finish the baseline")

    folder = tmp_path / "interrupted"
    trace.hold_after("run-agent")
    flow = subprocess.Popen([*CLI, "run", "--config", str(_config(folder, address)), "--plain"], env=_env(home), cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        wait_for(lambda: trace.held.is_set() or flow.poll() is not None, "the arm's agent step", timeout=600)
        assert flow.poll() is None, f"the run ended before its arm was held: {flow.stderr.read()[-2000:] if flow.stderr else ''}"
        wait_for(lambda: blocked_opening_fifo(worker.pid), "the arm held after its agent step", timeout=300)
        os.killpg(flow.pid, signal.SIGINT)
        signalled = time.monotonic()
        try:
            _, stderr = flow.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(flow.pid, signal.SIGKILL)
            _, stderr = flow.communicate()
        took = time.monotonic() - signalled
    finally:
        if flow.poll() is None:
            os.killpg(flow.pid, signal.SIGKILL)
            flow.wait()
    trace.release()  # the held stage goes on, in a worker that kept running
    wait_for(lambda: _idle(address), "the worker to end the interrupted arm", timeout=300)
    time.sleep(1.0)  # the trace's last lines reach the reader

    assert flow.returncode == 130 and took < EXIT_SECONDS, f"exit {flow.returncode} after {took:.1f} s: {stderr[-2000:]}"
    assert "could not halt" not in stderr and "Traceback" not in stderr, stderr[-3000:]
    (line,) = [line for line in stderr.splitlines() if "interrupted" in line]
    run_id = line.split()[2]
    after = trace.stages_since(signalled)
    assert "record-arm" not in after and "check-workspace" not in after, f"the worker went on after the signal: {after}"
    assert not list((folder / "artifacts" / "runs").glob(f"{run_id}-calibration/**/record.json"))
    listed = subprocess.run([*CLI, "cache", "list", "--json", "--artifact-root", str(folder / "artifacts")], env=_env(home),
                            capture_output=True, text=True, timeout=120, check=False)
    assert listed.returncode == 0, listed.stderr
    ours = [e for e in json.loads(listed.stdout) if (e["run_id"] or "").startswith(run_id)]
    assert ours == [], f"results of the interrupted run were cached: {ours}"
    assert stat.S_ISFIFO(trace.path.stat().st_mode)

    rerun = _run(["rerun", run_id], home, folder)
    assert rerun.returncode == 0, rerun.stderr[-2000:]
    assert _rows(folder) == _rows(tmp_path / "baseline")


def hold_a_process(flow_run: str, pidfile: str) -> int:
    """Run on a worker as a stage of `flow_run` would: note it, start a process, wait for it; its exit status."""
    from flows.runtime import interrupt

    interrupt.working_for(flow_run)
    child = subprocess.Popen(["sleep", "600"])
    Path(pidfile).write_text(str(child.pid))
    return child.wait()


@pytest.mark.parametrize("other_run", [False, True], ids=["only-the-halted-run", "another-run-too"])
def test_a_halted_worker_kills_its_processes_only_when_it_runs_nothing_but_the_halted_run(tmp_path: Path, other_run: bool) -> None:
    """The failure prevented: an interrupted run's check or agent process going on in a Dask worker to its
    end (spending, or judging an arm nobody waits for), or, the other way, a halt killing the processes
    of another run the same worker serves. A real scheduler and a two-thread worker; the halt is what an
    interrupted flow process sends (`Client.run(halt_on_worker, ...)`)."""
    from distributed import Client

    from flows.runtime.dask_runner import halt_on_worker
    from test_flow_dask import REPO, start

    folder = tmp_path / "cluster"
    folder.mkdir()
    env = {**worker_env(folder / "worker"), "PYTHONPATH": str(REPO / "tests")}
    address, scheduler = start_scheduler(folder, env)
    procs = [scheduler, start(["distributed.cli.dask_worker", address, "--no-nanny", "--nthreads", "2", "--no-dashboard",
                               "--host", "127.0.0.1"], folder, env, folder / "worker.log")]
    try:
        wait_for_workers(address, 1)
        with Client(address, timeout=30) as client:
            runs = ["halted", "other"] if other_run else ["halted"]
            pidfiles = {run: tmp_path / f"{run}.pid" for run in runs}
            futures = {run: client.submit(hold_a_process, run, str(pidfiles[run]), pure=False) for run in runs}
            wait_for(lambda: all(p.exists() and p.read_text() for p in pidfiles.values()), "the stages' processes")
            pids = {run: int(p.read_text()) for run, p in pidfiles.items()}
            (answer,) = client.run(halt_on_worker, ["halted"], "test: its flow process got SIGINT").values()
            if other_run:
                assert answer == {"killed": 0, "stopped": 0}
                time.sleep(1.0)
                assert all(Path(f"/proc/{pid}").exists() for pid in pids.values()), "a shared worker killed processes"
                for pid in pids.values():
                    os.kill(pid, signal.SIGKILL)
            else:
                assert answer["killed"] >= 1, answer
                assert futures["halted"].result(timeout=30) == -signal.SIGKILL
            assert {run: f.result(timeout=30) for run, f in futures.items()} == dict.fromkeys(runs, -signal.SIGKILL)
    finally:
        stop(procs)
