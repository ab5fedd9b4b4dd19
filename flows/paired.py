"""The paired flow: prepare and check every task, run the matrix (arms fanned out), store the records.

DAG: prepare (build, redact, certify; per task) and corpus invariants, in parallel -> only tasks
that certified clean and hold every invariant go on -> for each agent, the arms (task x condition x
trial, conditions interleaved) fan out on the task runner -> the records table. A paid agent's
arms pass the budget guard first and run one at a time with the guard between them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flows.settings import configure_prefect

configure_prefect()

from prefect import flow
from prefect.futures import PrefectFuture, as_completed
from pydantic import BaseModel

from flows import stages
from flows.budget import PairGuard
from flows.progress import reporter
from flows.status import run_marker
from tasks_lib.arm.steps import check_conditions, schedule, select_tasks, task_subdir_of
from tasks_lib.artifacts import run_key
from tasks_lib.contracts import PreparedCorpus, RunRecord
from tasks_lib.corpus.build import resolve_commit
from tasks_lib.corpus.prepare import fixture_tree_oid
from tasks_lib.corpus.tasks import CorpusCheckReport, LoadedTask, load_tasks
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.provenance import run_provenance, write_provenance
from tasks_lib.runconfig import RUN_CONFIG_JSON, AgentSpec, ArmSpec, RunConfig
from tasks_lib.trees import sha256_file

PREPARE, INVARIANTS = "prepare", "corpus invariants"


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
    return [f.result() for f in futures], cached


def _gate(prepared: list[PreparedCorpus], report: CorpusCheckReport) -> dict[str, str]:
    """Tasks that must not run, with the reason."""
    excluded = {p.name: f"certification: {p.certification.verdict}" for p in prepared if p.certification.verdict != "clean"}
    for check in report.tasks:
        if check.failures:
            excluded.setdefault(check.task_id, "invariants: " + ", ".join(sorted({f.invariant for f in check.failures})))
    return excluded


def pair_guard(config: RunConfig, agent: AgentSpec, run_id: str, artifact_root: str) -> PairGuard:
    """The budget guard of a paid agent's pair; a paid agent without a budget config cannot run."""
    if not config.budget.config:
        raise MemtrialError(
            f"agent {agent.name!r} can spend money but the run config has no budget.config; "
            "add budget: {config: <budget file>} (see flows/budget.py) or run only the calibration agent"
        )
    return PairGuard(config.budget.config, artifact_root, run_id, agent.name)


