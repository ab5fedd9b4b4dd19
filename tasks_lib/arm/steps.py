"""Running the arms: one task under one memory condition, one trial, end to end.

For every attempt: build the task's fixture from git objects into a fresh workspace and redact
it; snapshot it for the audit; plant the task's memories in a fresh store under a realm unique to
the trial (nothing under `off` or `ablate:all`) and put the runner's delivery witness in front of
them; run the agent with the visible prompt(s) only, memory reaching it through its hook and the
witness; audit the workspace; apply `hidden/`; run the check command (exit 0 = pass); confirm
delivery from the witness's receipt; store the transcript, the receipts and the record; and, in a
finalizer, forget every planted id by exact id and remove the workspace. Conditions are
interleaved within each task so that no condition always runs first.

Stage entry points (each typed, none imports Prefect). `run_attempt` is their one composition; an
orchestrator passes a `StepWrapper` to run each wrapped step (`STEP_NAMES`) its own way, e.g. as a
Prefect task (`flows.stages.run_arm`), instead of composing the stages again:

1. `materialize_workspace(attempt, source, templates=...) -> Workspace`: scratch root, redacted
   fixture, HOME, pre-run snapshot; pass one `WorkspaceTemplates` per matrix so each task's
   fixture is built from git objects once and copied per attempt (`run_matrix` does).
   Wrapped as `materialize-workspace`.
2. `provision_memory(attempt, run_id, workspace.root, embedder, provisioner) -> ProvisionedMemory`:
   realm, planted ids and the agent's memory environment (nothing under `off` or `ablate:all`, a
   replica without the lane's data under `ablate:<lane>`); with a `ProvisionerSpec` the memory
   system's provisioner restores the memories instead of the embedded store, and proves them
   present before the agent runs (see `provisioned_arm`).
   Wrapped as `provision-memory`.
3. `run_agent(attempt, workspace, memory, agent_name, ...) -> AgentRun`, within the task's
   `agent_timeout_seconds` (part of its manifest, so of the arm's identity). Wrapped as `run-agent`.
4. `release_memory(memory, embedder)`: forget the planted ids by exact id, or destroy the
   provisioner's project (call it in a finally; never wrapped).
5. `audit_workspace(attempt, workspace) -> AuditReceipt`. Wrapped as `audit-mutations`.
6. `check_workspace(attempt, workspace, receipt, run, sandbox=...) -> CheckOutcome`: `hidden/`
   (never through a symlink the agent made) then the check in a fresh sandbox of the agent's kind
   (see `sandboxed_check`), only after a passed audit and no infrastructure failure. Wrapped as
   `check-workspace`.
7. `record_attempt(attempt, ..., store) -> RunRecord`: grade, confirm delivery from the witness's
   receipt, store the transcript, the audit and delivery receipts and the record. Wrapped as `record-arm`.
8. `teardown_workspace(workspace)`: remove the scratch root (call it in a finally; never wrapped).
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, ParamSpec, Protocol, TypeVar, get_args

import pyarrow as pa

from tasks_lib.agents.base import Agent, AgentRun, AgentSession
from tasks_lib.agents.calibration import CalibrationAgent
from tasks_lib.agents.calibration_plan import (
    feed_key_texts,
    ingest_feed,
    key_texts,
    misleading_texts,
)
from tasks_lib.agents.registry import get_agent
from tasks_lib.arm.audit import AuditReceipt, TreeSnapshot, audit
from tasks_lib.arm.comparability import arm_memory_config_digest, record_fields
from tasks_lib.arm.history import HISTORY_DIR, release_history, write_history
from tasks_lib.arm.injection import confirm_delivery
from tasks_lib.arm.judged_check import run_judged_check
from tasks_lib.arm.pinned import PinnedTask, PinnedTaskError, check_pinned, pin_task
from tasks_lib.arm.provisioned import (
    LiveArm,
    provisioner_uid,
    release,
    replica_copy,
    restore_arm,
    restore_feed,
)
from tasks_lib.arm.sandboxed_check import SandboxedCheck, run_sandboxed_check, sandbox_options_of
from tasks_lib.arm.workspace import WorkspaceTemplates, build_redacted
from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.budget.errors import BudgetError
from tasks_lib.conditions import (
    NO_MEMORY_SYSTEM,
    UnknownCondition,
    applies,
    planted_memories,
    spec_of,
)
from tasks_lib.contracts import ATTEMPT_ERROR, RunRecord, check_rel_path
from tasks_lib.corpus.certify import certify_home
from tasks_lib.corpus.feed import feed_documents
from tasks_lib.corpus.packs import pack_cache_root
from tasks_lib.corpus.tasks import LoadedTask, OverlayRefused, overlay
from tasks_lib.corpus.upstream import fixture_origin
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.notes import NOTES_PATHS, NotesDelivery
from tasks_lib.memory.delivery.witness import DeliveryWitness, ServedSystem
from tasks_lib.memory.env import HISTORY_ENV, REALM_ENV, SOCKET_ENV, STORE_ENV, STORE_PATHS
from tasks_lib.memory.planting import plant
from tasks_lib.memory.provisioner.client import ProvisionerSpec
from tasks_lib.memory.realms import ensure_run_secret, new_run_secret, trial_realm
from tasks_lib.memory.reference.replica import strip_lanes
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.run.layout import (
    AUDIT_JSON,
    CHECK_TXT,
    DELIVERY_JSON,
    RECORD_JSON,
    RECORDS_TABLE,
    TRANSCRIPT_JSON,
    attempt_parts,
)
from tasks_lib.run.provenance import run_provenance, write_provenance
from tasks_lib.run.seal import seal_run
from tasks_lib.sandbox.fstree import remove_tree
from tasks_lib.settings import RUNNER_STATE

HOOK_ARGV = (sys.executable, "-m", "tasks_lib.memory.delivery.hook")
"""The memory delivery hook every agent's prompt/session hooks call."""
REFERENCE_BUILD = "memtrial-reference/0.1.0"
MEMORY_FILE = "memory.sqlite"
"""The attempt's memory store, in the runner-owned scratch root (never inside the workspace)."""
PROVISIONER_REPLICA = "provisioner-replica.sqlite"
"""The runner's copy of a provisioner's exported replica file, in the scratch root (what is stripped and served)."""
HOME_DIR = "home"
"""The arm's private HOME inside the scratch root (where the notes arm's harness finds its notes file)."""


