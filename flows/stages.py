"""One Prefect `@task` per pipeline stage, each a thin wrapper over a pure function of `tasks_lib`.

Cache policies say exactly what identifies a stage's result: content digests (fixture tree and
corpus id, manifest and verifier digests, the run config digest) plus the digest of the stage
code, and for arms the run id (a new run is a new measurement; a rerun of the same run re-uses
every completed arm; once all arms of a matrix completed, the matrix is sealed as one entry so a
rerun reads it once). Results persist in the configured result storage (`ArtifactResultStorage`:
a local folder or an S3-compatible bucket, same settings as the artifact store), so a rerun in a
new process still finds them, each with an index entry saying what it is (`flows.runtime.cache`, `memtrial cache`).

Retries: only stages that are pure or idempotent writes retry. An arm of a paid agent never
retries: a retry could spend again without passing the budget guard; a failed paid arm is rerun
only through a new flow attempt, which passes the guard first.

An interrupted run stores nothing: once `flows.runtime.interrupt.tripped()` (or, on a Dask worker, once the
interrupted client halted the flow run there: `interruption()`), the result storage refuses every
write (`StageInterrupted`), so a stage cut short (or one whose check died of the same Ctrl-C) leaves no
cache entry and never becomes a task's verdict; no stage retries then.

Two environment switches make reruns testable and measurable: `MEMTRIAL_STAGE_TRACE=<file>`
appends one line per stage execution (a cache hit executes nothing), and
`MEMTRIAL_FAIL_STAGE=<stage>` makes that stage raise `InjectedFailure` (only once when
`MEMTRIAL_FAIL_ONCE=<file>` is set: the first failure creates the file).
"""

from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable
from functools import cache, lru_cache
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from flows.runtime.cache import (
    MATRIX_SEAL,
    describe_parameters,
    index_root,
    results_root,
    write_entry,
)
from flows.runtime.interrupt import StageInterrupted, halted, tripped, working_for
from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import task
from prefect.cache_policies import INPUTS, TASK_SOURCE, CacheKeyFnPolicy
from prefect.context import TaskRunContext
from prefect.filesystems import WritableFileSystem

import tasks_lib
from tasks_lib.arm import steps as arms
from tasks_lib.arm.steps import ArmSetup, Attempt, StepName, StepWrapper, TaskSource
from tasks_lib.arm.workspace import WorkspaceTemplates
from tasks_lib.artifacts import ArtifactStore, open_store
from tasks_lib.contracts import PreparedCorpus, RunRecord
from tasks_lib.corpus.packs import CorpusPack, open_corpus_pack
from tasks_lib.corpus.prepare import prepare_packed_task
from tasks_lib.corpus.tasks import CorpusCheckReport, check_packed_corpus, load_task
from tasks_lib.errors import MemtrialError
from tasks_lib.run.config import ArmSpec
from tasks_lib.settings import FAIL_ONCE, FAIL_STAGE, STAGE_TRACE
from tasks_lib.trees import sha256_file

TRACE_ENV, FAIL_STAGE_ENV, FAIL_ONCE_ENV = STAGE_TRACE.name, FAIL_STAGE.name, FAIL_ONCE.name

P = ParamSpec("P")
R = TypeVar("R")

__all__ = [
    "ArtifactResultStorage",
    "InjectedFailure",
    "aggregate",
    "arm_attempt",
    "check_invariants",
    "code_digest",
    "prefect_steps",
    "prepare_code_digest",
    "prepare_task_corpus",
    "records_digest",
    "report",
    "result_storage",
    "retry_condition",
    "run_arm",
    "store_records",
]


class InjectedFailure(MemtrialError):
    """A stage failed on purpose (MEMTRIAL_FAIL_STAGE); used to prove reruns recompute only what failed."""


_trace_lock = threading.Lock()


def _flow_run_id() -> str | None:
    """The flow run of the task run this thread executes (None outside a task run)."""
    context = TaskRunContext.get()
    return str(context.task_run.flow_run_id) if context is not None and context.task_run.flow_run_id else None


def interruption() -> str | None:
    """Why the calling stage's run is interrupted: this process got SIGINT or SIGTERM, or (on a Dask
    worker) the flow run's client halted it (`flows.runtime.dask_runner.halt_on_worker`); None when it is not."""
    signum = tripped()
    if signum is not None:
        return signal.Signals(signum).name
    return halted(_flow_run_id())


