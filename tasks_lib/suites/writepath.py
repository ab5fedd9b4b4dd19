"""The write-path suite: a sequence of tasks on one project, run in order, per arm.

Under `feed` a memory system learns only from the agent's own earlier sessions: after each task,
the agent's transcript (its prompts, messages and tool calls; never what memory itself delivered)
and, when the check failed, the check's feedback (the failing post-turn test's message) are fed
through the system's own write path (`MemoryAdapter.ingest`), and the next task's agent gets the
store behind the runner's delivery witness, as under `on`. Under `off` nothing is kept. Later
tasks need what only an earlier session revealed, so the score is success and tokens on later
tasks with memory vs without, and the learning curve over the sequence.

A sequence lives in `corpora/sequences/<sequence_id>/`: `sequence.json` (`SequenceManifest`)
naming its task folders in order; each folder is an ordinary task (fixture, solution, hidden,
verifier), certified by the task corpus invariants. A task's `memories` are never planted here:
they state, for the calibration agent, the fact the feedback reveals.

Stage entry points (none imports Prefect): `run_step` runs one task of one arm given the store the
previous step left (bytes) and returns its record and the store after ingestion, so an orchestrator
can cache each step on its inputs; `summarize` turns the steps into a `WritePathResult`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks_lib.agents.base import AgentRun
from tasks_lib.analysis.stats import StatsError, sign_flip_test
from tasks_lib.arm.comparability import arm_memory_config_digest
from tasks_lib.arm.steps import (
    MEMORY_FILE,
    REFERENCE_BUILD,
    ArmSetup,
    Attempt,
    CheckOutcome,
    ProvisionedMemory,
    audit_workspace,
    check_workspace,
    materialize_workspace,
    memory_env,
    record_attempt,
    run_agent,
    teardown_workspace,
)
from tasks_lib.artifacts import ArtifactStore
from tasks_lib.contracts import ContractModel, Document, Identifier, RunRecord, Turn, load_document
from tasks_lib.corpus.tasks import LoadedTask, load_task
from tasks_lib.errors import ContractError, MemtrialError
from tasks_lib.memory.adapter import MAX_TEXT_BYTES
from tasks_lib.memory.delivery.witness import DeliveryWitness
from tasks_lib.memory.realms import ensure_run_secret, trial_realm
from tasks_lib.memory.reference.store import SqliteMemoryStore

SEQUENCE_NAME = "sequence.json"
WritePathArm = Literal["off", "feed"]
ARMS: tuple[WritePathArm, ...] = ("off", "feed")
"""The suite's arms: no memory, and a memory system fed the agent's own sessions and the check's feedback."""
FEEDBACK_CHARS = 4000
"""How much of the failing check's output (its end, where the failing test's message is) is fed back."""


class WritePathError(MemtrialError):
    """A sequence is missing or malformed, or a step cannot run."""


class SequenceManifest(Document):
    """A write-path sequence: tasks on one project, run in this order."""

    KIND: ClassVar[str] = "write-path sequence"

    sequence_id: Identifier
    """Stable id of the sequence; equals its folder name."""
    tasks: tuple[Identifier, ...] = Field(min_length=2)
    """Task folders of the sequence, in the order they run; later ones need what earlier sessions revealed."""


class WritePathStep(ContractModel):
    """One task of the sequence under one arm."""

    sequence_id: Identifier
    """The sequence."""
    arm: WritePathArm
    """`off` or `feed`."""
    position: int = Field(ge=0)
    """0-based position of the task in the sequence."""
    record: RunRecord
    """The attempt's record (outcome, tokens, delivery)."""
    ingested_ids: tuple[str, ...] = ()
    """Ids the memory system kept from this step's transcript and feedback (empty under `off`)."""
    feedback: bool = False
    """True when the check failed and its output was fed back."""


class CurvePoint(ContractModel):
    """The learning curve at one position of the sequence."""

    position: int = Field(ge=0)
    """0-based position."""
    task_id: Identifier
    """The task there."""
    passed: dict[str, bool]
    """Arm -> whether the task passed."""
    tokens: dict[str, int]
    """Arm -> input plus output tokens."""


class LaterTaskEffect(ContractModel):
    """feed minus off over the later tasks (every position after the first), the task as the unit."""

    tasks: int = Field(ge=0)
    """Later tasks compared."""
    success_difference: float
    """Mean per-task difference in success (1 pass, 0 otherwise)."""
    success_interval: tuple[float, float] | None
    """95% sign-flip interval of that mean (None: too few tasks to compute one)."""
    token_difference: float
    """Mean per-task difference in tokens."""
    token_interval: tuple[float, float] | None
    """95% sign-flip interval of that mean (None: too few tasks)."""
    method: str
    """The test and interval in words."""


class WritePathResult(Document):
    """The suite's result for one sequence: every step, the learning curve and the later-task effect."""

    KIND: ClassVar[str] = "write-path result"

    sequence_id: Identifier
    """The sequence."""
    agent: str
    """The agent that ran it."""
    steps: tuple[WritePathStep, ...]
    """Every step, by arm then position."""
    curve: tuple[CurvePoint, ...]
    """Pass/fail and tokens per position and arm."""
    later: LaterTaskEffect
    """feed - off on the tasks after the first."""