StepName = Literal["materialize-workspace", "provision-memory", "run-agent", "audit-mutations", "check-workspace", "record-arm"]
STEP_NAMES: tuple[StepName, ...] = get_args(StepName)
"""The stages `run_attempt` calls through its `StepWrapper`, in the order they run."""

P = ParamSpec("P")
R = TypeVar("R")


class ArmsError(MemtrialError):
    """A paired run cannot be set up (bad condition, unknown task, ...)."""


@dataclass(frozen=True)
class Attempt:
    """One cell of the matrix."""

    task: LoadedTask
    condition: str
    trial: int
    order: int


@dataclass(frozen=True)
class TaskSource:
    """Where fixtures are built from: a repository, a commit, and the tasks folder inside it."""

    repo_root: Path
    commit: str
    tasks_subdir: str

    def task_subdir(self, task: LoadedTask) -> str:
        """The task's folder inside the repository."""
        return f"{self.tasks_subdir}/{task.root.name}"

    def fixture_subdir(self, task: LoadedTask) -> str:
        """The task's fixture folder inside the repository."""
        return f"{self.task_subdir(task)}/{task.manifest.fixture}"


@dataclass(frozen=True)
class ArmSetup:
    """What every attempt of one run shares: the run, the fixtures' source, the agent, the memory side, the store."""

    run_id: str
    """Run the attempts belong to (artifacts under runs/<run_id>/; trial realms derive from it under its secret)."""
    source: TaskSource
    """Repository, commit and tasks folder the fixtures are built from."""
    agent_name: str
    """Registry name of the agent (`calibration` is built from the task's runner-owned files)."""
    store: ArtifactStore
    """Where transcripts, audit receipts and records go."""
    agent_options: Mapping[str, object] = field(default_factory=dict)
    """Keyword options the agent is built with."""
    embedder: str = "hashed"
    """Embedder of the embedded reference store."""
    sandbox: str = "local"
    """Where the agent's commands run."""
    sandbox_options: Mapping[str, str] = field(default_factory=dict)
    """How the run config builds that provider (`docker`: engine and image); an agent's own `sandbox_options` win."""
    provisioner: ProvisionerSpec | None = None
    """A memory system's provisioner that holds the memories instead of the embedded store."""
    source_commit: str | None = None
    """The record's source commit when the source has no history (a corpus pack); else read from the checkout."""


@dataclass(frozen=True)
class Workspace:
    """An attempt's scratch area: the runner-owned root, the agent's workspace and HOME inside it."""

    root: Path
    """Runner-owned scratch folder (memory store, workspace, HOME); removed by `teardown_workspace`."""
    workspace: Path
    """The redacted fixture the agent works in."""
    home: Path
    """The arm's private HOME."""
    corpus_id: str
    """Identity of the fixture tree built from git objects."""
    before: TreeSnapshot
    """The workspace snapshot taken before the agent started, for the mutation audit."""
    pinned: PinnedTask
    """The task's task.json, verifier and hidden/ from the commit's git objects, in the runner-owned root."""


@dataclass(frozen=True)
class ProvisionedMemory:
    """The memory side of one attempt."""

    realm: str
    """The trial's canonical realm."""
    env: Mapping[str, str]
    """Environment the agent and its hooks get (the realm; the store only in an arm with memory)."""
    planted_ids: tuple[str, ...] = ()
    """Ids returned by planting, for teardown by exact id (empty under `off`)."""
    store_path: Path | None = None
    """The store the memories were planted in (None when nothing was planted)."""
    live: LiveArm | None = None
    """The provisioner's restored project, when a memory system's provisioner holds the memories."""
    build: str = REFERENCE_BUILD
    """The memory-system build measured."""
    config_digest: str | None = None
    """The memory config digest of the arm (`comparability.arm_memory_config_digest`; None without a memory system)."""
    witness: DeliveryWitness | NotesDelivery | None = None
    """The runner's delivery witness in front of the memory, or the notes arm's notes file (None in an
    arm without memory)."""
    history: Mapping[str, str] | None = None
    """The `grep` arm's read-only folder of transcripts: file name -> sha256 (None in every other arm)."""
    violations: list[str] = field(default_factory=list)
    """What `release_memory` found the agent changed in runner-owned memory state (fails the attempt)."""


@dataclass(frozen=True)
class CheckOutcome:
    """Result of applying `hidden/` and running the check command."""

    exit_code: int | None = None
    """Exit status of the check (None: not run, timed out, or could not start)."""
    ran: bool = False
    """True when the check ran to an exit status or a timeout."""
    output_tail: str = field(default="", repr=False)
    """The last characters of its output."""
    sandboxed: SandboxedCheck | None = field(default=None, repr=False)
    """Where and how the check ran (None when no check was attempted)."""
    refused: str | None = None
    """Why `hidden/` could not be applied: the workspace put a symlink or a file where a runner-owned
    path goes (the agent's violation; nothing was written through it)."""


NO_MEMORY = NO_MEMORY_SYSTEM
"""Conditions whose arm reaches no memory system: nothing planted in a store, no store file, no store
variable (the notes arm's memory is a file its harness loads, `tasks_lib.memory.delivery.notes`; `grep`
gets only its read-only folder of transcripts, `tasks_lib.arm.history`)."""


def _identity_fields(fields: dict[str, str | None], source_commit: str | None) -> dict[str, Any]:
    """`record_fields` with the task's source commit when one is known (the record's identity fields)."""
    return {**fields, **({"source_commit": source_commit} if source_commit else {})}


def memory_env(condition: str, realm: str, socket_path: Path | None, history: Path | None = None) -> dict[str, str]:
    """The environment the agent and its hooks get for `condition`: the realm in every condition, the
    delivery witness's socket only when one is given and the condition has memory, and the history
    folder only under `grep`. No switch is ever set: an arm differs from `on` only by the memory behind
    its socket (none, or one without a lane), or by the one folder the `grep` arm may read."""
    env = {REALM_ENV: realm}
    if condition == "grep" and history is not None:
        env[HISTORY_ENV] = str(history)
    if condition not in NO_MEMORY and socket_path is not None:
        env[SOCKET_ENV] = str(socket_path)
    return env