def enter_stage(stage: str, label: str = "") -> None:
    """Mark one real execution of `stage` (trace file); refuse it once the run is interrupted, and fail it
    if the failure switch names it."""
    trace = STAGE_TRACE.text()
    if trace:
        with _trace_lock, open(trace, "a", encoding="utf-8") as handle:
            handle.write(f"{stage}\t{label}\n")
    flow_run = _flow_run_id()
    if flow_run is not None:
        working_for(flow_run)
    why = interruption()
    if why is not None:
        raise StageInterrupted(f"stage {stage!r} not started: the run was interrupted ({why})")
    if FAIL_STAGE.text() != stage:
        return
    once = FAIL_ONCE.text()
    if once:
        marker = Path(once)
        if marker.exists():
            return
        marker.write_text(stage + "\n", encoding="utf-8")
    raise InjectedFailure(f"stage {stage!r} failed on purpose ({FAIL_STAGE_ENV}={stage}); unset it and rerun")


def retry_condition(_task: Any, _task_run: Any, state: Any) -> bool:
    """Prefect retry condition: retry any failure except an injected one (it exists to fail the flow run)
    and any failure of an interrupted run."""
    if interruption() is not None:
        return False
    try:
        error = state.result(raise_on_failure=False)
    except Exception:  # noqa: BLE001 - an unreadable state is retried like any failure
        return True
    return not isinstance(error, (InjectedFailure, StageInterrupted))


# --------------------------------------------------------------------------- result storage


class ArtifactResultStorage(WritableFileSystem):
    """Prefect result storage on a memtrial artifact root (local folder or s3://bucket/prefix)."""

    _block_type_name = "memtrial artifact result storage"

    root: str
    """A folder or s3://bucket/prefix; S3 settings come from tasks_lib.artifacts.S3Settings.from_env()."""

    # Prefect calls the sync methods with `_sync=True` and prefers `a<method>` when it awaits.

    def read_path(self, path: str, _sync: bool | None = None) -> bytes:  # type: ignore[override]
        return artifact_store(self.root).get_bytes(path)

    def write_path(self, path: str, content: bytes, _sync: bool | None = None) -> str:  # type: ignore[override]
        """Store a result and its index entry (`flows.runtime.cache`); refused (StageInterrupted) once the run is
        interrupted: what a stage computed while its processes were being killed is not a result."""
        why = interruption()
        if why is not None:
            raise StageInterrupted(f"not caching {path}: the run was interrupted ({why})")
        store = artifact_store(self.root)
        store.put_bytes(path, content)
        context = TaskRunContext.get()
        if context is not None and context.task is not None:  # a matrix seal is indexed by `seal_matrix`
            tasks, run_id, label = describe_parameters(context.task.name, context.parameters or {})
            write_entry(artifact_store(index_root(self.root)), path, context.task.name, tasks, run_id, label)
        return path

    async def aread_path(self, path: str) -> bytes:
        return self.read_path(path)

    async def awrite_path(self, path: str, content: bytes) -> str:
        return self.write_path(path, content)


@lru_cache(maxsize=16)
def artifact_store(root: str) -> ArtifactStore:
    """The artifact store of `root`, opened once per process."""
    return open_store(root)


_saved: dict[str, ArtifactResultStorage] = {}
_saved_lock = threading.Lock()


def result_storage(artifact_root: str, result_root: str | None = None) -> ArtifactResultStorage:
    """Result storage for a run: `result_root`, else `<artifact_root>/prefect-results`.

    Prefect only accepts a saved block as task result storage, so the block is saved once per
    process under a name derived from its root (`memtrial-results-<digest>`).
    """
    root = results_root(artifact_root, result_root)
    with _saved_lock:
        if root not in _saved:
            block = ArtifactResultStorage(root=root)
            block.save(f"memtrial-results-{hashlib.sha256(root.encode()).hexdigest()[:16]}", overwrite=True)
            _saved[root] = block
        return _saved[root]


