"""prefect-dask's task runner with memtrial's own, client-side bound on the wait for Dask workers.

A stock `dask scheduler` keeps a task that has no worker waiting forever (Dask's
`distributed.scheduler.no-workers-timeout` is unset by default), so a cluster that loses every
worker would hang the run. Rather than require that setting of a scheduler the user may not own,
the flow watches the cluster itself (`WorkerWatch`): while a task it submitted is unfinished, it asks
the scheduler for its workers every `WATCH_INTERVAL` seconds, and once the cluster has had no worker
for `runner.no_workers_timeout` seconds it cancels its unfinished tasks and records the loss, which
`flows.runners.cluster_loss_named` turns into one line. Imported only for `runner.kind: dask`
(prefect-dask is the `[dask]` extra).

Ctrl-C stops the flow's process (`flows.runtime.interrupt`), not the workers, which would run its arms to
their records. So the runner registers a stop action with the interrupt: it calls `halt_on_worker`
on every worker, which marks the runner's flow runs halted there (their next stage raises
`StageInterrupted`, their results are refused) and, on a worker that runs nothing but halted runs'
stages, kills every process the worker started and runs its own stop actions (containers). A worker
that also runs another run's stages cannot tell whose processes are whose and kills none: the halted
arm stops at its next stage (README, known limits).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

from prefect.context import FlowRunContext
from prefect_dask import DaskTaskRunner

from flows.runtime import interrupt
from tasks_lib.sandbox import stops

WATCH_INTERVAL = 1.0
"""Seconds between two questions to the scheduler about its workers while tasks are unfinished."""


class WorkerWatch:
    """A daemon thread that, while a tracked task is unfinished, asks the scheduler for its workers every
    `interval` seconds; after `timeout` seconds without any worker it sets `lost` and cancels the
    unfinished tasks, so whoever waits on them wakes up. A scheduler that does not answer counts as no
    worker; the timer restarts whenever a worker is seen or nothing is unfinished."""

    def __init__(self, client: Any, timeout: float, interval: float = WATCH_INTERVAL) -> None:
        self.client, self.timeout, self.interval = client, timeout, interval
        self.lost: float | None = None
        """The seconds the cluster had had no worker when the watch cancelled the tasks (None: it did not)."""
        self._futures: list[Any] = []
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memtrial-dask-worker-watch", daemon=True)
        self._thread.start()

    def track(self, future: Any) -> None:
        """Watch the distributed future `future` until it finishes (cancelled at once after a loss)."""
        with self._lock:
            self._futures.append(future)
        if self.lost is not None:
            self._cancel()

    def stop(self) -> None:
        """End the watch (the task runner is shutting down)."""
        self._stopped.set()
        self._thread.join(timeout=self.interval + 5)

    def _unfinished(self) -> list[Any]:
        """The tracked futures that have not finished (forgets the finished ones)."""
        with self._lock:
            self._futures = [f for f in self._futures if not f.done()]
            return list(self._futures)

    def _workers(self) -> int:
        """How many workers the scheduler has (0 when it does not answer)."""
        try:
            return len(self.client.nthreads())
        except (OSError, TimeoutError):  # the scheduler itself is gone: no worker can finish the tasks
            return 0

    def _run(self) -> None:
        since: float | None = None
        while not self._stopped.wait(self.interval):
            if not self._unfinished() or self._workers() > 0:
                since = None
                continue
            since = since if since is not None else time.monotonic()
            if time.monotonic() - since >= self.timeout:
                self.lost = self.timeout
                self._cancel()
                return

    def _cancel(self) -> None:
        """Cancel every unfinished tracked task."""
        pending = self._unfinished()
        if pending:
            self.client.cancel(pending, reason=f"memtrial: the Dask cluster had no worker for {self.timeout:g}s")


def halt_on_worker(flow_runs: list[str], why: str, dask_worker: Any) -> dict[str, int]:
    """Run on a Dask worker (`Client.run`, which passes the worker as `dask_worker`) by an interrupted
    flow process: halt `flow_runs` here (see the module docstring); when every task this worker executes
    is a halted run's, kill the processes it started and run its stop actions. Returns how many
    processes were killed and actions run."""
    interrupt.halt(flow_runs, why)
    with dask_worker.active_threads_lock:
        active = dict(dask_worker.active_threads)
    if not interrupt.only_halted(active):
        return {"killed": 0, "stopped": 0}
    return {"killed": interrupt.kill_descendants(), "stopped": stops.run_all(latch=False)}


class WatchedDaskTaskRunner(DaskTaskRunner):
    """prefect-dask's task runner whose submitted tasks are watched by a `WorkerWatch` bounded by
    `no_workers_timeout` seconds, whatever the scheduler's own settings."""

    def __init__(self, no_workers_timeout: float, **options: Any) -> None:
        super().__init__(**options)
        self.no_workers_timeout = no_workers_timeout
        self.watch: WorkerWatch | None = None
        """The watch of this runner's tasks, started with the first submitted task."""
        self.flow_runs: dict[str, str] = {}
        """Flow run id -> memtrial run id (or flow name) of every flow run this runner submitted tasks for."""
        self._stop: int | None = None
        """The handle of the stop action that halts those flow runs on the workers (`tasks_lib.sandbox.stops`)."""

    def duplicate(self) -> WatchedDaskTaskRunner:
        """A runner with the same settings and a watch of its own (Prefect runs each flow run on a duplicate)."""
        return type(self)(self.no_workers_timeout, address=self.address, cluster_class=self.cluster_class,
                          cluster_kwargs=self.cluster_kwargs, adapt_kwargs=self.adapt_kwargs,
                          client_kwargs=self.client_kwargs, performance_report_path=self.performance_report_path)

    def submit(self, *args: Any, **options: Any) -> Any:
        """prefect-dask's submit; the task is watched until it finishes."""
        context = FlowRunContext.get()
        if context is not None and context.flow_run is not None:
            self.flow_runs[str(context.flow_run.id)] = str((context.parameters or {}).get("run_id") or context.flow_run.name)
        if self._stop is None:
            self._stop = stops.register(f"the arms on the Dask cluster at {self.address}", self.halt_workers)
        future = super().submit(*args, **options)
        if self.watch is None:
            self.watch = WorkerWatch(self.client, self.no_workers_timeout)
        self.watch.track(future.wrapped_future)
        return future

    def halt_workers(self) -> None:
        """Halt this runner's flow runs on every worker (the stop action an interrupt runs)."""
        signum = interrupt.tripped()
        why = f"its flow process got {signal.Signals(signum).name}" if signum else "its flow process was interrupted"
        runs = ", ".join(sorted(set(self.flow_runs.values())))
        answers = self.client.run(halt_on_worker, sorted(self.flow_runs), f"run {runs}: {why}", on_error="return")
        for worker, answer in sorted(answers.items()):
            if isinstance(answer, BaseException):
                os.write(2, f"memtrial: Dask worker {worker} could not halt run {runs} ({type(answer).__name__}: {answer}); "
                            "its arms finish on their own\n".encode())

    def __exit__(self, *args: Any) -> None:
        if self._stop is not None:
            if interrupt.tripped() is not None:
                stops.run_all(latch=True)  # halt the workers (or wait for the interrupt doing so) before the client closes
            stops.forget(self._stop)
        if self.watch is not None:
            self.watch.stop()
        super().__exit__(*args)