def skipped_cells(tasks: Sequence[LoadedTask], conditions: Sequence[str]) -> list[tuple[str, str]]:
    """(task, condition) cells the matrix skips: placebo, harm, feed and grep conditions on a task that
    carries no planted state (or transcripts) for them (`tasks_lib.conditions.applies`); every other cell runs."""
    return [(t.task_id, c) for t in tasks for c in conditions if not applies(t.manifest, c)]


def schedule(tasks: Sequence[LoadedTask], conditions: Sequence[str], trials: int) -> list[Attempt]:
    """Every task x condition x trial, conditions rotated each trial so order effects cancel; a cell
    the task carries no planted state for is skipped (see `skipped_cells`)."""
    if trials < 1:
        raise ArmsError(f"trials: must be at least 1, got {trials}")
    if not conditions:
        raise ArmsError("conditions: name at least one (off, on, notes, placebo, harm:<state>, feed, grep, ablate:<lane>, ablate:all)")
    plan: list[Attempt] = []
    for task in tasks:
        order = 0
        for trial in range(trials):
            shift = trial % len(conditions)
            for condition in list(conditions[shift:]) + list(conditions[:shift]):
                if not applies(task.manifest, condition):
                    continue
                plan.append(Attempt(task, condition, trial, order))
                order += 1
    return plan


# --------------------------------------------------------------------------- stages


def materialize_workspace(
    attempt: Attempt, source: TaskSource, scratch_parent: Path | None = None, templates: WorkspaceTemplates | None = None
) -> Workspace:
    """Stage 1: a fresh scratch root holding the task's fixture (built from git objects, redacted),
    an empty HOME, and the pre-run snapshot. With `templates`, the fixture is built once per task
    and copied (see `workspace_templates`). Nothing is left behind when it fails."""
    root = Path(tempfile.mkdtemp(dir=scratch_parent))  # a neutral name: the replica below it is mounted at its own path
    try:
        workspace, home = root / "workspace", root / HOME_DIR
        home.mkdir()
        pinned = pin_task(attempt.task, source.repo_root, source.commit, source.task_subdir(attempt.task), root / "runner")
        origin = fixture_origin(source.repo_root, source.commit, source.task_subdir(attempt.task), pinned.task.manifest)
        if templates is not None:
            corpus_id, before = templates.materialize(origin.repo, origin.commit, origin.subdir, workspace)
        else:
            corpus_id, before = build_redacted(origin.repo, origin.commit, origin.subdir, workspace)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return Workspace(root=root, workspace=workspace, home=home, corpus_id=corpus_id, before=before, pinned=pinned)


def provision_memory(attempt: Attempt, run_id: str, root: Path, embedder: str = "hashed",
                     provisioner: ProvisionerSpec | None = None, *, secret: bytes | None = None) -> ProvisionedMemory:
    """Stage 2: plant the task's memories in a fresh store under `root`, in the trial's realm, or
    have `provisioner` restore them (see `provisioned_arm`), and put the runner's delivery witness
    (`tasks_lib.memory.delivery.witness`) in front of them: the agent and its hooks get the
    witness's socket and the realm, never the store or the provisioner's own socket. What counts as
    delivered: a planted id of the embedded store, or, for a provisioner (whose ids are its own), a
    memory served with the exact text of one of the task's memories.

    The memories are the ones `attempt.condition` plants (`tasks_lib.conditions.planted_memories`: the
    task's own, its placebo set or a harm variant). Under `notes` they are written as the notes file the
    agent's harness loads from its HOME (`tasks_lib.memory.delivery.notes`), with no memory system; the
    HOME is certified before the agent starts in every arm (`check_home`: a notes file only there).
    Under `grep` the task's transcripts are copied into a read-only runner-owned folder named only in
    the arm's environment (`tasks_lib.arm.history`), with no memory system; under `feed` the memory
    system holds what its own write path kept of them (`provision_feed`).
    Under `off` and `ablate:all` (or with no memories) nothing is planted, no store file is made, no
    witness runs and the environment names no store. Under `ablate:<lane>` the reference store is
    planted, then stripped of that lane's data (see `strip_lanes`), and the witness drops the lane
    from every recall (the one enforcement a served system needs). Pair with `release_memory` in a
    finally.

    The realm is keyed by `secret`, the run's realm secret (`ensure_run_secret`; `run_attempt` passes
    it); without one a fresh secret is drawn, for a lone attempt outside a run (its realm then cannot
    be repeated). The result carries the arm's memory config digest (`arm_memory_config_digest`), which
    its record puts in the comparability key.

    Raises ArmsError when a provisioner exports neither a socket nor a store file (delivery could not
    be witnessed), and MemoryServerError when the witness cannot listen.
    """
    config = arm_memory_config_digest(attempt.condition, embedder, provisioner.argv if provisioner else (),
                                      provisioner.env if provisioner else None)
    realm = trial_realm(new_run_secret() if secret is None else secret, run_id, attempt.task.task_id, attempt.condition,
                        attempt.trial)
    return replace(_provision(attempt, realm, root, embedder, provisioner), config_digest=config)


