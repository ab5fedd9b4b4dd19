"""The memory conditions of the paired matrix: one table, the single place a condition is defined.

A condition says what memory state an arm gets, never how the agent is told (it is not told):

- `off`, `ablate:all`: no memory system at all; `ablate:<lane>`: the task's memories without that lane;
- `on`: the task's memories (`TaskManifest.memories`) through the memory system under test;
- `notes`: the incumbent: the task's memories written as a notes file that the agent's harness loads
  by itself, from a runner-owned path in the arm's HOME (`tasks_lib.memory.delivery.notes`), no memory system;
- `placebo`: as many true but irrelevant memories of the same total length (`placebo_memories`),
  through the same memory system;
- `harm:<name>`: the planted state a harm condition defines (`TaskManifest.harm`): `absent` (the key
  memory removed), `superseded` (only the old value, no correction), `contradictory` (old and new
  value, no correction), `adjacent` (a similar memory about another component);
- `feed`: the task's recorded session transcripts (`TaskManifest.transcripts`) ingested through the
  memory system's own write path instead of the curated memories (`tasks_lib.corpus.feed`);
- `grep`: the same transcripts as plain read-only files in a runner-owned folder the agent may
  read, no memory system (`tasks_lib.arm.history`).

A task that carries no placebo, harm variant or transcripts has no cell for that condition: `applies` says so and
the matrix skips the cell, listing it (`tasks_lib.arm.steps.skipped_cells`). To add a condition, add
one row to `CONDITIONS` (and, for a new planted state, one branch to `planted_memories`); the
contract pattern, the run-config check and the CLI help all read this table.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol, TypeVar

Delivery = Literal["none", "memory-system", "notes-file", "history-folder"]
"""How the arm's memory reaches the agent: not at all, through the memory system behind the runner's
delivery witness, as a notes file the agent's harness loads, or as a folder of transcripts it may read."""
Planted = Literal["none", "task", "placebo", "harm", "feed"]
"""Which memories make the arm's state: none, the task's own, its placebo set, one harm variant, or
what is kept of its recorded transcripts (the experience feed)."""


@dataclass(frozen=True)
class ConditionSpec:
    """One row of the condition table."""

    name: str
    """The condition as written in configs, records and `--conditions`."""
    delivery: Delivery
    """How its memory reaches the agent."""
    planted: Planted
    """Which memories make its state."""
    summary: str
    """One line for help texts and reports."""


class PlantedMemory(Protocol):
    """What the table reads of a memory (a `tasks_lib.contracts.MemorySpec`, which builds on this
    module and so is not imported here): its kind and text."""

    @property
    def kind(self) -> str: ...
    @property
    def text(self) -> str: ...


M = TypeVar("M", bound=PlantedMemory, covariant=True)


class PlantedStates(Protocol[M]):
    """What the table reads of a task (a `tasks_lib.contracts.TaskManifest`): its memories and the
    planted states its conditions need."""

    @property
    def task_id(self) -> str: ...
    @property
    def memories(self) -> tuple[M, ...]: ...
    @property
    def placebo_memories(self) -> tuple[M, ...]: ...
    @property
    def harm(self) -> object | None: ...
    @property
    def transcripts(self) -> Sequence[object]: ...


HARM_VARIANTS = ("absent", "superseded", "contradictory", "adjacent")
"""The harm conditions' planted states, as named in `TaskManifest.harm`."""
HARM_PREFIX = "harm:"
ABLATE_PREFIX = "ablate:"

CONDITIONS: dict[str, ConditionSpec] = {spec.name: spec for spec in (
    ConditionSpec("off", "none", "none", "no memory system"),
    ConditionSpec("on", "memory-system", "task", "the task's memories through the memory system"),
    ConditionSpec("notes", "notes-file", "task", "the task's memories as a notes file the agent's harness loads"),
    ConditionSpec("placebo", "memory-system", "placebo", "as many true, irrelevant memories of the same length"),
    *(ConditionSpec(f"{HARM_PREFIX}{v}", "memory-system", "harm", f"harm: the task's {v!r} planted state") for v in HARM_VARIANTS),
    ConditionSpec("feed", "memory-system", "feed", "the task's recorded transcripts through the memory system's own write path"),
    ConditionSpec("grep", "history-folder", "feed", "the task's recorded transcripts as plain files the agent may read"),
)}
"""Every fixed condition; `ablate:<lane>` and `ablate:all` are the one parametrised family beside them."""
FEED_CONDITIONS = tuple(name for name, spec in CONDITIONS.items() if spec.planted == "feed")
"""Conditions fed from a task's recorded transcripts instead of its curated memories (`feed`, `grep`)."""