def _module_file(name: str) -> Path | None:
    """Source file of module `name` inside tasks_lib (a module or a package's __init__), if any."""
    base = Path(tasks_lib.__file__).parent
    parts = name.split(".")[1:]
    candidate = base.joinpath(*parts)
    for path in (candidate.with_suffix(".py"), candidate / "__init__.py"):
        if parts and path.is_file() or not parts and path.name == "__init__.py" and path.is_file():
            return path
    return None


@cache
def _imported(name: str, path: Path) -> frozenset[str]:
    """tasks_lib modules that module `name` (at `path`) imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_bytes())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join([*anchor, module] if module else anchor)
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return frozenset(m for m in found if m == "tasks_lib" or m.startswith("tasks_lib."))


@cache
def code_digest(*roots: str) -> str:
    """SHA-256 of the source of `roots` (tasks_lib modules) and every tasks_lib module they import,
    transitively, with their parent packages: the code a stage runs. Computed once per process,
    i.e. for the code this process loaded. With no roots: every module of tasks_lib."""
    base = Path(tasks_lib.__file__).parent
    if not roots:
        roots = tuple("tasks_lib." + ".".join(p.relative_to(base).with_suffix("").parts) for p in base.rglob("*.py"))
    seen: dict[str, Path] = {}
    pending = list(roots)
    while pending:
        name = pending.pop()
        path = _module_file(name)
        if path is None or name in seen:
            continue
        seen[name] = path
        parents = name.split(".")
        pending.extend(".".join(parents[:i]) for i in range(1, len(parents)))
        pending.extend(_imported(name, path))
    digest = hashlib.sha256()
    for path in sorted(set(seen.values())):
        digest.update(path.relative_to(base).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def package_modules(package: str) -> tuple[str, ...]:
    """Every module of a tasks_lib package (for parts loaded by name at run time: agents, sandboxes)."""
    base = Path(tasks_lib.__file__).parent
    folder = base.joinpath(*package.split(".")[1:])
    return tuple(sorted("tasks_lib." + ".".join(p.relative_to(base).with_suffix("").parts) for p in folder.rglob("*.py")))


def suite_stage(name: str) -> str:
    """Progress label of a suite."""
    return f"suite: {name}"


def folder_digest(folder: Path) -> str:
    """SHA-256 over every file of `folder` (relative path and content digest), sorted."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0" + bytes.fromhex(sha256_file(path)))
    return digest.hexdigest()


PREPARE_CODE = ("tasks_lib.corpus.prepare", "tasks_lib.corpus.upstream", "tasks_lib.corpus.packs")
INVARIANTS_CODE = ("tasks_lib.corpus.tasks", "tasks_lib.corpus.upstream", "tasks_lib.corpus.packs")
ARM_CODE = ("tasks_lib.arm.steps", "tasks_lib.memory.delivery.hook", *package_modules("tasks_lib.agents"), *package_modules("tasks_lib.sandbox"))
GRADING_CODE = ("tasks_lib.analysis.aggregate",)
REPORT_CODE = ("tasks_lib.report", "tasks_lib.report.html", "tasks_lib.report.plots")
MEMORY_CODE = package_modules("tasks_lib.memory")
"""Memory systems are opened by registry name, so the suites depend on the whole package."""


def prepare_code_digest() -> str:
    """Digest of the code preparation runs, so a change there invalidates prepared fixtures."""
    return code_digest(*PREPARE_CODE)


# --------------------------------------------------------------------------- stages


@task(
    name="prepare-task-corpus",
    cache_policy=(INPUTS - "pack" - "artifact_root" - "task_folder") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    retry_delay_seconds=2,
    retry_condition_fn=retry_condition,
)
def prepare_task_corpus(pack: CorpusPack, artifact_root: str, task_folder: str, task_tree_oid: str, code_digest: str) -> PreparedCorpus:
    """Build, redact and certify the fixture of the task folder `task_folder` of the corpus pack (pure;
    safe to retry). Any process that can open the artifact root runs it (the pack holds the task), as
    for the arms. Keyed on the task folder's git tree id (manifest and fixture) and the preparation
    code digest, never on a location."""
    enter_stage("prepare", task_folder)
    return prepare_packed_task(artifact_store(artifact_root), pack, task_folder)


