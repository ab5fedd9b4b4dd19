"""The paired flow: prepare and check every task, run the matrix (arms fanned out), store the records.

DAG: the corpus pack published -> prepare (build, redact, certify; per task) and corpus
invariants, in parallel, both reading the pack (like the arms, they may run on any worker) -> only tasks
that certified clean and hold every invariant go on -> for each agent, the arms (task x condition x
trial, conditions interleaved) fan out on the task runner -> the records table. A paid agent's
arms pass the budget guard before each starts and run up to `runner.workers` at once, each in
flight reserving the arm ceiling against the pair cap (`paid_arms`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import Task, flow
from prefect.futures import PrefectFuture, as_completed
from pydantic import BaseModel

from flows import stages
from flows.budget import PairGuard
from flows.runners import cluster_loss_named
from flows.runtime.progress import counted, reporter
from flows.runtime.status import run_marker
from tasks_lib.arm.comparability import source_commit_of
from tasks_lib.arm.pinned import committed_manifest
from tasks_lib.arm.steps import (
    check_conditions,
    schedule,
    skipped_cells,
    start_matrix,
    task_subdir_of,
)
from tasks_lib.artifacts import run_key
from tasks_lib.contracts import PreparedCorpus, RunRecord
from tasks_lib.corpus.build import resolve_commit
from tasks_lib.corpus.packs import CorpusPack, publish_corpus_pack
from tasks_lib.corpus.prepare import fixture_tree_oid
from tasks_lib.corpus.tasks import (
    CorpusCheckReport,
    LoadedTask,
    committed_folders,
    scan_tasks,
    uncommitted_folders,
)
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.run.config import (
    RUN_CONFIG_JSON,
    AgentSpec,
    ArmSpec,
    RunConfig,
    provisioner_warnings,
)
from tasks_lib.run.provenance import run_provenance, write_provenance
from tasks_lib.trees import sha256_bytes

PREPARE, INVARIANTS, GRADE = "prepare", "corpus invariants", "grade + aggregate"


class PairedResult(BaseModel):
    """What one paired flow run produced."""

    run_id: str
    artifact_root: str
    records_key: str
    records: list[RunRecord]
    excluded: dict[str, str]
    """Tasks left out of the matrix, with the reason (not certified clean, broken invariant)."""
    arms_cached: int
    """Arms whose record came from cache (not re-run)."""
    skipped: list[str] = []
    """Cells the matrix skipped, `<task> <condition>`: the task carries no planted state for the condition."""
    tables: dict[str, str] = {}
    """The graded run's tables and summary, table -> key (`grade_run`); empty for an agent's run of a
    nightly run, which the nightly flow grades."""


def arm_stage(agent: AgentSpec) -> str:
    """Progress label of an agent's arms."""
    return f"arms: {agent.name}"


def records_stage(agent: AgentSpec) -> str:
    """Progress label of an agent's records table."""
    return f"records: {agent.name}"


def _collect(futures: list[PrefectFuture], stage: str) -> tuple[list, int]:
    """Results of `futures` in submission order, advancing the progress bar as each finishes."""
    progress = reporter()
    cached = 0
    for future in as_completed(futures):
        future.wait()  # sets the future's final state locally (the API's copy may lag behind)
        hit = future.state.is_completed() and future.state.name == "Cached"
        cached += hit
        progress.advance(stage, cached=hit)
    with cluster_loss_named(f"stage '{stage}'"):
        return [f.result() for f in futures], cached


def _gate(prepared: list[PreparedCorpus], report: CorpusCheckReport) -> dict[str, str]:
    """Tasks that must not run, with the reason."""
    excluded = {p.name: f"certification: {p.certification.verdict}" for p in prepared if p.certification.verdict != "clean"}
    for check in report.tasks:
        if check.failures:
            excluded.setdefault(check.task_id, "invariants: " + ", ".join(sorted({f.invariant for f in check.failures})))
    return excluded


