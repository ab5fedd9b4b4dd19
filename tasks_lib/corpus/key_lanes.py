"""The key-lane declaration of a task corpus (`key_lanes.json`) and the invariant that checks it.

The corpus declares, for every task, which lanes of the reference memory system retrieve the
task's key memory (the one that carries the answer, see `key_texts`) when the task's prompts are
the queries: the SQLite store with the `hashed` embedder, recall of the hook's DEFAULT_K hits per
prompt. `measure_key_lanes` measures it lane by lane and `key_lane_failures` is the `key-lanes`
invariant of `tasks_lib.corpus.tasks.check_corpus`: a declaration that differs from what the
store retrieves is a named failure, never a silently different calibration pattern.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, Protocol

from pydantic import Field

from tasks_lib.conditions import key_texts_of
from tasks_lib.contracts import (
    Document,
    Identifier,
    LaneName,
    MemorySpec,
    NonEmptyText,
    TaskManifest,
)
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.hook import DEFAULT_K
from tasks_lib.memory.planting import plant
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import ram_scratch


class KeyedTask(Protocol):
    """What the declaration reads of a task (a `tasks_lib.corpus.tasks.LoadedTask`, which builds on
    this module and so is not imported here): its id and manifest."""

    @property
    def task_id(self) -> str: ...
    @property
    def manifest(self) -> TaskManifest: ...

KEY_LANES_NAME = "key_lanes.json"
"""The declaration file, at the root of the task corpus."""
REFERENCE_EMBEDDER = "hashed"
"""The embedder the declaration is made for (the one paired runs use by default)."""
RECALL_K = DEFAULT_K
"""Hits per prompt the declaration is made for: what the delivery hook recalls."""


class CalibrationPlanError(MemtrialError):
    """The key-lane declaration is missing, malformed, or does not cover the corpus."""


class KeyLanes(Document):
    """Which reference-store lanes retrieve each task's key memory for its prompts."""

    KIND: ClassVar[str] = "key-lane declaration"

    embedder: NonEmptyText = REFERENCE_EMBEDDER
    """The embedder of the reference store the declaration holds for."""
    k: int = Field(default=RECALL_K, ge=1)
    """Hits recalled per prompt."""
    tasks: dict[Identifier, tuple[LaneName, ...]]
    """Task id -> the lanes (of keyword, semantic, graph, corrections) that retrieve its key memory; empty when none does."""


def key_texts(task: KeyedTask) -> list[str]:
    """Texts of the memories that carry the task's answer (any non-superseded one when none is of a key kind)."""
    return manifest_key_texts(task.manifest)


def manifest_key_texts(manifest: TaskManifest) -> list[str]:
    """`key_texts` of a manifest."""
    return key_texts_of(manifest.memories)


def read_key_lanes(tasks_root: Path) -> KeyLanes:
    """Parse `key_lanes.json` under `tasks_root` and check it is made for the reference store and known lanes."""
    path = tasks_root / KEY_LANES_NAME
    try:
        declared = KeyLanes.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise CalibrationPlanError(f"{path}: missing; declare which lanes retrieve each task's key memory") from None
    except ValueError as error:
        raise CalibrationPlanError(f"{path}: not a valid key-lane declaration ({error})") from None
    if (declared.embedder, declared.k) != (REFERENCE_EMBEDDER, RECALL_K):
        raise CalibrationPlanError(
            f"{path}: declared for embedder {declared.embedder!r}, k={declared.k}; the calibration runs use "
            f"{REFERENCE_EMBEDDER!r}, k={RECALL_K}: re-measure the lanes (measure_key_lanes) and update it"
        )
    for task_id, lanes in declared.tasks.items():
        unknown = [lane for lane in lanes if lane not in LANES]
        if unknown:
            raise CalibrationPlanError(f"{path}: tasks.{task_id}: unknown lane(s) {unknown}; use {', '.join(LANES)}")
    return declared


def load_key_lanes(tasks_root: Path, tasks: Sequence[KeyedTask]) -> KeyLanes:
    """Read `key_lanes.json` under `tasks_root`; it must name exactly the loaded tasks, with known lanes."""
    declared = read_key_lanes(tasks_root)
    ids = {t.task_id for t in tasks}
    missing, extra = sorted(ids - declared.tasks.keys()), sorted(declared.tasks.keys() - ids)
    if missing or extra:
        raise CalibrationPlanError(f"{tasks_root / KEY_LANES_NAME}: tasks: missing {missing or 'none'}, "
                                   f"unknown {extra or 'none'}; list every task folder once")
    return declared


@contextmanager
def probe_store(memories: Sequence[MemorySpec], embedder: str) -> Iterator[tuple[SqliteMemoryStore, str]]:
    """A throwaway reference store with `memories` planted in one realm: (store, realm), removed after."""
    with tempfile.TemporaryDirectory(prefix="memtrial-probe-", dir=ram_scratch()) as tmp, SqliteMemoryStore(Path(tmp) / "m.sqlite", embedder) as store:
        realm = "probe:key-lanes"
        store.create_realm(realm)
        plant(store, realm, memories)
        yield store, realm


def measure_manifest_lanes(manifest: TaskManifest, embedder: str = REFERENCE_EMBEDDER, k: int = RECALL_K) -> tuple[str, ...]:
    """The lanes that, each alone, retrieve a key memory for one of the manifest's prompts (in LANES order)."""
    if not manifest.memories:
        return ()
    wanted = set(manifest_key_texts(manifest))
    prompts = (manifest.instruction, *manifest.follow_up_prompts)
    with probe_store(manifest.memories, embedder) as (store, realm):
        return tuple(
            lane for lane in LANES
            if any(hit.text in wanted for prompt in prompts for hit in store.recall(realm, prompt, k, lanes=(lane,)))
        )


def measure_key_lanes(task: KeyedTask, embedder: str = REFERENCE_EMBEDDER, k: int = RECALL_K) -> tuple[str, ...]:
    """The lanes that, each alone, retrieve a key memory for one of the task's prompts (in LANES order)."""
    return measure_manifest_lanes(task.manifest, embedder, k)


def key_lane_problem(task_id: str, manifest: TaskManifest, declared: KeyLanes) -> str | None:
    """Why the declaration for one task is wrong (missing, or not the measured lanes); None when it holds."""
    measured = list(measure_manifest_lanes(manifest))
    if task_id not in declared.tasks:
        return f"the task is not declared; the reference store retrieves its key memory through {measured}: add \"{task_id}\": {measured}".replace("'", '"')
    if list(declared.tasks[task_id]) != measured:
        return f"declares {list(declared.tasks[task_id])} but the reference store retrieves the key memory through {measured}; re-measure and update it".replace("'", '"')
    return None
