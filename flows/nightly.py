"""The nightly flow: the paired matrix of every configured agent, the suites, then grading,
aggregation and the report of each agent's run, and the trend snapshot with its regression check.

Deployment entrypoint: `flows/nightly.py:nightly`, parameterized by a config path (relative to the
project root, or absolute). `memtrial run` calls the same flow. A nightly run `R` keeps its resolved
config at `runs/R/run-config.json` (and a local copy under `$MEMTRIAL_HOME/runs/R/`), so
`memtrial rerun R` re-runs it with the same parameters and every completed stage comes from cache.
It also leaves `runs/R/status.json` (running, then complete or failed; `flows/runtime/status.py`); its
Prefect flow run is named R, tagged `agent:<name>` and `memory:<system>`, and publishes the
headline of each agent's run as Prefect artifacts (`flows/report_artifacts.py`).
"""

from __future__ import annotations

from pathlib import Path

from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import flow
from pydantic import BaseModel

from flows import stages
from flows.paired import (
    GRADE,
    INVARIANTS,
    PREPARE,
    arm_stage,
    grade_run,
    matrix_flow,
    memory_texts_of,
    outside_warnings,
    records_stage,
)
from flows.report_artifacts import publish_headline
from flows.runners import ready_task_runner
from flows.runtime.progress import counted, reporter
from flows.runtime.secrets import resolve_secret_references
from flows.runtime.settings import (
    PROJECT_ROOT,
    config_file,
    default_artifact_root,
    local_config_copy,
)
from flows.runtime.status import label_flow_run, run_marker, run_tags
from flows.stages import suite_stage
from flows.suites import (
    TREND,
    TREND_SUITES,
    collect_suites,
    submit_suites,
    suite_failures,
    trend_snapshots,
)
from tasks_lib.analysis.aggregate import SUMMARY_JSON
from tasks_lib.analysis.grading import GradingSummary
from tasks_lib.artifacts import new_run_id, open_store, run_key
from tasks_lib.contracts import RunRecord, dump_document
from tasks_lib.run.config import RUN_CONFIG_JSON, RunConfig, load_run_config
from tasks_lib.run.layout import NIGHTLY_JSON
from tasks_lib.run.preflight import preflight
from tasks_lib.trees import write_atomically

DEFAULT_CONFIG = "configs/default.yaml"
REPORT = "report"


class AgentOutcome(BaseModel):
    """One agent's part of a nightly run."""

    agent: str
    run_id: str
    """The agent's own run id (`<nightly run>-<agent>`)."""
    records_key: str
    tables: dict[str, str]
    """Aggregation table name -> artifact key."""
    report: str
    """Location of the HTML report."""
    passes: int
    attempts: int
    arms_cached: int
    cells: list[dict[str, str | int]]
    """Per task and condition: passes, runs, injection confirmed, mean tokens."""
    distrust: list[str] = []
    """The grading summary's distrust warnings (run-level ones included); `memtrial run` exits 1 on any."""


class NightlyResult(BaseModel):
    """What one nightly flow run produced; stored as runs/<run_id>/nightly.json."""

    run_id: str
    artifact_root: str
    config_key: str
    excluded: dict[str, str]
    agents: list[AgentOutcome]
    suites: dict[str, str]
    """Suite name -> artifact key of its result."""
    trend: dict[str, str]
    """Suite name -> folder of the trend curve its snapshot joined (`trend/<curve>/`)."""
    regressions: list[str]
    """Regressions of this run's snapshots against the previous ones; empty when none."""
    skipped: list[str] = []
    """Cells the matrix skipped, `<task> <condition>`: the task carries no planted state for the condition."""


def resolve_config(config_path: str | None, artifact_root: str | None = None) -> tuple[RunConfig, Path]:
    """Load the config (default configs/default.yaml; relative paths are from the project root) with
    its artifact root (`artifact_root` wins) and budget config made absolute."""
    path = config_file(config_path or DEFAULT_CONFIG)
    config = load_run_config(path)
    root = artifact_root or config.artifact_root or default_artifact_root()
    if "://" not in root:
        root = str((PROJECT_ROOT / root).resolve())
    update: dict[str, object] = {"artifact_root": root}
    if config.budget.config and not Path(config.budget.config).is_absolute():
        update["budget"] = config.budget.model_copy(update={"config": str((path.parent / config.budget.config).resolve())})
    return config.model_copy(update=update), path


def save_run_config(config: RunConfig, run_id: str) -> str:
    """Store the resolved config in the artifact store and locally (atomic writes); return its key."""
    key = run_key(run_id, RUN_CONFIG_JSON)
    open_store(config.artifact_root or default_artifact_root()).put_json(key, config)
    write_atomically(local_config_copy(run_id), dump_document(config), "the local run config")
    return key


