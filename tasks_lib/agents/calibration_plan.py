"""The calibration agent's expected record for every task and condition, derived from the corpus.

The corpus declares in `key_lanes.json` (next to `split.json`) which lanes of the reference
memory system retrieve each task's key memory (the one that carries the answer, see `key_texts`)
when the task's prompts are the queries: the SQLite store with the `hashed` embedder, recall
of the hook's DEFAULT_K hits per prompt. From that declaration, the task's kind and its files,
`expected_attempt` says what the calibration agent must do under each condition:

- the key memory is delivered when the condition leaves at least one of its lanes active
  (`on`, or `ablate:<lane>` of another lane); never under `off` or `ablate:all`; under `feed` and
  `grep` a transcript turn carrying the key fact is (recalled from what the store ingested, or read
  from the history folder), for every task with transcripts;
- delivered on a kind memory can solve: apply the solution without reading files (pass);
- otherwise explore every visible file, then pass only on kinds exploration can solve.

So a task whose key memory only one lane carries flips from pass to fail when exactly that lane
is ablated, and `ablate:all` equals `off`. `measure_key_lanes` checks a declaration against the
store itself, lane by lane, so a change in retrieval shows up as a named mismatch rather than
a silently different pattern.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks_lib.agents.calibration import EXPLORABLE, MEMORY_SOLVES, tokens
from tasks_lib.contracts import FEED_CONDITIONS, Document, Identifier, LaneName, NonEmptyText
from tasks_lib.corpus.feed import feed_documents, key_turn_texts
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.hook import DEFAULT_K
from tasks_lib.memory.planting import plant
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import walk_files

KEY_LANES_NAME = "key_lanes.json"
"""The declaration file, at the root of the task corpus."""
KEY_MEMORY_KINDS = frozenset({"convention", "decision", "procedure", "correction"})
"""Memory kinds that carry a task's answer; the calibration agent needs one of them delivered."""
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


@dataclass(frozen=True)
class ExpectedAttempt:
    """What the calibration agent must do on one task under one condition."""

    delivered: bool
    """The key memory reaches the agent through its prompt hook."""
    explores: bool
    """It reads every visible file (counted as input tokens)."""
    outcome: Literal["pass", "fail"]
    """The check's verdict."""
    output_tokens: int
    """Tokens written: the solution's bytes / 4 when it applies the solution, else 0."""


def key_texts(task: LoadedTask) -> list[str]:
    """Texts of the memories that carry the task's answer (any non-superseded one when none is of a key kind)."""
    memories = task.manifest.memories
    return [m.text for m in memories if m.kind in KEY_MEMORY_KINDS] or [m.text for m in memories if m.kind != "superseded"]


def load_key_lanes(tasks_root: Path, tasks: Sequence[LoadedTask]) -> KeyLanes:
    """Read `key_lanes.json` under `tasks_root`; it must name exactly the loaded tasks, with known lanes."""
    path = tasks_root / KEY_LANES_NAME
    try:
        declared = KeyLanes.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise CalibrationPlanError(f"{path}: missing; declare which lanes retrieve each task's key memory") from None
    except ValueError as error:
        raise CalibrationPlanError(f"{path}: not a valid key-lane declaration ({error})") from None
    ids = {t.task_id for t in tasks}
    missing, extra = sorted(ids - declared.tasks.keys()), sorted(declared.tasks.keys() - ids)
    if missing or extra:
        raise CalibrationPlanError(f"{path}: tasks: missing {missing or 'none'}, unknown {extra or 'none'}; list every task folder once")
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


def measure_key_lanes(task: LoadedTask, embedder: str = REFERENCE_EMBEDDER, k: int = RECALL_K) -> tuple[str, ...]:
    """The lanes that, each alone, retrieve a key memory for one of the task's prompts (in LANES order)."""
    if not task.manifest.memories:
        return ()
    wanted = set(key_texts(task))
    prompts = (task.manifest.instruction, *task.manifest.follow_up_prompts)
    with tempfile.TemporaryDirectory(prefix="memtrial-key-lanes-") as tmp, SqliteMemoryStore(Path(tmp) / "m.sqlite", embedder) as store:
        realm = "probe:key-lanes"
        store.create_realm(realm)
        plant(store, realm, task.manifest.memories)
        return tuple(
            lane for lane in LANES
            if any(hit.text in wanted for prompt in prompts for hit in store.recall(realm, prompt, k, lanes=(lane,)))
        )