# --------------------------------------------------------------------------- loading


def load_sequence(folder: Path) -> tuple[SequenceManifest, list[LoadedTask]]:
    """Read `folder/sequence.json` and its tasks, in order; raise WritePathError naming the file and field."""
    try:
        manifest = load_document(folder / SEQUENCE_NAME, SequenceManifest)
    except ContractError as error:
        raise WritePathError(str(error)) from None
    if manifest.sequence_id != folder.name:
        raise WritePathError(f"{folder / SEQUENCE_NAME}: sequence_id {manifest.sequence_id!r} differs from the folder name {folder.name!r}")
    if len(set(manifest.tasks)) != len(manifest.tasks):
        raise WritePathError(f"{folder / SEQUENCE_NAME}: tasks: a task appears twice; list each task once")
    missing = [t for t in manifest.tasks if not (folder / t).is_dir()]
    if missing:
        raise WritePathError(f"{folder / SEQUENCE_NAME}: tasks: no folder for {', '.join(missing)}; add it or drop it from the list")
    return manifest, [load_task(folder / t) for t in manifest.tasks]


# --------------------------------------------------------------------------- what is fed back


def session_turns(run: AgentRun) -> list[Turn]:
    """The agent's own session as turns: prompts, its messages and tool calls. What memory delivered
    (hook steps) and the runner's system notes are left out: a system learns from the work, not from itself."""
    turns = []
    for step in run.transcript.steps:
        if step.source == "user":
            role: Literal["user", "assistant", "tool"] = "user"
        elif step.source == "agent":
            role = "assistant" if step.kind == "message" else "tool"
        else:
            continue
        text = step.text.encode()[:MAX_TEXT_BYTES].decode(errors="ignore")
        if text.strip():
            turns.append(Turn(role=role, text=text))
    return turns


def feedback_turn(check: CheckOutcome) -> Turn | None:
    """The failing check's feedback as one tool turn (its output's end, where the failing test's message
    is); None when the check passed or did not run."""
    if not check.ran or check.exit_code == 0 or not check.output_tail.strip():
        return None
    return Turn(role="tool", text=f"The check failed (exit status {check.exit_code}):\n{check.output_tail[-FEEDBACK_CHARS:]}")


# --------------------------------------------------------------------------- one step


def sequence_realm(store: ArtifactStore, run_id: str, sequence_id: str) -> str:
    """The realm the sequence's memory lives in, the same for every step (derived like a trial realm,
    under the run's secret)."""
    return trial_realm(ensure_run_secret(store, run_id), run_id, sequence_id, "feed", 0)


def learned_memory(attempt: Attempt, realm: str, root: Path, previous: bytes | None, embedder: str) -> ProvisionedMemory:
    """The arm's memory for one step: under `feed`, the store the previous step left (a fresh one at
    the start) behind the delivery witness, every live id counted as planted; under `off`, none."""
    if attempt.condition == "off":
        return ProvisionedMemory(realm=realm, env=memory_env("off", realm, None), build="none")
    path = root / MEMORY_FILE
    if previous is None:
        with SqliteMemoryStore(path, embedder) as store:
            store.create_realm(realm)
    else:
        path.write_bytes(previous)
    with SqliteMemoryStore(path, embedder, create=False) as store:
        live = store.live_ids(realm)
    witness = DeliveryWitness(SqliteMemoryStore(path, create=False, read_only=True), realm, root,
                              served_by=REFERENCE_BUILD, planted_ids=live).start()
    return ProvisionedMemory(realm=realm, env=memory_env("feed", realm, witness.socket_path), planted_ids=live,
                             store_path=path, witness=witness, config_digest=arm_memory_config_digest("feed", embedder))


@dataclass(frozen=True)
class StepOutcome:
    """What `run_step` returns: the step, and the store after ingestion (None under `off`)."""

    step: WritePathStep
    store: bytes | None