def _provision(attempt: Attempt, realm: str, root: Path, embedder: str, provisioner: ProvisionerSpec | None) -> ProvisionedMemory:
    """`provision_memory` in `realm`, without the config digest."""
    build = REFERENCE_BUILD if provisioner is None else "provisioner: " + " ".join(provisioner.argv)
    try:
        spec, memories = spec_of(attempt.condition), planted_memories(attempt.task.manifest, attempt.condition)
    except UnknownCondition as error:
        raise ArmsError(str(error)) from None
    home = root / HOME_DIR
    if spec.delivery == "notes-file" and memories:
        notes = NotesDelivery(home, realm, memories).start()
        check_home(home, {rel: notes.text for rel in NOTES_PATHS})
        return ProvisionedMemory(realm=realm, env=memory_env(attempt.condition, realm, None), planted_ids=notes.ids,
                                 build=build, witness=notes)
    check_home(home, None)
    if spec.delivery == "history-folder":
        history = write_history(attempt.task, root)
        return ProvisionedMemory(realm=realm, env=memory_env(attempt.condition, realm, None, root / HISTORY_DIR),
                                 build="none", history=history)
    if spec.planted == "feed":
        return provision_feed(attempt, realm, root, embedder, provisioner, build)
    if spec.delivery == "none" or not memories:
        return ProvisionedMemory(realm=realm, env=memory_env(attempt.condition, realm, None), build=build)
    lane = attempt.condition.removeprefix("ablate:") if attempt.condition.startswith("ablate:") else None
    ablated = (lane,) if lane else ()
    texts = [m.text for m in memories]
    if provisioner is not None:
        live = restore_arm(provisioner, attempt.task.task_id, memories, realm, root)
        return witnessed_provisioner(live, attempt.condition, realm, root, build, texts, lane)
    store_path = root / MEMORY_FILE
    store = SqliteMemoryStore(store_path, embedder, durable=False)  # the attempt's own: gone at teardown
    try:
        store.create_realm(realm)
        ids = plant(store, realm, memories)
    finally:
        store.close()
    if lane is not None:
        strip_lanes(store_path, [lane])
    witness = DeliveryWitness(SqliteMemoryStore(store_path, create=False, read_only=True), realm, root,
                              served_by=REFERENCE_BUILD, ablated_lanes=ablated, planted_ids=ids, planted_texts=texts).start()
    return ProvisionedMemory(realm=realm, env=memory_env(attempt.condition, realm, witness.socket_path), planted_ids=ids,
                             store_path=store_path, witness=witness)


def check_home(home: Path, notes: dict[str, str] | None) -> None:
    """Certify the arm's HOME before the agent starts (`certify_home`): a notes file only in the notes
    arm, only the runner's. Raises ArmsError naming every finding."""
    findings = certify_home(home, notes)
    if findings:
        listed = "; ".join(f"{f.path}: {f.kind} ({f.detail})" for f in findings)
        raise ArmsError(f"{home}: the arm's HOME does not certify before the agent starts: {listed}")


def witnessed_provisioner(live: LiveArm, condition: str, realm: str, root: Path, build: str, texts: Sequence[str],
                          lane: str | None) -> ProvisionedMemory:
    """A provisioner's restored project behind the delivery witness (delivered: a memory served with one
    of `texts` exactly; `lane` dropped from every recall); the project is destroyed when this fails."""
    try:
        served, label = provisioned_store(live, lane, root)
        witness = DeliveryWitness(served, realm, root, served_by=label, ablated_lanes=(lane,) if lane else (),
                                  planted_texts=list(texts)).start()
    except BaseException:
        release(live.provisioner, live.project)
        raise
    env = {k: v for k, v in live.env.items() if k not in STORE_PATHS}
    return ProvisionedMemory(realm=realm, env={**env, **memory_env(condition, realm, witness.socket_path)},
                             live=live, build=build, witness=witness)


def provision_feed(attempt: Attempt, realm: str, root: Path, embedder: str, provisioner: ProvisionerSpec | None,
                   build: str) -> ProvisionedMemory:
    """The `feed` arm: the memory system holds what it kept from the task's transcripts (each fed
    through its own write path, `MemoryAdapter.ingest`; a provisioner's restore receives them as its
    evidence corpus, see `restore_feed`), not the curated memories; the witness stands in front of it
    as under `on`, with every kept id (the embedded store) or every turn's exact text (a provisioner)
    as planted. A system that keeps nothing serves nothing. Raises FeedError for a task without
    transcripts (nothing is made)."""
    sessions = [(name, turns) for name, _, turns in feed_documents(attempt.task.root, attempt.task.manifest, "feed")]
    if provisioner is not None:
        live = restore_feed(provisioner, attempt.task.task_id, sessions, realm, root)
        return witnessed_provisioner(live, "feed", realm, root, build, [t.text for _, turns in sessions for t in turns], None)
    store_path = root / MEMORY_FILE
    store = SqliteMemoryStore(store_path, embedder, durable=False)  # the attempt's own: gone at teardown
    try:
        store.create_realm(realm)
        ids = ingest_feed(store, realm, attempt.task)
    finally:
        store.close()
    witness = DeliveryWitness(SqliteMemoryStore(store_path, create=False, read_only=True), realm, root,
                              served_by=REFERENCE_BUILD, planted_ids=ids).start()
    return ProvisionedMemory(realm=realm, env=memory_env("feed", realm, witness.socket_path), planted_ids=ids,
                             store_path=store_path, witness=witness, build=build)


def provisioned_store(live: LiveArm, lane: str | None, root: Path) -> tuple[SqliteMemoryStore | ServedSystem, str]:
    """What the witness serves for a provisioner's restored project, and a label naming it: its socket
    (relayed; the witness drops an ablated lane), or else a runner-owned copy of its replica file in `root`
    (`replica_copy`: stripped of the lane, then opened read-only; the provisioner's file is never edited).
    Raises ArmsError when it exported neither."""
    socket_path, store = live.env.get(SOCKET_ENV, ""), live.env.get(STORE_ENV, "")
    if socket_path:
        return ServedSystem(socket_path), "provisioner socket"
    if not store:
        raise ArmsError(f"provisioner project {live.project!r}: restore exported neither {SOCKET_ENV} nor {STORE_ENV}, "
                        "so delivery to the agent could not be witnessed; have the provisioner export one of them")
    copy = replica_copy(store, root / PROVISIONER_REPLICA, provisioner_uid(live.provisioner))
    if lane is not None:
        strip_lanes(copy, [lane])
    return SqliteMemoryStore(copy, create=False, read_only=True), "provisioner replica file"


def release_memory(memory: ProvisionedMemory, embedder: str = "hashed") -> tuple[str, ...]:
    """Stage 4: stop the delivery witness (its receipt stays on `memory.witness`), then forget every
    planted id by exact id (return them), or destroy the provisioner's project."""
    if memory.witness is not None:
        memory.witness.close()
    if memory.history is not None and (problem := release_history(Path(memory.env[HISTORY_ENV]).parent, dict(memory.history))):
        memory.violations.append(problem)
    if memory.live is not None:
        release(memory.live.provisioner, memory.live.project)
        return ()
    if not memory.planted_ids or memory.store_path is None:
        return ()
    with SqliteMemoryStore(memory.store_path, embedder) as store:
        return store.forget(memory.planted_ids)