def feed_key_texts(task: LoadedTask) -> list[str]:
    """Texts of the transcript turns that carry the task's key fact in passing (empty without transcripts)."""
    return key_turn_texts(task.root, task.manifest)


def ingest_feed(adapter: MemoryAdapter, realm: str, task: LoadedTask, condition: str = "feed") -> tuple[str, ...]:
    """Feed every transcript of the task through `adapter.ingest`, one session per transcript; return
    the ids it kept. Raises FeedError for a task without transcripts or a transcript that fails its pin."""
    ids: list[str] = []
    for name, _, turns in feed_documents(task.root, task.manifest, condition):
        ids.extend(adapter.ingest(realm, turns, session=name))
    return tuple(ids)


def measure_feed_delivery(task: LoadedTask, embedder: str = REFERENCE_EMBEDDER, k: int = RECALL_K) -> bool:
    """Whether the reference store, fed the task's transcripts, recalls a key turn for one of its prompts
    (all lanes, `k` hits per prompt, as the delivery hook asks)."""
    if not task.manifest.transcripts:
        return False
    wanted = set(feed_key_texts(task))
    prompts = (task.manifest.instruction, *task.manifest.follow_up_prompts)
    with tempfile.TemporaryDirectory(prefix="memtrial-feed-") as tmp, SqliteMemoryStore(Path(tmp) / "m.sqlite", embedder) as store:
        realm = "probe:feed"
        store.create_realm(realm)
        ingest_feed(store, realm, task)
        return any(hit.text in wanted for prompt in prompts for hit in store.recall(realm, prompt, k))


def active_lanes(condition: str) -> frozenset[str]:
    """Lanes the hook may use under `condition`."""
    if condition == "off" or condition == "ablate:all":
        return frozenset()
    if condition.startswith("ablate:"):
        return frozenset(LANES) - {condition.removeprefix("ablate:")}
    return frozenset(LANES)


def expected_attempt(task: LoadedTask, condition: str, key_lanes: Sequence[str]) -> ExpectedAttempt:
    """The calibration agent's expected behaviour on `task` under `condition` (see the module docstring)."""
    kind = task.manifest.kind
    if condition in FEED_CONDITIONS:
        # The corpus guarantees a key turn is recalled for the prompts (tests/test_feed.py measures it)
        # and every key turn is in the grep arm's files.
        delivered = bool(task.manifest.transcripts)
    else:
        delivered = bool(active_lanes(condition) & set(key_lanes))
    memory_solves = delivered and kind in MEMORY_SOLVES
    solves = memory_solves or kind in EXPLORABLE
    written = sum((task.solution_dir / rel).stat().st_size for rel in walk_files(task.solution_dir)) if solves else 0
    return ExpectedAttempt(
        delivered=delivered,
        explores=not memory_solves,
        outcome="pass" if solves else "fail",
        output_tokens=tokens(written),
    )


def visible_bytes(task: LoadedTask) -> int:
    """Bytes of every regular file of the task's fixture: what exploring reads (the fixture certifies clean, so nothing is redacted)."""
    root = task.fixture_dir
    return sum((root / rel).stat().st_size for rel in walk_files(root) if not (root / rel).is_symlink())


def history_bytes(task: LoadedTask) -> int:
    """Bytes of every transcript of the task: what the calibration agent reads in the `grep` arm."""
    return sum((task.root / ref.path).stat().st_size for ref in task.manifest.transcripts)


def expected_input_tokens(task: LoadedTask, expected: ExpectedAttempt, context_bytes: int, condition: str = "on") -> int:
    """Input tokens: the prompts, the context the hook delivered (`context_bytes`), the recorded sessions
    under `grep`, and the fixture when exploring."""
    prompts = sum(len(p.encode()) for p in (task.manifest.instruction, *task.manifest.follow_up_prompts))
    history = history_bytes(task) if condition == "grep" else 0
    return tokens(prompts + context_bytes + history + (visible_bytes(task) if expected.explores else 0))