def skipped_of(config: RunConfig, tasks: PreparedTasks) -> list[str]:
    """`<task> <condition>` for each cell the matrix skips (see `tasks_lib.arm.steps.skipped_cells`)."""
    return [f"{task} {condition}" for task, condition in skipped_cells(tasks.runnable, config.conditions)]


def pair_guard(config: RunConfig, agent: AgentSpec, run_id: str, artifact_root: str) -> PairGuard:
    """The budget guard of a paid agent's pair; a paid agent without a budget config cannot run."""
    if not config.budget.config:
        raise MemtrialError(
            f"agent {agent.name!r} can spend money but the run config has no budget.config; "
            "add budget: {config: <budget file>} (see flows/budget.py) or run only the calibration agent"
        )
    return PairGuard(config.budget.config, artifact_root, run_id, agent.name)


def arm_specs(config: RunConfig, agent: AgentSpec, tasks: PreparedTasks, *, run_id: str, artifact_root: str) -> list[ArmSpec]:
    """One ArmSpec per scheduled attempt (conditions interleaved), with the digests its cache key uses
    and the corpus pack its task comes from (no path of this machine goes into a spec)."""
    conditions = check_conditions(list(config.conditions), LANES)
    repo, commit = tasks.repo, tasks.commit
    trees = {t.task_id: fixture_tree_oid(repo, commit, f"{tasks.tasks_subdir}/{t.root.name}")[1] for t in tasks.runnable}
    # the arm reads the committed task from the pack: refuse here, by name, a checkout whose task.json differs
    manifests = {t.task_id: sha256_bytes(committed_manifest(t, repo, commit, f"{tasks.tasks_subdir}/{t.root.name}")[0])
                 for t in tasks.runnable}
    origins = {t.task_id: source_commit_of(t.root) for t in tasks.runnable}
    specs = []
    for attempt in schedule(tasks.runnable, conditions, config.trials):
        task = attempt.task
        specs.append(ArmSpec(
            run_id=run_id, task_id=task.task_id, task_folder=task.root.name, condition=attempt.condition,
            trial=attempt.trial, order=attempt.order, agent=agent, sandbox=config.sandbox, embedder=config.embedder,
            docker=config.docker if config.sandbox == "docker" else None, provisioner=config.provisioner, corpus_pack=tasks.pack, commit=commit, source_commit=origins[task.task_id],
            tasks_subdir=tasks.tasks_subdir, artifact_root=artifact_root,
            corpus_id=tasks.prepared[task.task_id].build.corpus_id, task_tree_oid=trees[task.task_id],
            manifest_sha256=manifests[task.task_id], verifier_sha256=task.manifest.verifier.asset.sha256,
            config_digest=config.config_digest(), code_digest=tasks.code,
        ))
    return specs


@dataclass(frozen=True)
class PreparedTasks:
    """Tasks that passed preparation and the invariants, with what the arms need to know of them."""

    repo: Path
    commit: str
    tasks_subdir: str
    runnable: list[LoadedTask]
    prepared: dict[str, PreparedCorpus]
    excluded: dict[str, str]
    code: str
    pack: CorpusPack
    """The corpus folder at `commit` as a pack in the artifact store: where every arm reads its task."""