def cells_of(records: list[RunRecord]) -> list[dict[str, str | int]]:
    """Per task and condition: passes, runs, injection confirmed and mean tokens."""
    cells: dict[tuple[str, str], dict[str, int | str]] = {}
    tokens: dict[tuple[str, str], int] = {}
    for r in records:
        cell = cells.setdefault((r.task_id, r.condition), {"task": r.task_id, "condition": r.condition, "passes": 0, "runs": 0, "injected": 0})
        cell["runs"] = int(cell["runs"]) + 1
        cell["passes"] = int(cell["passes"]) + (r.outcome == "pass")
        cell["injected"] = int(cell["injected"]) + (r.injection == "yes")
        tokens[(r.task_id, r.condition)] = tokens.get((r.task_id, r.condition), 0) + r.input_tokens + r.output_tokens
    return [{**c, "mean_tokens": round(tokens[k] / int(c["runs"]))} for k, c in cells.items()]


def nightly_stages(config: RunConfig) -> list[str]:
    """Progress stages of a nightly run, in order."""
    agents = config.all_agents
    return [PREPARE, INVARIANTS, *(s for a in agents for s in (arm_stage(a), records_stage(a))),
            *(suite_stage(s) for s in config.suites), *([TREND] if set(config.suites) & set(TREND_SUITES) else []), GRADE, REPORT]


def nightly_run_name() -> str:
    """The flow run's name: its run id (a run started without one is renamed once its id is drawn)."""
    from prefect.runtime import flow_run

    return flow_run.parameters.get("run_id") or "nightly"


@flow(name="nightly", flow_run_name=nightly_run_name, log_prints=False)
def nightly(config_path: str = DEFAULT_CONFIG, run_id: str | None = None, artifact_root: str | None = None) -> NightlyResult:
    """Everything: every agent's paired matrix, the configured suites, grading, aggregation and the
    report of each agent's run. `run_id` reruns a run (completed stages come from cache);
    `artifact_root` overrides the config's. The flow run is named after the run id and tagged with
    its agents and memory system; the run leaves `runs/<run_id>/status.json` (complete or failed)
    and, when complete, its headline as Prefect artifacts."""
    resolve_secret_references()
    config, path = resolve_config(config_path, artifact_root)
    run_id = run_id or new_run_id("nightly")
    artifact_root = config.artifact_root or default_artifact_root()  # resolved: never None here
    agents = [a.name for a in config.all_agents]
    label_flow_run(run_id, run_tags(agents, [config.memory_system]))
    with run_marker(artifact_root, run_id, agents=agents, memory_system=config.memory_system):
        preflight(config, PROJECT_ROOT, str(path))
        result, builds = _nightly(config, run_id, artifact_root)
        label_flow_run(run_id, run_tags([], builds))
        publish_headline(artifact_root, run_id, [(a.agent, a.run_id) for a in result.agents])
    return result


def _nightly(config: RunConfig, run_id: str, artifact_root: str) -> tuple[NightlyResult, list[str]]:
    """The nightly flow's stages (see `nightly`); returns the result and the memory-system builds its records measured."""
    progress = reporter()
    progress.plan(nightly_stages(config))
    config_key = save_run_config(config, run_id)
    storage = stages.result_storage(artifact_root, config.result_root)
    runner = ready_task_runner(config.runner)

    suites = submit_suites(config, run_id, artifact_root)  # they run while the matrix runs
    paired = matrix_flow.with_options(task_runner=runner)(config, run_id, str(PROJECT_ROOT), artifact_root)
    suite_keys = collect_suites(suites, config, run_id, artifact_root)
    trend = trend_snapshots(config, run_id, artifact_root, suite_keys) if set(suite_keys) & set(TREND_SUITES) else {}

    excluded = paired[0].excluded if paired else {}
    suite_lines = [line for name, key in suite_keys.items() for line in suite_failures(name, artifact_root, key)]
    outside = outside_warnings(config, excluded, suite_lines)
    memory_texts = memory_texts_of(config, str(PROJECT_ROOT))
    report_code = stages.code_digest(*stages.REPORT_CODE)
    render = stages.report.with_options(result_storage=storage)
    outcomes = []
    progress.start(GRADE, len(paired))
    graded = []
    for result in paired:
        graded.append((result, *grade_run(result, artifact_root, storage, memory_texts, outside)))
    progress.finish(GRADE)
    store = open_store(artifact_root)
    progress.start(REPORT, len(graded))
    for agent, (result, digest, texts, tables) in zip(config.all_agents, graded):
        location = counted(render, REPORT, artifact_root, result.run_id, digest, report_code, texts)
        outcomes.append(AgentOutcome(
            agent=agent.name,
            run_id=result.run_id, records_key=result.records_key, tables=tables, report=location,
            passes=sum(r.outcome == "pass" for r in result.records), attempts=len(result.records),
            arms_cached=result.arms_cached, cells=cells_of(result.records),
            distrust=list(store.get_json(tables[SUMMARY_JSON], GradingSummary).distrust),
        ))
    progress.finish(REPORT)
    summary = NightlyResult(run_id=run_id, artifact_root=artifact_root, config_key=config_key,
                            excluded=excluded, skipped=paired[0].skipped if paired else [], agents=outcomes, suites=suite_keys,
                            trend={k: v["curve"] for k, v in trend.items()},
                            regressions=[m for v in trend.values() for m in v["regressions"]])
    store.put_bytes(run_key(run_id, NIGHTLY_JSON), summary.model_dump_json(indent=2).encode())
    return summary, sorted({r.build_under_test for result in paired for r in result.records})