@contextmanager
def planted_memory(attempt: Attempt, run_id: str, root: Path, embedder: str) -> Iterator[tuple[dict[str, str], tuple[str, ...]]]:
    """Plant the task's memories for this attempt (not under `off`); forget them by exact id after."""
    memory = provision_memory(attempt, run_id, root, embedder)
    try:
        yield dict(memory.env), memory.planted_ids
    finally:
        release_memory(memory, embedder)


def make_agent(name: str, task: LoadedTask, options: Mapping[str, object], condition: str = "on") -> Agent:
    """The agent for one attempt; the calibration agent is built from the task's runner-owned files and
    the memories `condition` plants (its stale values; see `misleading_texts`)."""
    if name == "calibration":
        memories = task.manifest.memories
        return CalibrationAgent(
            solution_dir=task.solution_dir,
            kind=task.manifest.kind,
            key_texts=key_texts(task),
            stale_texts=[m.text for m in memories if m.kind == "superseded"],
            correction_texts=[m.text for m in memories if m.kind == "correction"],
            misleading_texts=misleading_texts(planted_memories(task.manifest, condition)) if applies(task.manifest, condition) else (),
            feed_texts=feed_key_texts(task),
        )
    return get_agent(name, **options)


def runner_owned_paths(task: LoadedTask) -> tuple[Path, ...]:
    """What an agent must never see: the task corpus folder (every task's hidden tests, solution and
    manifest), the checkout holding it (its git history, the runner's state and artifacts under
    .memtrial/), the local cache of corpus packs (every task of every revision a worker fetched) and
    the artifact root or memtrial home named in the environment."""
    paths = [task.root.parent]
    checkout = next((p for p in task.root.parents if (p / ".git").exists()), None)
    if checkout is not None:
        paths.append(checkout)
    if pack_cache_root().exists():
        paths.append(pack_cache_root())
    for setting in RUNNER_STATE:
        value = setting.text()
        if value and "://" not in value:
            paths.append(Path(value))
    return tuple(dict.fromkeys(p.absolute() for p in paths))


def run_agent(
    attempt: Attempt,
    workspace: Workspace,
    memory: ProvisionedMemory,
    agent_name: str,
    *,
    agent_options: Mapping[str, object] | None = None,
    sandbox: str = "local",
    sandbox_options: Mapping[str, str] | None = None,
) -> AgentRun:
    """Stage 3: run the agent over the visible prompt(s) within the task's `agent_timeout_seconds`;
    its wall time is measured here when it reports none."""
    task = attempt.task
    agent = make_agent(agent_name, task, agent_options or {}, attempt.condition)
    session = AgentSession(
        workspace=workspace.workspace,
        home=workspace.home,
        prompts=(task.manifest.instruction, *task.manifest.follow_up_prompts),
        env=dict(memory.env),
        hook_argv=HOOK_ARGV,
        timeout_seconds=task.manifest.agent_timeout_seconds,
        sandbox=sandbox,
        sandbox_options=dict(sandbox_options or {}),
        hidden_paths=runner_owned_paths(task),
    )
    started = time.monotonic()
    run = agent.run(session)
    if not run.wall_seconds:
        run = run.model_copy(update={"wall_seconds": round(time.monotonic() - started, 3)})
    return run


def audit_workspace(attempt: Attempt, workspace: Workspace) -> AuditReceipt:
    """Stage 5: the mutation audit of the finished workspace against its pre-run snapshot."""
    return audit(workspace.before, workspace.workspace, attempt.task.manifest.allowed_output_paths)


def check_workspace(attempt: Attempt, workspace: Workspace, receipt: AuditReceipt, run: AgentRun, *,
                    sandbox: str = "local", sandbox_options: Mapping[str, object] | None = None) -> CheckOutcome:
    """Stage 6: apply `hidden/` and run the check in a fresh `sandbox` (the agent's provider, built
    with `sandbox_options`), only after a passed audit and a run without infrastructure failure
    (otherwise the check is not run and nothing is applied). Both come from the files pinned from
    git objects, re-hashed first (`tasks_lib.arm.pinned`); a pinned file that changed makes the
    check not run, so the attempt is ungradable. `hidden/` that cannot be applied without following
    a symlink the agent made fails the attempt, naming it."""
    if not receipt.passed or run.infra_failure:
        return CheckOutcome()
    try:
        check_pinned(workspace.pinned)
    except PinnedTaskError as error:
        return CheckOutcome(output_tail=f"[{error}]")
    task = workspace.pinned.task
    if task.manifest.judge == "apart":  # hidden/ stays out of the workspace: only the judge sees it
        judged = run_judged_check(task, workspace.workspace, sandbox, sandbox_options)
        return CheckOutcome(exit_code=judged.exit_code, ran=judged.ran, output_tail=judged.output_tail, sandboxed=judged)
    try:
        overlay(task.hidden_dir, workspace.workspace)
    except OverlayRefused as error:
        return CheckOutcome(refused=str(error))
    check = run_sandboxed_check(task, workspace.workspace, sandbox, sandbox_options)
    return CheckOutcome(exit_code=check.exit_code, ran=check.ran, output_tail=check.output_tail, sandboxed=check)