def prepare_tasks(config: RunConfig, repo_root: str, artifact_root: str, storage: stages.ArtifactResultStorage) -> PreparedTasks:
    """The corpus pack published for the stages that follow (`tasks_lib.corpus.packs`), then stages
    prepare and corpus invariants (in parallel, on the task runner: they read the pack, never the
    checkout, so they run wherever the arms can), then the gate. Call inside a flow.

    What reads the checkout itself stays in this process: the pack is built from its git objects, and
    a chosen task folder the commit does not hold is left out here (`uncommitted_folders`)."""
    progress = reporter()
    repo = Path(repo_root).resolve()
    tasks_root = repo / config.tasks_root
    commit = resolve_commit(repo, config.revision, str(repo))
    tasks_subdir = task_subdir_of(tasks_root, repo)
    scan = scan_tasks(tasks_root)  # a broken task refuses the run only where it is named
    chosen = scan.select(config.tasks)
    broken = {t: f"layout: {why}" for t, why in scan.left_out(None).items()} if config.tasks is None else {}
    uncommitted = {f.task_id: f"invariants: {f.invariant} (not committed at {commit[:12]})"
                   for f in uncommitted_folders(tasks_root, committed_folders(repo, commit, tasks_subdir))}
    committed = [t for t in chosen if t.root.name not in uncommitted]
    pack = publish_corpus_pack(stages.artifact_store(artifact_root), repo, commit, tasks_subdir)
    progress.start(PREPARE, len(committed))
    progress.start(INVARIANTS, 1)
    invariants = stages.check_invariants.with_options(result_storage=storage)
    only = sorted(t.root.name for t in committed) if config.tasks else None  # a chosen few: check only those
    invariants_future = invariants.submit(pack, artifact_root, only, stages.code_digest(*stages.INVARIANTS_CODE))
    prepare = stages.prepare_task_corpus.with_options(result_storage=storage)
    prepare_code = stages.prepare_code_digest()
    futures = [prepare.submit(pack, artifact_root, task.root.name, fixture_tree_oid(repo, commit, f"{tasks_subdir}/{task.root.name}")[1],
                              prepare_code) for task in committed]
    prepared, _ = _collect(futures, PREPARE)
    progress.finish(PREPARE)
    (report,), _ = _collect([invariants_future], INVARIANTS)
    excluded = {**broken, **{t.task_id: uncommitted[t.root.name] for t in chosen if t.root.name in uncommitted}, **_gate(prepared, report)}
    progress.finish(INVARIANTS, f"{len(excluded)} task(s) excluded" if excluded else "")
    return PreparedTasks(
        repo=repo, commit=commit, tasks_subdir=tasks_subdir, runnable=[t for t in committed if t.task_id not in excluded],
        prepared={p.name: p for p in prepared}, excluded=excluded, code=stages.code_digest(*stages.ARM_CODE), pack=pack,
    )


def fan_out_arms(config: RunConfig, agent: AgentSpec, tasks: PreparedTasks, run_id: str, artifact_root: str,
                 storage: stages.ArtifactResultStorage) -> tuple[list[RunRecord], int, str]:
    """One agent's arms fanned out on the task runner (a paid agent's behind the budget guard, see
    `paid_arms`), then its records table. Returns (records, arms from cache, records key). Call inside a flow."""
    progress = reporter()
    stage = arm_stage(agent)
    start_matrix(stages.artifact_store(artifact_root), run_id)  # before the fan-out, as run_matrix does: every arm reads the run's secret
    specs = arm_specs(config, agent, tasks, run_id=run_id, artifact_root=artifact_root)
    progress.start(stage, len(specs))
    sealed = stages.read_sealed_matrix(storage, specs)
    if sealed is not None:
        for _ in specs:
            progress.advance(stage, cached=True)
        progress.finish(stage, f"{sum(r.outcome == 'pass' for r in sealed)} passed")
        return sealed, len(specs), _store_records(agent, artifact_root, run_id, sealed, storage)
    arm = stages.run_arm.with_options(result_storage=storage, retries=0 if agent.paid else 1, retry_delay_seconds=1,
                                      retry_condition_fn=stages.retry_condition)
    if agent.paid:
        records, cached = paid_arms(specs, arm, pair_guard(config, agent, run_id, artifact_root), config.runner.workers, stage)
    else:
        records, cached = _collect([arm.submit(spec) for spec in specs], stage)
    stages.seal_matrix(storage, specs, records)
    progress.finish(stage, f"{sum(r.outcome == 'pass' for r in records)} passed")
    return records, cached, _store_records(agent, artifact_root, run_id, records, storage)


