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
a silently different pattern (the declaration and its measurement live in `tasks_lib.corpus.key_lanes`,
where the corpus check runs them as the `key-lanes` invariant).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from tasks_lib.agents.calibration import EXPLORABLE, MEMORY_SOLVES, tokens
from tasks_lib.conditions import KEY_MEMORY_KINDS, planted_memories, spec_of  # noqa: F401  (KEY_MEMORY_KINDS re-exported)
from tasks_lib.contracts import MemorySpec
from tasks_lib.corpus.feed import feed_documents, key_turn_texts
from tasks_lib.corpus.key_lanes import (  # noqa: F401  (re-exported: the plan is read from the declaration)
    KEY_LANES_NAME,
    RECALL_K,
    REFERENCE_EMBEDDER,
    CalibrationPlanError,
    KeyLanes,
    key_texts,
    load_key_lanes,
    measure_key_lanes,
    probe_store,
)
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.corpus.upstream import upstream_fixture_bytes
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.delivery.hook import MAX_QUERY_BYTES
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.trees import walk_files


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


def misleading_texts(memories: Sequence[MemorySpec]) -> list[str]:
    """The old values a planted state holds without any correction (`harm:superseded`, `harm:contradictory`):
    the calibration agent acts on one that arrives without the key memory, and explores when both arrive.
    Empty when the state plants a correction (a stale-trap's `on`: the correction wins)."""
    if any(m.kind == "correction" for m in memories):
        return []
    return [m.text for m in memories if m.kind == "superseded"]


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
    with probe_store((), embedder) as (store, realm):
        ingest_feed(store, realm, task)
        return any(hit.text in wanted for prompt in prompts for hit in store.recall(realm, prompt, k))


def active_lanes(condition: str) -> frozenset[str]:
    """Lanes the hook may use under `condition`."""
    if condition == "off" or condition == "ablate:all":
        return frozenset()
    if condition.startswith("ablate:"):
        return frozenset(LANES) - {condition.removeprefix("ablate:")}
    return frozenset(LANES)


def clip_query(prompt: str) -> str:
    """The query the delivery hook sends for `prompt`: its first MAX_QUERY_BYTES bytes."""
    return prompt.encode("utf-8", "surrogatepass")[:MAX_QUERY_BYTES].decode("utf-8", "ignore")


def served_texts(memories: Sequence[MemorySpec], prompts: Sequence[str], embedder: str = REFERENCE_EMBEDDER,
                 k: int = RECALL_K) -> frozenset[str]:
    """Texts the reference store serves the delivery hook for `prompts` when `memories` are planted:
    each prompt clipped as the hook clips it, every lane, `k` hits (what the witness relays)."""
    if not memories:
        return frozenset()
    with probe_store(memories, embedder) as (store, realm):
        return frozenset(hit.text for prompt in prompts for hit in store.recall(realm, clip_query(prompt), k, lanes=list(LANES)))


def expected_attempt(task: LoadedTask, condition: str, key_lanes: Sequence[str]) -> ExpectedAttempt:
    """The calibration agent's expected behaviour on `task` under `condition` (see the module docstring):
    for `on`, `off` and `ablate:*` from the key-lane declaration; for `notes` from the notes file (it holds
    every memory); for `placebo` and `harm:*` from what the reference store serves of their planted state."""
    kind = task.manifest.kind
    spec = spec_of(condition)
    keys = set(key_texts(task))
    misled = False
    if spec.planted == "feed":
        # The corpus guarantees a key turn is recalled for the prompts (tests/test_feed.py measures it)
        # and every key turn is in the grep arm's files.
        delivered = bool(task.manifest.transcripts)
    elif spec.planted in ("placebo", "harm"):
        planted = planted_memories(task.manifest, condition)
        served = served_texts(planted, (task.manifest.instruction, *task.manifest.follow_up_prompts))
        delivered, misled = bool(served & keys), bool(served & set(misleading_texts(planted)))
    elif spec.delivery == "notes-file":
        delivered = bool(task.manifest.memories and keys)
    else:
        delivered = bool(active_lanes(condition) & set(key_lanes))
    memory_solves = delivered and not misled and kind in MEMORY_SOLVES
    acts_on_old_value = misled and not delivered
    solves = memory_solves or (kind in EXPLORABLE and not acts_on_old_value)
    written = sum((task.solution_dir / rel).stat().st_size for rel in walk_files(task.solution_dir)) if solves else 0
    return ExpectedAttempt(
        delivered=delivered,
        explores=not memory_solves and not acts_on_old_value,
        outcome="pass" if solves else "fail",
        output_tokens=tokens(written),
    )


def visible_bytes(task: LoadedTask) -> int:
    """Bytes of every regular file of the task's fixture (an upstream task's composed fixture): what
    exploring reads (the fixture certifies clean, so nothing is redacted)."""
    if task.manifest.upstream is not None:
        return upstream_fixture_bytes(task.root, task.manifest)
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
