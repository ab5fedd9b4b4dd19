"""Task runner selection: a local thread pool by default, Dask (prefect-dask) as a config switch."""

from __future__ import annotations

from typing import Any

from prefect.task_runners import ThreadPoolTaskRunner

from tasks_lib.errors import MemtrialError
from tasks_lib.runconfig import RunnerSpec


class RunnerError(MemtrialError):
    """The configured task runner cannot be built."""


def task_runner(spec: RunnerSpec) -> Any:
    """The Prefect task runner for `spec`: threads, a local Dask cluster, or an existing Dask scheduler."""
    if spec.kind == "thread":
        if spec.address:
            raise RunnerError("runner.address is only for runner.kind dask; remove it or set kind: dask")
        return ThreadPoolTaskRunner(max_workers=spec.workers)
    try:
        from prefect_dask import DaskTaskRunner
    except ImportError:
        raise RunnerError("runner.kind dask needs prefect-dask; install memtrial with the [dask] extra") from None
    if spec.address:
        return DaskTaskRunner(address=spec.address)
    return DaskTaskRunner(cluster_kwargs={"n_workers": spec.workers, "threads_per_worker": 1, "processes": True, "dashboard_address": None, "host": "127.0.0.1"})