def arm_specs(config: RunConfig, agent: AgentSpec, tasks: list[LoadedTask], prepared: dict[str, PreparedCorpus], *,
              run_id: str, repo: Path, commit: str, tasks_subdir: str, artifact_root: str, code: str) -> list[ArmSpec]:
    """One ArmSpec per scheduled attempt (conditions interleaved), with the digests its cache key uses."""
    conditions = check_conditions(list(config.conditions), LANES)
    trees = {t.task_id: fixture_tree_oid(repo, commit, f"{tasks_subdir}/{t.root.name}")[1] for t in tasks}
    manifests = {t.task_id: sha256_file(t.root / "task.json") for t in tasks}
    specs = []
    for attempt in schedule(tasks, conditions, config.trials):
        task = attempt.task
        specs.append(ArmSpec(
            run_id=run_id, task_id=task.task_id, task_folder=str(task.root), condition=attempt.condition,
            trial=attempt.trial, order=attempt.order, agent=agent, sandbox=config.sandbox, embedder=config.embedder,
            provisioner=config.provisioner,
            repo_root=str(repo), commit=commit, tasks_subdir=tasks_subdir, artifact_root=artifact_root,
            corpus_id=prepared[task.task_id].build.corpus_id, task_tree_oid=trees[task.task_id],
            manifest_sha256=manifests[task.task_id], verifier_sha256=task.manifest.verifier.asset.sha256,
            config_digest=config.config_digest(), code_digest=code,
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


def prepare_tasks(config: RunConfig, repo_root: str, storage: stages.ArtifactResultStorage) -> PreparedTasks:
    """Stages prepare and corpus invariants (in parallel), then the gate. Call inside a flow."""
    progress = reporter()
    repo = Path(repo_root).resolve()
    tasks_root = repo / config.tasks_root
    commit = resolve_commit(repo, config.revision, str(repo))
    tasks_subdir = task_subdir_of(tasks_root, repo)
    chosen = select_tasks(load_tasks(tasks_root), config.tasks)
    progress.start(PREPARE, len(chosen))
    progress.start(INVARIANTS, 1)
    _, tasks_tree = fixture_tree_oid(repo, commit, tasks_subdir)
    invariants = stages.check_invariants.with_options(result_storage=storage)
    invariants_future = invariants.submit(str(tasks_root), str(repo), commit, tasks_tree, stages.code_digest(*stages.INVARIANTS_CODE))
    prepare = stages.prepare_task_corpus.with_options(result_storage=storage)
    prepare_code = stages.prepare_code_digest()
    futures = []
    for task in chosen:
        manifest = task.root / "task.json"
        _, tree = fixture_tree_oid(repo, commit, f"{tasks_subdir}/{task.root.name}/{task.manifest.fixture}")
        futures.append(prepare.submit(str(repo), commit, str(manifest), tree, sha256_file(manifest), prepare_code))
    prepared, _ = _collect(futures, PREPARE)
    progress.finish(PREPARE)
    (report,), _ = _collect([invariants_future], INVARIANTS)
    excluded = _gate(prepared, report)
    progress.finish(INVARIANTS, f"{len(excluded)} task(s) excluded" if excluded else "")
    return PreparedTasks(
        repo=repo, commit=commit, tasks_subdir=tasks_subdir, runnable=[t for t in chosen if t.task_id not in excluded],
        prepared={p.name: p for p in prepared}, excluded=excluded, code=stages.code_digest(*stages.ARM_CODE),
    )


def fan_out_arms(config: RunConfig, agent: AgentSpec, tasks: PreparedTasks, run_id: str, artifact_root: str,
                 storage: stages.ArtifactResultStorage) -> tuple[list[RunRecord], int, str]:
    """One agent's arms fanned out on the task runner (a paid agent's one at a time behind the budget
    guard), then its records table. Returns (records, arms from cache, records key). Call inside a flow."""
    progress = reporter()
    stage = arm_stage(agent)
    specs = arm_specs(config, agent, tasks.runnable, tasks.prepared, run_id=run_id, repo=tasks.repo, commit=tasks.commit,
                       tasks_subdir=tasks.tasks_subdir, artifact_root=artifact_root, code=tasks.code)
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
        guard = pair_guard(config, agent, run_id, artifact_root)
        records, cached = [], 0
        for spec in specs:
            guard.before_arm(declared_spent_usd=sum(r.cost_usd for r in records))
            done, hits = _collect([arm.submit(spec)], stage)
            records.extend(done)
            cached += hits
    else:
        records, cached = _collect([arm.submit(spec) for spec in specs], stage)
    stages.seal_matrix(storage, specs, records)
    progress.finish(stage, f"{sum(r.outcome == 'pass' for r in records)} passed")
    return records, cached, _store_records(agent, artifact_root, run_id, records, storage)


def record_provenance(config: RunConfig, agent: AgentSpec, tasks: PreparedTasks, run_id: str, artifact_root: str,
                      parent_run_id: str | None = None) -> str:
    """Store the run's provenance (`tasks_lib.provenance`) beside its records; return its key. With
    `parent_run_id`, the run is one agent's matrix of that nightly run, whose config it names."""
    provenance = run_provenance(
        run_id, agent=agent.name, conditions=config.conditions, trials=config.trials, corpus_commit=tasks.commit,
        tasks_root=tasks.tasks_subdir, embedder=config.embedder, sandbox=config.sandbox,
        provisioner_argv=config.provisioner.argv if config.provisioner else (),
        provisioner_env=config.provisioner.env if config.provisioner else None, config_name=config.name,
        config_digest=config.config_digest(), parent_run_id=parent_run_id,
        config_key=run_key(parent_run_id, RUN_CONFIG_JSON) if parent_run_id else None,
    )
    return write_provenance(stages.artifact_store(artifact_root), provenance)


def _store_records(agent: AgentSpec, artifact_root: str, run_id: str, records: list[RunRecord],
                   storage: stages.ArtifactResultStorage) -> str:
    progress = reporter()
    progress.start(records_stage(agent), 1)
    key = stages.store_records.with_options(result_storage=storage)(artifact_root, run_id, records)
    progress.advance(records_stage(agent))
    progress.finish(records_stage(agent))
    return key


def paired_run_name() -> str:
    """The flow run's name: its run id."""
    from prefect.runtime import flow_run

    return str(flow_run.parameters.get("run_id") or "paired")


@flow(name="paired", flow_run_name=paired_run_name, log_prints=False)
def paired_flow(config: RunConfig, run_id: str, repo_root: str, artifact_root: str, agent: AgentSpec | None = None) -> PairedResult:
    """Run the paired matrix of one agent (default: the calibration agent) on the checkout at
    `repo_root`; its arms, records and receipts go under runs/<run_id>/, with its status marker
    (`runs/<run_id>/status.json`: complete, or failed with the stage)."""
    agent = agent or config.all_agents[0]
    with run_marker(artifact_root, run_id, agents=[agent.name], memory_system=config.memory_system):
        storage = stages.result_storage(artifact_root, config.result_root)
        reporter().plan([PREPARE, INVARIANTS, arm_stage(agent), records_stage(agent)])
        tasks = prepare_tasks(config, repo_root, storage)
        records, cached, key = fan_out_arms(config, agent, tasks, run_id, artifact_root, storage)
        record_provenance(config, agent, tasks, run_id, artifact_root)
    return PairedResult(run_id=run_id, artifact_root=artifact_root, records_key=key, records=records,
                        excluded=tasks.excluded, arms_cached=cached)


def agent_run_id(run_id: str, agent: AgentSpec) -> str:
    """Run id of one agent's matrix inside a nightly run: each agent is graded on its own."""
    return f"{run_id}-{agent.name}"


@flow(name="matrix", log_prints=False)
def matrix_flow(config: RunConfig, run_id: str, repo_root: str, artifact_root: str) -> list[PairedResult]:
    """Prepare and gate the tasks once, then every configured agent's matrix (calibration first),
    each under its own run id `<run_id>-<agent>`."""
    storage = stages.result_storage(artifact_root, config.result_root)
    tasks = prepare_tasks(config, repo_root, storage)
    results = []
    for agent in config.all_agents:
        sub_run = agent_run_id(run_id, agent)
        records, cached, key = fan_out_arms(config, agent, tasks, sub_run, artifact_root, storage)
        record_provenance(config, agent, tasks, sub_run, artifact_root, parent_run_id=run_id)
        results.append(PairedResult(run_id=sub_run, artifact_root=artifact_root, records_key=key, records=records,
                                    excluded=tasks.excluded, arms_cached=cached))
    return results
