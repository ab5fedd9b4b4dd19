"""Task runner selection: a local thread pool by default, Dask (prefect-dask) as a config switch.

An external Dask cluster (`runner.address`) is checked before the flow submits anything
(`ready_task_runner`): the scheduler answers, at least one worker joins within
`MEMTRIAL_DASK_WORKER_TIMEOUT` seconds (default 60), and every worker imports memtrial with the same
arm code as the flow. Each failure is one line naming the worker and the fix, instead of a flow that
hangs on tasks no worker can unpickle, or arms graded by other code than their cache key names. The
scheduler needs no setting of its own: a stock `dask scheduler` is fine.

memtrial bounds its own wait for workers, on the client side (`flows.runtime.dask_runner.WatchedDaskTaskRunner`): while tasks
it submitted are unfinished, it asks the scheduler for its workers every second, and once the cluster
has had no worker for `runner.no_workers_timeout` seconds it cancels those tasks. `cluster_loss_named`
turns that (or Dask's own error, from a scheduler with `distributed.scheduler.no-workers-timeout`
set) into one line naming the scheduler and what to do; the arms already finished keep their records
and cached results, so a rerun with workers back runs only the rest.

This module sits beside the flows, not in `flows.runtime`: the cluster check asks every worker for
the digest of the arm code (`worker_code_digest`, from `flows.stages`), and the runtime builds on no
stage wrapper.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import CancelledError
from contextlib import contextmanager
from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from tasks_lib.errors import MemtrialError
from tasks_lib.run.config import RunnerSpec
from tasks_lib.settings import DASK_WORKER_TIMEOUT

WORKER_TIMEOUT_ENV = DASK_WORKER_TIMEOUT.name
NO_WORKERS_TIMEOUT = "distributed.scheduler.no-workers-timeout"
"""Dask's setting that fails a task left without any worker for that long (default: wait forever)."""
NO_WORKER_ERRORS = frozenset({"NoWorkerError", "NoValidWorkerError"})
"""Dask's errors for a task that waited `no-workers-timeout` without any worker (distributed.scheduler)."""


class RunnerError(MemtrialError):
    """The configured task runner cannot be built, or its cluster cannot run memtrial's arms."""


def task_runner(spec: RunnerSpec) -> Any:
    """The Prefect task runner for `spec`: threads, a local Dask cluster, or an existing Dask scheduler."""
    if spec.kind == "thread":
        if spec.address:
            raise RunnerError("runner.address is only for runner.kind dask; remove it or set kind: dask")
        return ThreadPoolTaskRunner(max_workers=spec.workers)
    try:
        from flows.runtime.dask_runner import WatchedDaskTaskRunner
    except ImportError:
        raise RunnerError("runner.kind dask needs prefect-dask; install memtrial with the [dask] extra") from None
    if spec.address:
        return WatchedDaskTaskRunner(spec.no_workers_timeout, address=spec.address)
    import dask

    dask.config.set({NO_WORKERS_TIMEOUT: f"{spec.no_workers_timeout:g}s"})  # the local cluster's scheduler runs in this process
    return WatchedDaskTaskRunner(spec.no_workers_timeout, cluster_kwargs={
        "n_workers": spec.workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None, "host": "127.0.0.1"})


def ready_task_runner(spec: RunnerSpec) -> Any:
    """`task_runner(spec)`, after checking an external Dask cluster can run the arms (`check_cluster`)."""
    runner = task_runner(spec)
    if spec.kind == "dask" and spec.address:
        check_cluster(spec.address, float(DASK_WORKER_TIMEOUT.text(default="60")))
    return runner


def worker_code_digest() -> str:
    """Run on a Dask worker: the digest of the arm code it would run (fails where memtrial is not importable)."""
    from flows import stages

    return stages.code_digest(*stages.ARM_CODE)


def check_cluster(address: str, timeout: float) -> None:
    """Raise RunnerError unless the scheduler at `address` answers, a worker joins within `timeout`
    seconds, and every worker runs the flow's arm code. The scheduler's own settings are not checked:
    the flow bounds its wait for workers itself (`WorkerWatch`)."""
    from distributed import Client

    try:
        client = Client(address, timeout=timeout)
    except (OSError, TimeoutError) as error:
        raise RunnerError(f"runner.address {address}: no Dask scheduler answers ({error}); start one or fix the address") from None
    try:
        try:
            client.wait_for_workers(1, timeout=timeout)
        except TimeoutError:
            raise RunnerError(f"runner.address {address}: no Dask worker joined within {timeout:g}s; start workers "
                              f"(see docs/DEPLOY.md) or raise {WORKER_TIMEOUT_ENV}") from None
        expected = worker_code_digest()
        for worker, answer in sorted(client.run(worker_code_digest, on_error="return").items()):
            if isinstance(answer, BaseException):
                raise RunnerError(f"Dask worker {worker} cannot run memtrial's arms ({type(answer).__name__}: {answer}); "
                                  "install this memtrial build in the workers' environment")
            if answer != expected:
                raise RunnerError(f"Dask worker {worker} runs other arm code than this flow (digest {answer[:12]}, flow "
                                  f"{expected[:12]}); install the same memtrial build on every worker")
    finally:
        client.close()



def scheduler_address() -> str:
    """The Dask scheduler of the running flow's task runner ('the Dask cluster' when it cannot be read)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    runner = context.task_runner if context else None
    try:
        return str(runner.client.scheduler.address)  # type: ignore[union-attr]
    except Exception:  # noqa: BLE001 - only used to name the cluster in an error line
        return str(getattr(runner, "address", None) or "the Dask cluster")


def watch_lost() -> float | None:
    """The seconds the running flow's Dask cluster had had no worker when memtrial's watch gave up (None: it did not)."""
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    watch = getattr(context.task_runner if context else None, "watch", None)
    return getattr(watch, "lost", None)


@contextmanager
def cluster_loss_named(what: str) -> Iterator[None]:
    """Turn a lost cluster (every worker gone) into one RunnerError naming the scheduler, what was left
    undone and what to do: the tasks memtrial's own watch cancelled (`flows.runtime.dask_runner.WorkerWatch`),
    or Dask's error from a scheduler with its own no-workers timeout. Other errors pass through."""
    try:
        yield
    except Exception as error:
        kind = type(error)
        lost = watch_lost()
        if lost is not None and isinstance(error, CancelledError):
            waited: object = lost
        elif kind.__name__ in NO_WORKER_ERRORS and kind.__module__.startswith("distributed"):
            waited = getattr(error, "timeout", None)
        else:
            raise
        after = f" for {waited:g}s" if isinstance(waited, (int, float)) else ""
        raise RunnerError(f"Dask scheduler {scheduler_address()} has had no worker{after}, so {what} could not finish; "
                          "start workers (docs/DEPLOY.md section 4), then rerun: the finished arms keep their records") from None