def _grade(run: AgentRun, receipt: AuditReceipt | None, check: CheckOutcome) -> tuple[str, bool, str | None]:
    """(outcome, infra_failure, reason): nothing passes without a passed audit, a sandboxed check and a zero exit."""
    if run.infra_failure:
        return "ungradable", True, f"agent infrastructure: {run.infra_failure}"
    if receipt is None:
        return "ungradable", True, "the mutation audit did not run"
    if not receipt.passed:
        if receipt.limit_breach is not None:
            return "fail", False, f"mutation audit: {receipt.limit_breach.describe()}"
        return "fail", False, f"mutation audit: {len(receipt.violations)} change(s) outside the allowed paths"
    if check.refused is not None:
        return "fail", False, f"hidden/ not applied: {check.refused}"
    if check.sandboxed is not None and check.sandboxed.problem is not None:
        return "ungradable", True, check.sandboxed.problem
    if not check.ran:
        return "ungradable", True, "the check command could not run"
    if check.exit_code is None:
        return "fail", False, "check timed out"
    if check.exit_code != 0:
        return "fail", False, "check failed"
    post_turn = check.sandboxed.post_turn if check.sandboxed is not None else None
    if post_turn is None or not post_turn.passed:
        return "fail", False, f"post-turn tests not proven: {post_turn.problem if post_turn else 'the harness gave no verdict'}"
    return "pass", False, None


def check_text(check: CheckOutcome) -> str | None:
    """What `check.txt` holds: the check's exit status, sandbox, post-turn verdict and output tails;
    None when no check was attempted (a failed audit or an infrastructure failure)."""
    sandboxed = check.sandboxed
    if sandboxed is None and check.refused is None and not check.output_tail:
        return None
    verdict = sandboxed.post_turn if sandboxed is not None else None
    lines = [
        f"exit code: {'none (not run, timed out or could not start)' if check.exit_code is None else check.exit_code}",
        f"sandbox: {sandboxed.sandbox if sandboxed is not None and sandboxed.sandbox else 'none'}",
        *(f"unenforced: {u}" for u in (sandboxed.unenforced if sandboxed is not None else ())),
        *([f"problem: {sandboxed.problem}"] if sandboxed is not None and sandboxed.problem else []),
        *([f"hidden/ not applied: {check.refused}"] if check.refused else []),
        "post-turn verdict: " + ("none" if verdict is None else
                                 f"{'passed' if verdict.passed else 'not passed'}, {verdict.cases_passed}/{verdict.cases_expected} "
                                 f"case(s){'; ' + verdict.problem if verdict.problem else ''}"),
        "", "--- stderr (tail) ---", check.output_tail,
        "", "--- stdout (tail) ---", sandboxed.stdout_tail if sandboxed is not None else "",
    ]
    return "\n".join(lines).rstrip("\n") + "\n"


def attempt_prefix(attempt: Attempt) -> tuple[str, ...]:
    """Key parts under `runs/<run_id>/` where an attempt's transcript, receipt and record go."""
    return attempt_parts(attempt.task.task_id, attempt.condition, attempt.trial)


def record_attempt(
    attempt: Attempt,
    *,
    run_id: str,
    workspace: Workspace,
    memory: ProvisionedMemory,
    run: AgentRun,
    receipt: AuditReceipt,
    check: CheckOutcome,
    agent_name: str,
    store: ArtifactStore,
    source_commit: str | None = None,
) -> RunRecord:
    """Stage 7: grade, confirm injection, and store the transcript, the audit receipt, the check's
    output (`check.txt`, when a check was attempted) and the record (with `source_commit` when the
    task's files came from a corpus pack, which has no history, and the host and PID that ran it)."""
    task = attempt.task
    prefix = attempt_prefix(attempt)
    outcome, infra, reason = _grade(run, receipt, check)
    if memory.violations and not infra:
        outcome, reason = "fail", "; ".join(memory.violations)
    delivery = memory.witness.close() if memory.witness is not None else None
    planted = delivery.planted_ids if delivery is not None and delivery.planted_ids else memory.planted_ids  # as served
    injection = confirm_delivery(delivery, run.transcript)
    transcript_key = run_key(run_id, *prefix, TRANSCRIPT_JSON)
    receipt_key = run_key(run_id, *prefix, AUDIT_JSON)
    store.put_json(transcript_key, run.transcript)
    store.put_json(receipt_key, receipt)
    delivery_key = check_key = None
    if delivery is not None:
        delivery_key = run_key(run_id, *prefix, DELIVERY_JSON)
        store.put_json(delivery_key, delivery)
    if (check_output := check_text(check)) is not None:
        check_key = run_key(run_id, *prefix, CHECK_TXT)
        store.put_bytes(check_key, check_output.encode("utf-8"))
    record = RunRecord(
        run_id=run_id,
        task_id=task.task_id,
        task_kind=task.manifest.kind,
        condition=attempt.condition,
        trial=attempt.trial,
        order=attempt.order,
        agent=agent_name,
        calibration=agent_name == "calibration",
        corpus_id=workspace.corpus_id,
        outcome=outcome,  # type: ignore[arg-type]
        infra_failure=infra,
        failure_reason=reason,
        check_exit_code=check.exit_code,
        audit_passed=receipt.passed,
        input_tokens=run.input_tokens,
        output_tokens=run.output_tokens,
        cost_usd=run.cost_usd,
        wall_seconds=run.wall_seconds,
        transcript=transcript_key,
        injection=injection.confirmed,
        injection_channel=",".join(injection.channels) or None,
        planted_ids=planted,
        delivered_ids=injection.memory_ids,
        served_ids=delivery.served_ids() if delivery is not None else (),
        unwitnessed_ids=injection.unwitnessed_ids,
        delivery_receipt=delivery_key,
        delivery_nonce=delivery.nonce if delivery is not None else None,
        witness_flooded=delivery.flooded if delivery is not None else False,
        audit_receipt=receipt_key,
        check_output=check_key,
        check_sandbox=check.sandboxed.sandbox if check.sandboxed is not None else None,
        check_unenforced=check.sandboxed.unenforced if check.sandboxed is not None else (),
        agent_unenforced=run.sandbox_unenforced,
        judge=check.sandboxed.judge if check.sandboxed is not None else None,
        build_under_test=memory.build,
        memory_config_digest=memory.config_digest,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        **_identity_fields(record_fields(workspace.pinned.task, agent_name, run.model, source_root=task.root),
                           source_commit),
    )
    store.put_json(run_key(run_id, *prefix, RECORD_JSON), record)
    return record


def teardown_workspace(workspace: Workspace) -> None:
    """Stage 8: remove the attempt's scratch root (workspace, HOME, memory store), by folder descriptor
    (`remove_tree`: a tree deeper than Python's recursion limit or PATH_MAX goes too)."""
    try:
        remove_tree(workspace.root)
    except OSError:
        pass  # the runner's own scratch folder: what could not be removed is only disk, never evidence