@task(
    name="corpus-invariants",
    cache_policy=(INPUTS - "artifact_root") + TASK_SOURCE,
    persist_result=True,
    retries=1,
    retry_delay_seconds=2,
    retry_condition_fn=retry_condition,
)
def check_invariants(pack: CorpusPack, artifact_root: str, only: list[str] | None, code: str) -> CorpusCheckReport:
    """The invariants of every task in the corpus pack, or of the task folders in `only` (pure: builds
    in scratch folders; safe to retry); any process that can open the artifact root runs it. Keyed on
    the pack (its commit is a digest of the corpus folder's content, so an unrelated commit re-uses
    it), `only` and the code digest. The one invariant that reads the checkout itself, uncommitted
    task folders, is the flow's (`uncommitted_folders`)."""
    enter_stage("corpus-invariants")
    return check_packed_corpus(artifact_store(artifact_root), pack, only)


def _arm_key(_ctx: TaskRunContext, inputs: dict[str, Any]) -> str:
    spec: ArmSpec = inputs["spec"]
    return f"arm-{spec.cache_identity()}"


def prefect_steps(agent_label: str) -> StepWrapper:
    """`run_attempt`'s steps as plain calls inside the arm's one task run, each marked with `enter_stage`
    (the agent step with the arm's label), so a stage trace, an injected failure and an interrupt see
    every step. They are not task runs of their own: none was ever cached or retried on its own (the
    arm is the unit of cache and retry), and as nested task runs they were 924 of a default run's 977,
    paid in Prefect's event and API threads (issue #36)."""

    def wrap(name: StepName, step: Callable[P, R], /) -> Callable[P, R]:
        @functools.wraps(step)
        def traced(*args: P.args, **kwargs: P.kwargs) -> R:
            enter_stage(name, agent_label if name == "run-agent" else "")
            return step(*args, **kwargs)

        return traced

    return wrap


_templates_lock = threading.Lock()
_templates: list[WorkspaceTemplates] = []


def arm_templates() -> WorkspaceTemplates:
    """This process's workspace templates: each task's fixture is built from git objects (and redacted
    and snapshotted) once per process, and every arm of that task in the process gets a copy (issue #36:
    the build was 1.7x the whole bare-arm floor). Kept in a private temporary folder removed at exit,
    so nothing carries over to another process or run; an arm that runs in another process (a Dask
    worker) builds its own."""
    with _templates_lock:  # arms start together on several threads: one folder for all of them
        if not _templates:
            folder = Path(tempfile.mkdtemp(prefix="memtrial-templates-"))
            atexit.register(shutil.rmtree, folder, True)
            _templates.append(WorkspaceTemplates(folder))
        return _templates[0]


def arm_attempt(spec: ArmSpec) -> tuple[Attempt, ArmSetup]:
    """The attempt an arm spec describes and its setup: what `run_arm` hands to `run_attempt`. The task
    and its fixture come from the spec's corpus pack in the artifact store (fetched once per machine),
    so any process that can open the artifact root runs any arm, with the task's own agent timeout
    (covered by the manifest digest)."""
    store = artifact_store(spec.artifact_root)
    checkout = open_corpus_pack(store, spec.corpus_pack)
    attempt = Attempt(load_task(checkout / spec.tasks_subdir / spec.task_folder), spec.condition, spec.trial, spec.order)
    setup = ArmSetup(run_id=spec.run_id, source=TaskSource(checkout, spec.corpus_pack.commit, spec.tasks_subdir),
                     agent_name=spec.agent.name, store=store, agent_options=dict(spec.agent.options),
                     embedder=spec.embedder, sandbox=spec.sandbox, provisioner=spec.provisioner, source_commit=spec.source_commit,
                     sandbox_options=spec.docker.sandbox_options() if spec.docker else {})
    return attempt, setup


@task(name="run-arm", cache_policy=CacheKeyFnPolicy(cache_key_fn=_arm_key) + TASK_SOURCE, persist_result=True, retries=0)
def run_arm(spec: ArmSpec) -> RunRecord:
    """One arm end to end (`tasks_lib.arm.steps.run_attempt`) in one task run, its steps marked as
    stages (`prefect_steps`): materialize, provision, run the agent, release the memories (always), audit,
    check, record, tear down (always).

    Cached on the arm's identity (run id, task digests, condition, trial, agent, config and code
    digests), so a rerun of the same run never runs a completed arm again. No retries here: the
    flow gives free agents one retry via `with_options`, never paid ones.
    """
    enter_stage("run-arm", spec.label)
    attempt, setup = arm_attempt(spec)
    return arms.run_attempt(attempt, setup, templates=arm_templates(), wrap=prefect_steps(spec.label))