def paid_arms(specs: list[ArmSpec], arm: Task, guard: PairGuard, workers: int, stage: str) -> tuple[list[RunRecord], int]:
    """A paid agent's arms, up to `workers` at once, each passing the budget guard first with every arm
    in flight reserving the arm ceiling (`PairGuard`): an arm starts only when finished spend plus the
    reservations plus its own ceiling fit the pair cap. When the guard stops the pair, the arms in
    flight finish (they are spending) before BudgetStop propagates. Returns (records in spec order,
    arms from cache)."""
    progress = reporter()
    results: dict[int, RunRecord] = {}
    in_flight: dict[PrefectFuture, int] = {}
    pending = list(enumerate(specs))
    cached = 0
    try:
        while pending or in_flight:
            spent = sum(r.cost_usd for r in results.values())
            if pending and len(in_flight) < workers and (not in_flight or guard.fits_another(spent, len(in_flight))):
                guard.before_arm(declared_spent_usd=spent + len(in_flight) * guard.arm_ceiling_usd)
                index, spec = pending.pop(0)
                in_flight[arm.submit(spec)] = index
                continue
            future = next(as_completed(list(in_flight)))
            future.wait()
            hit = future.state.is_completed() and future.state.name == "Cached"
            with cluster_loss_named(f"stage '{stage}'"):
                results[in_flight.pop(future)] = future.result()
            cached += hit
            progress.advance(stage, cached=hit)
    finally:
        for future in in_flight:
            future.wait()
    return [results[i] for i in range(len(specs))], cached


def record_provenance(config: RunConfig, agent: AgentSpec, tasks: PreparedTasks, run_id: str, artifact_root: str,
                      parent_run_id: str | None = None) -> str:
    """Store the run's provenance (`tasks_lib.run.provenance`) beside its records; return its key. With
    `parent_run_id`, the run is one agent's matrix of that nightly run, whose config it names."""
    provenance = run_provenance(
        run_id, agent=agent.name, conditions=config.conditions, trials=config.trials, corpus_commit=tasks.commit,
        tasks_root=tasks.tasks_subdir, embedder=config.embedder, sandbox=config.sandbox,
        provisioner_argv=config.provisioner.argv if config.provisioner else (),
        provisioner_env=config.provisioner.env if config.provisioner else None, config_name=config.name,
        provisioner_grants=config.provisioner.grants() if config.provisioner else None,
        config_digest=config.config_digest(), parent_run_id=parent_run_id,
        config_key=run_key(parent_run_id, RUN_CONFIG_JSON) if parent_run_id else None,
    )
    return write_provenance(stages.artifact_store(artifact_root), provenance)


def outside_warnings(config: RunConfig, excluded: dict[str, str], suite_lines: Sequence[str] = ()) -> list[str]:
    """Distrust warnings from outside the records: the tasks left out of the matrix, the suites' failed
    gates (a nightly run's) and the run config's provisioner warnings."""
    return [*(f"task {name} left out of the matrix: {reason}" for name, reason in sorted(excluded.items())),
            *suite_lines, *provisioner_warnings(config)]


def memory_texts_of(config: RunConfig, repo_root: str) -> dict[str, list[str]]:
    """Each task's memory texts, from the corpus the run config names (the graders' leak check)."""
    return {t.task_id: [m.text for m in t.manifest.memories] for t in scan_tasks(Path(repo_root) / config.tasks_root).tasks}