def run_step(sequence_id: str, task: LoadedTask, arm: WritePathArm, position: int, setup: ArmSetup,
             previous: bytes | None) -> StepOutcome:
    """Run task `position` of the sequence under `arm` with the store `previous` left, then (under
    `feed`) ingest the agent's session and the check's feedback through the store's own write path.
    Nothing is forgotten between steps: what the system kept is what it learned."""
    if arm not in ARMS:
        raise WritePathError(f"arm {arm!r} is unknown; use {', '.join(ARMS)}")
    attempt = Attempt(task, arm, 0, position)
    workspace = materialize_workspace(attempt, setup.source)
    try:
        realm = sequence_realm(setup.store, setup.run_id, sequence_id)
        memory = learned_memory(attempt, realm, workspace.root, previous, setup.embedder)
        try:
            run = run_agent(attempt, workspace, memory, setup.agent_name, agent_options=setup.agent_options, sandbox=setup.sandbox)
        finally:
            if memory.witness is not None:
                memory.witness.close()
        receipt = audit_workspace(attempt, workspace)
        check = check_workspace(attempt, workspace, receipt, run, sandbox=setup.sandbox)
        record = record_attempt(attempt, run_id=setup.run_id, workspace=workspace, memory=memory, run=run, receipt=receipt,
                                check=check, agent_name=setup.agent_name, store=setup.store)
        feedback = feedback_turn(check)
        if memory.store_path is None:
            return StepOutcome(WritePathStep(sequence_id=sequence_id, arm=arm, position=position, record=record), None)
        turns = [*session_turns(run), *([feedback] if feedback else [])]
        with SqliteMemoryStore(memory.store_path, setup.embedder, create=False) as store:
            ids = store.ingest(realm, turns, session=f"{sequence_id}/{task.task_id}") if turns else ()
        step = WritePathStep(sequence_id=sequence_id, arm=arm, position=position, record=record, ingested_ids=ids,
                             feedback=feedback is not None)
        return StepOutcome(step, memory.store_path.read_bytes())
    finally:
        teardown_workspace(workspace)


def run_sequence(sequence_id: str, tasks: Sequence[LoadedTask], setup: ArmSetup) -> list[WritePathStep]:
    """Every arm over the whole sequence, in order, without caching (the flow caches each step)."""
    steps = []
    for arm in ARMS:
        previous: bytes | None = None
        for position, task in enumerate(tasks):
            outcome = run_step(sequence_id, task, arm, position, setup, previous)
            steps.append(outcome.step)
            previous = outcome.store
    return steps


# --------------------------------------------------------------------------- scoring


def _interval(diffs: Sequence[float]) -> tuple[tuple[float, float] | None, str]:
    try:
        test = sign_flip_test(diffs)
    except StatsError as error:
        return None, f"no interval: {error}"
    if not (math.isfinite(test.lower) and math.isfinite(test.upper)):
        return None, f"no interval: {test.method} is unbounded with {len(diffs)} task(s)"
    return (test.lower, test.upper), test.method


def summarize(sequence_id: str, agent: str, steps: Sequence[WritePathStep]) -> WritePathResult:
    """The learning curve and the later-task effect (feed - off per task, task-clustered) of `steps`."""
    by = {(s.arm, s.position): s for s in steps}
    positions = sorted({s.position for s in steps})
    missing = [(arm, p) for arm in ARMS for p in positions if (arm, p) not in by]
    if missing:
        raise WritePathError(f"sequence {sequence_id}: steps missing for {missing}; every arm runs every position")
    curve = []
    for p in positions:
        records = {arm: by[(arm, p)].record for arm in ARMS}
        curve.append(CurvePoint(position=p, task_id=records["off"].task_id,
                                passed={arm: r.outcome == "pass" for arm, r in records.items()},
                                tokens={arm: r.input_tokens + r.output_tokens for arm, r in records.items()}))
    later = [c for c in curve if c.position > 0]
    success = [float(c.passed["feed"]) - float(c.passed["off"]) for c in later]
    tokens = [float(c.tokens["feed"] - c.tokens["off"]) for c in later]
    success_interval, method = _interval(success) if later else (None, "no later tasks")
    token_interval, _ = _interval(tokens) if later else (None, "")
    effect = LaterTaskEffect(
        tasks=len(later),
        success_difference=sum(success) / len(later) if later else 0.0,
        success_interval=success_interval,
        token_difference=sum(tokens) / len(later) if later else 0.0,
        token_interval=token_interval,
        method=method,
    )
    ordered = sorted(steps, key=lambda s: (ARMS.index(s.arm), s.position))
    return WritePathResult(sequence_id=sequence_id, agent=agent, steps=tuple(ordered), curve=tuple(curve), later=effect)


def render_curve(result: WritePathResult) -> str:
    """The learning curve as a plain-text table (one line per position), then the later-task effect."""
    lines = [f"write-path sequence {result.sequence_id} ({result.agent}): position, task, passed off/feed, tokens off/feed"]
    for c in result.curve:
        lines.append(f"  {c.position}  {c.task_id:<24} {'pass' if c.passed['off'] else 'fail':>4} / {'pass' if c.passed['feed'] else 'fail':<4}"
                     f"  {c.tokens['off']:>6} / {c.tokens['feed']:<6}")
    e = result.later
    interval = f"[{e.success_interval[0]:+.2f}, {e.success_interval[1]:+.2f}]" if e.success_interval else "(no interval)"
    lines.append(f"  later tasks (n={e.tasks}): success feed - off {e.success_difference:+.2f} {interval}; "
                 f"tokens feed - off {e.token_difference:+.0f} per task")
    return "\n".join(lines)


__all__ = [
    "ARMS", "SEQUENCE_NAME", "CurvePoint", "LaterTaskEffect", "SequenceManifest", "StepOutcome", "WritePathError",
    "WritePathResult", "WritePathStep", "load_sequence", "run_sequence", "run_step", "summarize", "render_curve",
]