def _records_key(_ctx: TaskRunContext, inputs: dict[str, Any]) -> str:
    identity = "|".join((inputs["artifact_root"], inputs["run_id"], records_digest(inputs["records"])))
    return f"records-{hashlib.sha256(identity.encode()).hexdigest()}"


@task(name="store-records", cache_policy=CacheKeyFnPolicy(cache_key_fn=_records_key) + TASK_SOURCE, persist_result=True, retries=2, retry_delay_seconds=2,
      retry_condition_fn=retry_condition)
def store_records(artifact_root: str, run_id: str, records: list[RunRecord]) -> str:
    """Write the run's records table and seal the run's evidence with its manifest
    (`tasks_lib.arm.steps.finish_matrix`, as `run_matrix` ends; idempotent: same key, same content);
    return the table's key."""
    enter_stage("store-records")
    return arms.finish_matrix(artifact_store(artifact_root), run_id, records)


def records_digest(records: list[RunRecord]) -> str:
    """SHA-256 over a run's records (their JSON, in order): what the grading stages are keyed on."""
    digest = hashlib.sha256()
    for record in records:
        digest.update(record.model_dump_json().encode() + b"\n")
    return digest.hexdigest()


@task(name="aggregate", cache_policy=INPUTS + TASK_SOURCE, persist_result=True, retries=1, retry_delay_seconds=2,
      retry_condition_fn=retry_condition)
def aggregate(artifact_root: str, run_id: str, records_sha256: str, code: str, memory_texts: dict[str, list[str]],
              warnings: list[str] | None = None) -> dict[str, str]:
    """Grade the stored run and write its tables and summary (tasks_lib.analysis.aggregate), with the
    flow's distrust `warnings` from outside the records (None: the stored ones); return table -> key."""
    enter_stage("aggregate", run_id)
    from tasks_lib.analysis.aggregate import aggregate_run
    from tasks_lib.report import draw_plots

    store = artifact_store(artifact_root)
    graded = aggregate_run(store, run_id, memory_texts, warnings)
    draw_plots(store, graded)  # the report stage finds them drawn, so rerunning a failed report draws nothing
    return dict(graded.keys)


@task(name="report", cache_policy=INPUTS + TASK_SOURCE, persist_result=True, retries=1, retry_delay_seconds=2,
      retry_condition_fn=retry_condition)
def report(artifact_root: str, run_id: str, records_sha256: str, code: str, memory_texts: dict[str, list[str]]) -> str:
    """Render the run's HTML report into the artifact store (tasks_lib.report); return its location."""
    enter_stage("report", run_id)
    from tasks_lib.report import build_report

    return build_report(artifact_store(artifact_root), run_id, memory_texts=memory_texts).uri


def matrix_seal_key(specs: list[ArmSpec]) -> str:
    """Key of a completed matrix: SHA-256 over every arm's identity, in schedule order."""
    digest = hashlib.sha256()
    for spec in specs:
        digest.update(spec.cache_identity().encode() + b"\n")
    return f"matrix-{digest.hexdigest()}"


def read_sealed_matrix(storage: ArtifactResultStorage, specs: list[ArmSpec]) -> list[RunRecord] | None:
    """The records of a matrix whose every arm completed before (one read instead of one cached
    task run per arm), or None. Sealed only after all its arms completed, so it holds exactly what
    the per-arm caches would return."""
    from prefect.results import ResultStore

    store = ResultStore(result_storage=storage)
    key = matrix_seal_key(specs)
    return list(store.read(key).result) if store.exists(key) else None


def seal_matrix(storage: ArtifactResultStorage, specs: list[ArmSpec], records: list[RunRecord]) -> None:
    """Record that every arm of `specs` completed with `records`."""
    from prefect.results import ResultStore

    key = matrix_seal_key(specs)
    ResultStore(result_storage=storage).write(records, key=key)
    write_entry(artifact_store(index_root(storage.root)), key, MATRIX_SEAL, sorted({s.task_id for s in specs}),
                specs[0].run_id if specs else None, f"{len(specs)} arms")
