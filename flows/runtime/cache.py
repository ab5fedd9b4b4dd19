"""What the stage cache holds, and clearing it: the index `memtrial cache` reads.

Every stage result memtrial persists (`flows.stages.ArtifactResultStorage`) is one object under the
result root (`<artifact root>/prefect-results/` unless the run config names another), named by its
cache key. Beside the result root, `<result root>-index/<key>.json` (a `CacheEntry`) says which stage
wrote it, for which tasks and run, and when, so a user can see what a rerun would re-use and clear it whole, per task or
per stage. A result stored before the index existed is listed as stage `unindexed` (only clearing
everything removes it). Clearing deletes the result and its index entry; the next run computes it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, ClassVar

from pydantic import AwareDatetime

from tasks_lib.artifacts import ArtifactStore
from tasks_lib.contracts import Document
from tasks_lib.errors import ArtifactNotFound, ContractError, MemtrialError

RESULTS_FOLDER = "prefect-results"
"""Under the artifact root: the stage results, unless the run config names a `result_root`."""
INDEX_SUFFIX = "-index"
"""The index of a result root is the folder (or prefix) named like it plus this: one `<key>.json` per result."""
UNINDEXED = "unindexed"
"""The stage of a result stored without an index entry."""
ALL_TASKS = "*"
"""In `CacheEntry.tasks`: the result covers every task of the corpus (the invariants of a run of all tasks)."""
MATRIX_SEAL = "matrix-seal"
"""The stage name of a sealed matrix (every arm of one agent's run completed; `flows.stages.seal_matrix`)."""


class UnknownCacheFilter(MemtrialError):
    """`memtrial cache clear` named a stage or task the cache holds nothing for."""


class CacheEntry(Document):
    """`<result root>-index/<key>.json`: what one cached stage result is."""

    KIND: ClassVar[str] = "cache entry"

    key: str
    """The result's storage key (its file name under the result root)."""
    stage: str
    """The Prefect task that stored it (`prepare-task-corpus`, `corpus-invariants`, `run-arm`, ...), or `matrix-seal`."""
    tasks: tuple[str, ...] = ()
    """The task ids the result covers; `*` for every task of the corpus; empty when it is not about tasks
    (a run's records, grading and report, which a rerun recomputes when its arms change)."""
    run_id: str | None = None
    """The run it belongs to (arms, records, grading, report); None for results shared across runs."""
    label: str = ""
    """A short description (an arm's `task condition trial (agent)`)."""
    stored_at: AwareDatetime
    """When it was stored (UTC)."""


def describe_parameters(stage: str, parameters: Mapping[str, Any]) -> tuple[tuple[str, ...], str | None, str]:
    """(tasks, run id, label) of a stage call from its parameters (an arm spec, `task_folder`, `only`, `run_id`)."""
    from tasks_lib.run.config import ArmSpec

    tasks: tuple[str, ...] = ()
    run_id = parameters.get("run_id") if isinstance(parameters.get("run_id"), str) else None
    label = ""
    for value in parameters.values():
        if isinstance(value, ArmSpec):
            tasks, run_id, label = (value.task_id,), value.run_id, value.label
    if isinstance(parameters.get("task_folder"), str):
        tasks = (parameters["task_folder"],)
    if "only" in parameters:
        tasks = tuple(parameters["only"]) if isinstance(parameters["only"], list) else (ALL_TASKS,)
    if isinstance(parameters.get("suite"), str):
        label = parameters["suite"]
    return tasks, run_id, label


def results_root(artifact_root: str, result_root: str | None = None) -> str:
    """The result root of runs on `artifact_root`: `result_root`, else `<artifact_root>/prefect-results`."""
    return result_root or f"{artifact_root.rstrip('/')}/{RESULTS_FOLDER}"


def index_root(result_root: str) -> str:
    """Where the index of the results under `result_root` goes."""
    return result_root.rstrip("/") + INDEX_SUFFIX


def index_key(key: str) -> str:
    """The index entry of the result `key` (relative to the index root)."""
    return f"{key}.json"


def write_entry(index: ArtifactStore, key: str, stage: str, tasks: Sequence[str] = (), run_id: str | None = None,
                label: str = "") -> None:
    """Record in the index what the result `key` is."""
    index.put_json(index_key(key), CacheEntry(key=key, stage=stage, tasks=tuple(tasks), run_id=run_id, label=label,
                                              stored_at=datetime.now(UTC)))


def list_entries(results: ArtifactStore, index: ArtifactStore) -> list[CacheEntry]:
    """Every stored result under `results`, with its entry in `index` (stage `unindexed` without one)."""
    entries = []
    for key in results.list_keys():
        try:
            entries.append(index.get_json(index_key(key), CacheEntry))
        except (ArtifactNotFound, ContractError):
            entries.append(CacheEntry(key=key, stage=MATRIX_SEAL if key.startswith("matrix-") else UNINDEXED,
                                      stored_at=datetime.fromtimestamp(0, UTC)))
    return sorted(entries, key=lambda e: (e.stage, e.tasks, e.run_id or "", e.key))


def select(entries: Iterable[CacheEntry], stage: str | None, task: str | None) -> list[CacheEntry]:
    """The entries of `stage` and covering `task` (an entry covering every task covers it); UnknownCacheFilter
    naming what the cache holds when a name matches nothing. Clearing a run's arms clears its sealed matrix too."""
    entries = list(entries)
    stages = sorted({e.stage for e in entries})
    tasks = sorted({t for e in entries for t in e.tasks} - {ALL_TASKS})
    if stage is not None and stage not in stages:
        raise UnknownCacheFilter(f"--stage {stage!r}: nothing cached for it; cached stages: {', '.join(stages) or 'none'}")
    if task is not None and task not in tasks:
        raise UnknownCacheFilter(f"--task {task!r}: nothing cached for it; cached tasks: {', '.join(tasks) or 'none'}")
    chosen = [e for e in entries if (stage is None or e.stage == stage) and (task is None or task in e.tasks or ALL_TASKS in e.tasks)]
    if stage == "run-arm":
        runs = {e.run_id for e in chosen if e.stage == "run-arm"}
        chosen += [e for e in entries if e.stage == MATRIX_SEAL and e.run_id in runs and e not in chosen]
    return chosen


def clear(results: ArtifactStore, index: ArtifactStore, entries: Iterable[CacheEntry]) -> int:
    """Delete each entry's result, then its index entry; return how many results were deleted."""
    count = 0
    for entry in entries:
        results.delete(entry.key)
        index.delete(index_key(entry.key))
        count += 1
    return count