class StepWrapper(Protocol):
    """How `run_attempt` calls each stage of `STEP_NAMES`: `wrap(name, step)` returns a callable with
    the step's own signature (the default, `call_step`, returns the step itself; `flows.stages` returns
    it as a plain call that marks the stage `name`). The callable must call `step` once with the arguments it
    gets and return its result, or raise; whatever it raises, `run_attempt` still releases the
    memories and tears the workspace down."""

    def __call__(self, name: StepName, step: Callable[P, R], /) -> Callable[P, R]: ...


def call_step(name: StepName, step: Callable[P, R], /) -> Callable[P, R]:
    """The default `StepWrapper`: every stage called as it is."""
    return step


class AttemptBroke(MemtrialError):
    """One attempt's own step raised: that attempt is ungradable, the run goes on."""

    def __init__(self, step: StepName, error: BaseException) -> None:
        detail = str(error)
        if len(detail) > MAX_ERROR_CHARS:
            detail = detail[: MAX_ERROR_CHARS // 2] + " [...] " + detail[-MAX_ERROR_CHARS // 2 :]
        super().__init__(f"{ATTEMPT_ERROR}{step}: {type(error).__name__}: {detail}")
        self.step = step


MAX_ERROR_CHARS = 600
"""Characters of an attempt's error kept in its record (a path past PATH_MAX is longer than that)."""

RUN_ERRORS: tuple[type[BaseException], ...] = (BudgetError,)
"""Errors of a step that end the whole run, never only the attempt (the money fence)."""

AGENT_STEP_ERRORS: tuple[type[BaseException], ...] = (OSError, RecursionError, UnicodeError)
"""What the agent step may raise from the workspace the agent left (its hand-back, a path past PATH_MAX,
a tree deeper than the open-file limit) and counts as that attempt's own; any other error of the agent
step (the agent or its sandbox cannot be set up) stops the run."""


def guarded(name: StepName, step: Callable[P, R], owned: tuple[type[BaseException], ...] = (Exception,)) -> Callable[P, R]:
    """`step`, with each error of the kinds `owned` (except `RUN_ERRORS`) raised as `AttemptBroke`: an
    error of the step itself, told apart from one the orchestrator's wrapper raises around it."""

    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return step(*args, **kwargs)
        except RUN_ERRORS:
            raise
        except owned as error:
            raise AttemptBroke(name, error) from error

    call.__name__, call.__doc__, call.__wrapped__ = step.__name__, step.__doc__, step  # type: ignore[attr-defined]
    return call


def run_attempt(attempt: Attempt, setup: ArmSetup, *, templates: WorkspaceTemplates | None = None,
                wrap: StepWrapper = call_step) -> RunRecord:
    """Run one attempt end to end (the stages in order, each of `STEP_NAMES` through `wrap`) and store
    its transcript, receipt and record; release and teardown always run, unwrapped.

    An attempt can only fail itself: an error while materialising, auditing, checking or recording it
    (or, in the agent step, from the workspace it left: a path past PATH_MAX, an unreadable entry)
    stores an `ungradable` record naming the step and the error (`broken_record`), and the run goes
    on. Errors of the orchestrator's wrapper, budget errors, and an agent or memory system that
    cannot be set up at all still end the run."""
    stage: dict[str, object] = {}
    try:
        workspace = wrap("materialize-workspace", guarded("materialize-workspace", materialize_workspace))(
            attempt, setup.source, templates=templates)
    except AttemptBroke as broke:
        return broken_record(attempt, setup, broke, stage)
    stage["workspace"] = workspace
    try:
        memory = wrap("provision-memory", provision_memory)(attempt, setup.run_id, workspace.root, setup.embedder,
                                                            setup.provisioner, secret=ensure_run_secret(setup.store, setup.run_id))
        stage["memory"] = memory
        try:
            run = wrap("run-agent", guarded("run-agent", run_agent, AGENT_STEP_ERRORS))(
                attempt, workspace, memory, setup.agent_name, agent_options=setup.agent_options, sandbox=setup.sandbox,
                sandbox_options=setup.sandbox_options)
        finally:
            release_memory(memory, setup.embedder)
        stage["run"] = run
        receipt = wrap("audit-mutations", guarded("audit-mutations", audit_workspace))(attempt, workspace)
        stage["receipt"] = receipt
        check = wrap("check-workspace", guarded("check-workspace", check_workspace))(
            attempt, workspace, receipt, run, sandbox=setup.sandbox, sandbox_options=sandbox_options_of(setup.agent_options) or setup.sandbox_options)
        return wrap("record-arm", guarded("record-arm", record_attempt))(
            attempt, run_id=setup.run_id, workspace=workspace, memory=memory, run=run, receipt=receipt, check=check,
            agent_name=setup.agent_name, store=setup.store, source_commit=setup.source_commit)
    except AttemptBroke as broke:
        return broken_record(attempt, setup, broke, stage)
    finally:
        teardown_workspace(workspace)


def broken_record(attempt: Attempt, setup: ArmSetup, broke: AttemptBroke, stage: Mapping[str, object]) -> RunRecord:
    """Store and return the `ungradable` record of an attempt whose own step raised: the reason names
    the step and the error; the transcript and the audit receipt are stored when those steps ended."""
    task, prefix = attempt.task, attempt_prefix(attempt)
    workspace = stage.get("workspace")
    memory = stage.get("memory")
    run = stage.get("run")
    receipt = stage.get("receipt")
    transcript_key = receipt_key = None
    if isinstance(run, AgentRun):
        transcript_key = run_key(setup.run_id, *prefix, TRANSCRIPT_JSON)
        setup.store.put_json(transcript_key, run.transcript)
    if isinstance(receipt, AuditReceipt):
        receipt_key = run_key(setup.run_id, *prefix, AUDIT_JSON)
        setup.store.put_json(receipt_key, receipt)
    pinned_task = workspace.pinned.task if isinstance(workspace, Workspace) else task
    record = RunRecord(
        run_id=setup.run_id, task_id=task.task_id, task_kind=task.manifest.kind, condition=attempt.condition,
        trial=attempt.trial, order=attempt.order, agent=setup.agent_name, calibration=setup.agent_name == "calibration",
        corpus_id=workspace.corpus_id if isinstance(workspace, Workspace) else None,
        outcome="ungradable", infra_failure=True, failure_reason=str(broke),
        audit_passed=receipt.passed if isinstance(receipt, AuditReceipt) else None,
        input_tokens=run.input_tokens if isinstance(run, AgentRun) else 0,
        output_tokens=run.output_tokens if isinstance(run, AgentRun) else 0,
        cost_usd=run.cost_usd if isinstance(run, AgentRun) else 0.0,
        wall_seconds=run.wall_seconds if isinstance(run, AgentRun) else 0.0,
        transcript=transcript_key, injection="unknown",
        planted_ids=memory.planted_ids if isinstance(memory, ProvisionedMemory) else (),
        audit_receipt=receipt_key,
        agent_unenforced=run.sandbox_unenforced if isinstance(run, AgentRun) else (),
        build_under_test=memory.build if isinstance(memory, ProvisionedMemory) else REFERENCE_BUILD,
        memory_config_digest=memory.config_digest if isinstance(memory, ProvisionedMemory) else None,
        worker=f"{socket.gethostname()}:{os.getpid()}",
        **_identity_fields(record_fields(pinned_task, setup.agent_name, run.model if isinstance(run, AgentRun) else None,
                                        source_root=task.root), setup.source_commit),
    )
    setup.store.put_json(run_key(setup.run_id, *prefix, RECORD_JSON), record)
    return record


def check_conditions(conditions: Sequence[str], lanes: Sequence[str]) -> list[str]:
    """Validate condition names against the condition table and the memory system's lanes; return them."""
    out = []
    for condition in conditions:
        try:
            spec_of(condition, lanes)
        except UnknownCondition as error:
            raise ArmsError(str(error)) from None
        if condition in out:
            raise ArmsError(f"condition {condition!r} is named twice; name each condition once")
        out.append(condition)
    return out


def select_tasks(tasks: Sequence[LoadedTask], ids: Sequence[str] | None) -> list[LoadedTask]:
    """The tasks named in `ids` (all when None), in corpus order; an unknown id lists the known ones."""
    if not ids:
        return list(tasks)
    known = {t.task_id: t for t in tasks}
    missing = [i for i in ids if i not in known]
    if missing:
        raise ArmsError(f"unknown task(s) {', '.join(missing)}; known tasks: {', '.join(sorted(known))}")
    return [known[i] for i in ids]


def task_subdir_of(tasks_root: Path, repo_root: Path) -> str:
    """The tasks folder relative to the repository root, as a POSIX path."""
    rel = tasks_root.resolve().relative_to(repo_root.resolve()).as_posix()
    return check_rel_path(rel)


ProgressFn = Callable[[RunRecord], None]


def start_matrix(store: ArtifactStore, run_id: str) -> None:
    """What a matrix does before its first attempt, whichever orchestration runs its attempts
    (`run_matrix` on threads, `flows.paired.fan_out_arms` on Prefect's task runner): draw the run's
    realm secret once, so attempts running at once share it."""
    ensure_run_secret(store, run_id)


def finish_matrix(store: ArtifactStore, run_id: str, records: Sequence[RunRecord]) -> str:
    """What a matrix does after its last attempt, whichever orchestration ran them: write the records
    table (one row per attempt, in schedule order) and seal the run's evidence with its manifest
    (`tasks_lib.run.seal`); return the table's key. The same records give the same table and seal."""
    key = run_key(run_id, RECORDS_TABLE)
    store.put_table(key, pa.Table.from_pylist([r.model_dump(mode="json") for r in records]))
    seal_run(store, run_id)
    return key


def run_matrix(
    attempts: Sequence[Attempt],
    *,
    run_id: str,
    repo_root: Path,
    commit: str,
    tasks_subdir: str,
    agent_name: str,
    store: ArtifactStore,
    agent_options: dict[str, object] | None = None,
    embedder: str = "hashed",
    sandbox: str = "local",
    progress: ProgressFn | None = None,
    workers: int = 1,
    provisioner: ProvisionerSpec | None = None,
) -> list[RunRecord]:
    """Run every attempt; return the records in schedule order (each is also stored as it ends).

    The composition `flows.paired.fan_out_arms` runs on Prefect: `start_matrix`, `run_attempt` per
    attempt, `finish_matrix` (the records table, and the seal over it and every attempt's evidence).
    Each task's fixture is built once into a template for the matrix and copied per attempt.
    Its provenance (`tasks_lib.run.provenance`, no run config) is stored beside the records.
    With `workers` > 1, that many attempts run at once on threads (each has its own scratch root,
    store and realm); they start in schedule order, and `progress` is called as each one ends.
    """
    if workers < 1:
        raise ArmsError(f"workers: must be at least 1, got {workers}")
    setup = ArmSetup(run_id=run_id, source=TaskSource(repo_root, commit, tasks_subdir), agent_name=agent_name, store=store,
                     agent_options=dict(agent_options or {}), embedder=embedder, sandbox=sandbox, provisioner=provisioner)
    start_matrix(store, run_id)
    with tempfile.TemporaryDirectory(prefix="memtrial-templates-") as cache:
        templates = WorkspaceTemplates(Path(cache))

        def one(attempt: Attempt) -> RunRecord:
            record = run_attempt(attempt, setup, templates=templates)
            if progress:
                progress(record)
            return record

        if workers == 1:
            records = [one(attempt) for attempt in attempts]
        else:
            with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="memtrial-arm") as pool:
                records = list(pool.map(one, attempts))
    finish_matrix(store, run_id, records)
    if attempts:
        write_provenance(store, run_provenance(
            run_id, agent=agent_name, conditions=[a.condition for a in attempts], trials=max(a.trial for a in attempts) + 1,
            corpus_commit=commit, tasks_root=tasks_subdir, embedder=embedder, sandbox=sandbox,
            provisioner_argv=provisioner.argv if provisioner else (), provisioner_env=provisioner.env if provisioner else None,
            provisioner_grants=provisioner.grants() if provisioner else None))
    return records