def grade_run(result: PairedResult, artifact_root: str, storage: stages.ArtifactResultStorage,
              memory_texts: dict[str, list[str]], outside: list[str]) -> tuple[str, dict[str, list[str]], dict[str, str]]:
    """The cached aggregate stage over one agent's run, as both `memtrial paired` and the nightly flow
    grade: returns (its records' digest, its tasks' memory texts, table -> key). Call inside a flow,
    with the progress stage GRADE started."""
    digest = stages.records_digest(result.records)
    texts = {k: v for k, v in memory_texts.items() if any(r.task_id == k for r in result.records)}
    aggregate = stages.aggregate.with_options(result_storage=storage)
    return digest, texts, counted(aggregate, GRADE, artifact_root, result.run_id, digest, stages.code_digest(*stages.GRADING_CODE),
                                  texts, outside)


def _store_records(agent: AgentSpec, artifact_root: str, run_id: str, records: list[RunRecord],
                   storage: stages.ArtifactResultStorage) -> str:
    progress = reporter()
    progress.start(records_stage(agent), 1)
    key = counted(stages.store_records.with_options(result_storage=storage), records_stage(agent), artifact_root, run_id, records)
    progress.finish(records_stage(agent))
    return key


def paired_run_name() -> str:
    """The flow run's name: its run id."""
    from prefect.runtime import flow_run

    return str(flow_run.parameters.get("run_id") or "paired")


@flow(name="paired", flow_run_name=paired_run_name, log_prints=False)
def paired_flow(config: RunConfig, run_id: str, repo_root: str, artifact_root: str, agent: AgentSpec | None = None) -> PairedResult:
    """Run the paired matrix of one agent (default: the calibration agent) on the checkout at
    `repo_root`, then grade it in the cached aggregate stage, as the nightly flow grades each agent's
    run (`grade_run`); its arms, records, receipts and grades go under runs/<run_id>/, with its status
    marker (`runs/<run_id>/status.json`: complete, or failed with the stage)."""
    agent = agent or config.all_agents[0]
    with run_marker(artifact_root, run_id, agents=[agent.name], memory_system=config.memory_system):
        progress = reporter()
        storage = stages.result_storage(artifact_root, config.result_root)
        progress.plan([PREPARE, INVARIANTS, arm_stage(agent), records_stage(agent), GRADE])
        tasks = prepare_tasks(config, repo_root, artifact_root, storage)
        records, cached, key = fan_out_arms(config, agent, tasks, run_id, artifact_root, storage)
        record_provenance(config, agent, tasks, run_id, artifact_root)
        result = PairedResult(run_id=run_id, artifact_root=artifact_root, records_key=key, records=records,
                              excluded=tasks.excluded, arms_cached=cached, skipped=skipped_of(config, tasks))
        progress.start(GRADE, 1)
        _, _, tables = grade_run(result, artifact_root, storage, memory_texts_of(config, repo_root),
                                 outside_warnings(config, tasks.excluded))
        progress.finish(GRADE)
    return result.model_copy(update={"tables": tables})


def agent_run_id(run_id: str, agent: AgentSpec) -> str:
    """Run id of one agent's matrix inside a nightly run: each agent is graded on its own."""
    return f"{run_id}-{agent.name}"


@flow(name="matrix", log_prints=False)
def matrix_flow(config: RunConfig, run_id: str, repo_root: str, artifact_root: str) -> list[PairedResult]:
    """Prepare and gate the tasks once, then every configured agent's matrix (calibration first),
    each under its own run id `<run_id>-<agent>`."""
    storage = stages.result_storage(artifact_root, config.result_root)
    tasks = prepare_tasks(config, repo_root, artifact_root, storage)
    results = []
    for agent in config.all_agents:
        sub_run = agent_run_id(run_id, agent)
        records, cached, key = fan_out_arms(config, agent, tasks, sub_run, artifact_root, storage)
        record_provenance(config, agent, tasks, sub_run, artifact_root, parent_run_id=run_id)
        results.append(PairedResult(run_id=sub_run, artifact_root=artifact_root, records_key=key, records=records,
                                    excluded=tasks.excluded, arms_cached=cached, skipped=skipped_of(config, tasks)))
    return results