LANE_PATTERN = r"[a-z][a-z0-9_-]{0,31}"
CONDITION_PATTERN = "^(?:" + "|".join(re.escape(n) for n in CONDITIONS) + rf"|ablate:(?:all|{LANE_PATTERN}))$"
"""The contract pattern of a condition name (built from the table)."""
KEY_MEMORY_KINDS = frozenset({"convention", "decision", "procedure", "correction"})
"""Memory kinds that carry a task's answer (its key memory)."""
NO_MEMORY_SYSTEM = ("off", "ablate:all", "notes", "grep")
"""Conditions whose arm reaches no memory system: nothing planted in a store, no witness, no socket."""


def key_texts_of(memories: Sequence[PlantedMemory]) -> list[str]:
    """Texts of the memories that carry the answer (any non-superseded one when none is of a key kind)."""
    return [m.text for m in memories if m.kind in KEY_MEMORY_KINDS] or [m.text for m in memories if m.kind != "superseded"]


class UnknownCondition(ValueError):
    """A condition name that is not in the table (nor `ablate:<lane>` of a known lane)."""


def known_conditions(lanes: Sequence[str]) -> list[str]:
    """Every condition name accepted with these lanes, table first."""
    return [*CONDITIONS, "ablate:all", *(f"{ABLATE_PREFIX}{lane}" for lane in lanes)]


def spec_of(condition: str, lanes: Sequence[str] | None = None) -> ConditionSpec:
    """The table row of `condition` (an `ablate:` condition plants the task's memories, minus a lane);
    with `lanes`, an `ablate:<lane>` must name one of them. Raises UnknownCondition naming the known ones."""
    if condition in CONDITIONS:
        return CONDITIONS[condition]
    lane = condition.removeprefix(ABLATE_PREFIX) if condition.startswith(ABLATE_PREFIX) else None
    if lane == "all":
        return ConditionSpec(condition, "none", "none", "no memory system (the harness check of ablation)")
    if lane and re.fullmatch(LANE_PATTERN, lane) and (lanes is None or lane in lanes):
        return ConditionSpec(condition, "memory-system", "task", f"the task's memories without the {lane} lane")
    known = ", ".join(known_conditions(lanes or ()) if lanes else [*CONDITIONS, "ablate:all", "ablate:<lane>"])
    raise UnknownCondition(f"condition {condition!r} is unknown; use one of {known}")


def condition_summary(condition: str) -> str:
    """The one-line summary of a condition for reports ('unknown condition' for a name not in the table)."""
    try:
        return spec_of(condition).summary
    except UnknownCondition:
        return "unknown condition"


def applies(manifest: PlantedStates[PlantedMemory], condition: str) -> bool:
    """Whether the task has a cell for `condition`: placebo, harm and feed conditions need their
    planted state (or transcripts) in the manifest; every other condition applies to every task."""
    planted = spec_of(condition).planted
    if planted == "placebo":
        return bool(manifest.placebo_memories)
    if planted == "harm":
        return manifest.harm is not None
    if planted == "feed":
        return bool(manifest.transcripts)
    return True


def planted_memories(manifest: PlantedStates[M], condition: str) -> tuple[M, ...]:
    """The memories that make the arm's state under `condition` (empty where no memory is planted).

    Raises UnknownCondition for a task that does not carry the condition's planted state."""
    spec = spec_of(condition)
    if not applies(manifest, condition):
        field = {"placebo": "placebo_memories", "harm": "harm", "feed": "transcripts"}[spec.planted]
        raise UnknownCondition(f"task {manifest.task_id!r} carries no planted state for {condition!r} (its task.json has no {field})")
    if spec.planted in ("none", "feed"):  # a feed arm's memory is what its write path keeps (tasks_lib.corpus.feed)
        return ()
    if spec.planted == "placebo":
        return manifest.placebo_memories
    if spec.planted == "harm":
        assert manifest.harm is not None
        return getattr(manifest.harm, condition.removeprefix(HARM_PREFIX))
    return manifest.memories
