"""`memtrial run`, `memtrial paired` and `memtrial rerun`: the commands that run Prefect flows.

Each uses one Prefect API (`flows.runtime.localserver.ensure_api`: PREFECT_API_URL, else a running
`memtrial server`, else a local server it starts and that dies with it; analytics off),
shows a live progress bar with stage and task counts on a terminal (plain lines otherwise), and
ends by saying where the records and reports are. A failed run names the command that reruns it
from cache; an interrupted one (SIGINT, SIGTERM: `flows.runtime.interrupt`) stops within seconds, says the stage
it was in and how to resume in one line, and exits 130.
"""

from __future__ import annotations

import logging
import os
import shlex
import signal
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.common import DEFAULT_EMBEDDER, JsonFlag, emit_json, err, out, summary_table
from flows.cli.options import (
    AgentOpt,
    ArtifactRootOpt,
    BudgetOpt,
    ConditionsOpt,
    EmbedderOpt,
    OptionalTasksOpt,
    PlainOpt,
    RevisionOpt,
    TrialsOpt,
)
from tasks_lib.errors import MemtrialError

if TYPE_CHECKING:
    from tasks_lib.analysis.grading import GradingSummary

COLUMNS = ["task", "condition", "passes", "runs", "injected", "mean_tokens"]



def _start_prefect() -> None:
    """Prefect's local mode with one API (said on stderr), quiet enough for a live progress bar."""
    # The progress display and the one-line error say what happened; Prefect's own log lines
    # (tracebacks of failed stages included) stay in the Prefect database, shown only when asked for.
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")
    # The embedded ephemeral server logs a harmless shutdown race as an ERROR traceback.
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    from flows.runtime.settings import configure_prefect

    configure_prefect()
    from flows.runtime.localserver import ensure_api

    ensure_api()  # an owned server starts now, while the command checks its input; `_api_ready` waits for it
    logging.getLogger("prefect").setLevel(os.environ["PREFECT_LOGGING_LEVEL"])
    os.environ.setdefault("DASK_LOGGING__DISTRIBUTED", "warning")  # a local Dask cluster's workers
    # The ephemeral server's database pool reports a cancelled rollback at shutdown as an ERROR traceback.
    logging.getLogger("sqlalchemy.pool").setLevel(logging.CRITICAL)
    logging.getLogger("distributed").setLevel(logging.WARNING)


def _api_ready() -> None:
    """Wait for the Prefect API (an owned server's start) and say which one it is."""
    from flows.runtime.localserver import ready

    line = ready()
    if line:
        err.print(line, markup=False, highlight=False)


def _failed(run_id: str, error: BaseException, *, paired: bool = False) -> MemtrialError:
    """The one line a failed run ends with, recommending only a command that accepts the run: `rerun`
    takes a run of `memtrial run` (it reads its stored run config); a paired run stores none, so its
    line names `show` (which takes any run) and a new `memtrial paired`."""
    detail = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if paired:
        return MemtrialError(f"run {run_id} failed: {detail}; 'memtrial show {run_id}' shows what it stored, and 'memtrial paired' "
                             "with the same options starts a new run ('memtrial rerun' resumes only runs of 'memtrial run')")
    return MemtrialError(f"run {run_id} failed: {detail}; 'memtrial rerun {run_id}' recomputes only the failed stages")


def _stop_if_interrupted(artifact_root: str, run_id: str, resume: str) -> None:
    """When a SIGINT or SIGTERM stopped the run: one line (the stage it was in, how to resume) and exit 130."""
    from flows.runtime.interrupt import EXIT_STATUS, tripped
    from tasks_lib.artifacts import open_store
    from tasks_lib.errors import ArtifactError, ContractError
    from tasks_lib.run.status import read_status

    signum = tripped()
    if signum is None:
        return
    try:
        status = read_status(open_store(artifact_root), run_id) if artifact_root else None
    except (ArtifactError, ContractError):
        status = None
    stage = f" at stage '{status.stage}'" if status is not None and status.stage else ""
    err.print(f"memtrial: run {run_id} interrupted ({signal.Signals(signum).name}){stage}; nothing it cut short was cached; {resume}",
              markup=False, highlight=False)
    raise typer.Exit(EXIT_STATUS)


def _run_nightly(config_path: str, run_id: str, artifacts: str | None, plain: bool, as_json: bool) -> None:
    from flows.nightly import nightly, resolve_config
    from flows.runtime.interrupt import interruptible, tripped
    from flows.runtime.progress import reporting

    config, _ = resolve_config(config_path, artifacts)
    _api_ready()
    err.print(f"memtrial: run {run_id} ({config.name})")
    try:
        with interruptible(), reporting(err, live=False if plain or as_json else None):
            result = nightly.with_options(retries=config.flow_retries)(config_path=config_path, run_id=run_id, artifact_root=artifacts)
    except BaseException as error:
        if tripped() is None and not isinstance(error, Exception):
            raise
        _stop_if_interrupted(config.artifact_root or "", run_id, f"'memtrial rerun {run_id}' resumes it")
        raise _failed(run_id, error) from None
    location = f"{result.artifact_root.rstrip('/')}/runs/{run_id}/"
    distrusted = bool(result.regressions) or any(agent.distrust for agent in result.agents)
    if as_json:
        emit_json(result.model_dump(mode="json"))
        if distrusted:
            raise typer.Exit(1)
        return
    for agent in result.agents:
        out.print(summary_table(agent.cells, COLUMNS, f"{agent.agent}: {agent.passes}/{agent.attempts} passed, {agent.arms_cached} arms from cache (run {agent.run_id})"))
    for name, reason in sorted(result.excluded.items()):
        out.print(f"excluded {name}: {reason}")
    _print_skipped(result.skipped)
    from flows.suites import suite_headline

    for name, key in sorted(result.suites.items()):
        out.print(f"suite {name}: {result.artifact_root.rstrip('/')}/{key}")
        out.print(f"  {suite_headline(name, result.artifact_root, key)}")
    for name, key in sorted(result.trend.items()):
        out.print(f"trend {name}: {result.artifact_root.rstrip('/')}/{key}")
    for message in result.regressions:
        out.print(f"REGRESSION {message}")
    out.print(f"artifacts: {location}")
    for agent in result.agents:
        out.print(f"report ({agent.agent}): {agent.report}")
    for agent in result.agents:
        _print_answer(agent.agent, agent.distrust, _stored_summary(result.artifact_root, agent.run_id))
    if distrusted:
        raise typer.Exit(1)


def _preflight_file(config_path: str, artifacts: str | None, command: str) -> None:
    """Refuse the run config at `config_path` (relative: from the project root) and the artifact root it
    would use when a preflight check finds a problem (a bad name, option or list, a root that cannot be
    written, a sandbox that cannot run the check here), before Prefect starts; print its notes."""
    from flows.runtime.settings import PROJECT_ROOT, config_file
    from tasks_lib.run.config import load_run_config

    path = config_file(config_path)
    config = load_run_config(path)  # a typo is refused here, before any check imports what it probes
    _check_root(artifacts or (None if config.artifact_root else _default_root()), "--artifacts" if artifacts else None, command)
    from tasks_lib.run.preflight import preflight

    _print_notes(preflight(config.model_copy(update={"artifact_root": None}) if artifacts else config, PROJECT_ROOT, str(path)))


def _default_root() -> str:
    """$MEMTRIAL_ARTIFACT_ROOT, else the artifact root under $MEMTRIAL_HOME."""
    from flows.runtime.settings import default_artifact_root

    return default_artifact_root()


def _check_root(root: str | None, option: str | None, command: str, base: Path | None = None) -> None:
    """Refuse an artifact root given by `option` (None: by the environment or the default) that cannot
    be written, in one line naming where it was given; a relative root is read from `base` (default:
    the project root, as `run` reads it)."""
    if root is None:
        return
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.errors import ContractError
    from tasks_lib.run.preflight import root_violation

    violation = root_violation(root, option, command, base or PROJECT_ROOT)
    if violation is not None:
        raise ContractError([violation])


def _print_notes(notes: Sequence[str]) -> None:
    """Preflight's notes (a broken task the run does not name), each on one stderr line."""
    for note in notes:
        err.print(f"memtrial: note: {note}", markup=False, highlight=False)


def _print_distrust(agent: str, lines: Sequence[str]) -> None:
    """Each distrust warning on its own line (stdout), so no one quotes the run's figures without seeing it."""
    for line in lines:
        out.print(f"DISTRUST ({agent}): {line}", markup=False, highlight=False)


def run(
    config: Annotated[Path | None, typer.Option("--config", help="Run config (YAML/JSON; default configs/default.yaml: the embedded default).")] = None,
    artifacts: ArtifactRootOpt = None,
    plain: PlainOpt = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the nightly flow: every agent's paired matrix, the suites, grading and the report."""
    path = str(config.resolve()) if config else "configs/default.yaml"
    _preflight_file(path, artifacts, "memtrial run")
    from tasks_lib.artifacts import new_run_id

    _start_prefect()
    _run_nightly(path, new_run_id("run"), artifacts, plain, as_json)


def rerun(
    run_id: Annotated[str, typer.Argument(help="Id of the run to re-run with its stored parameters.")],
    artifacts: ArtifactRootOpt = None,
    plain: PlainOpt = False,
    as_json: JsonFlag = False,
) -> None:
    """Re-run RUN_ID with its stored config: completed stages come from cache, only failed ones run."""
    from flows.runtime.settings import local_config_copy
    from tasks_lib.artifacts import open_store, run_key
    from tasks_lib.contracts import dump_document
    from tasks_lib.errors import ArtifactNotFound
    from tasks_lib.run.config import RUN_CONFIG_JSON, RunConfig

    local = local_config_copy(run_id)
    if not local.is_file():
        if artifacts is None:
            raise MemtrialError(f"run {run_id!r}: no stored config at {local}; pass --artifacts ROOT where the run's artifacts are")
        try:
            stored = open_store(artifacts).get_json(run_key(run_id, RUN_CONFIG_JSON), RunConfig)
        except ArtifactNotFound:
            raise MemtrialError(f"run {run_id!r}: {artifacts.rstrip('/')}/{run_key(run_id, RUN_CONFIG_JSON)} does not exist; is it a run of 'memtrial run'?") from None
        local.parent.mkdir(parents=True, exist_ok=True)
        local.write_bytes(dump_document(stored))
    _preflight_file(str(local), artifacts, "memtrial rerun")  # its arms that failed run again
    _start_prefect()
    _run_nightly(str(local), run_id, artifacts, plain, as_json)


def _provisioner_option(command: str | None, env: list[str]) -> dict[str, Any]:
    """RunConfig fields for `--provisioner` / `--provisioner-env`."""
    if command is None:
        if env:
            raise MemtrialError("--provisioner-env: only applies with --provisioner; name the provisioner command too")
        return {}
    try:
        argv = shlex.split(command)
    except ValueError as error:
        raise MemtrialError(f"--provisioner: cannot split {command!r} into a command ({error}); fix the quoting") from None
    if not argv:
        raise MemtrialError("--provisioner: empty; give the provisioner's command, e.g. 'memtrial-reference-provisioner'")
    variables = {}
    for item in env:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise MemtrialError(f"--provisioner-env: {item!r} is not KEY=VALUE")
        variables[name] = value
    return {"memory_system": "provisioner", "provisioner": {"argv": argv, "env": variables}}


PAIRED = "memtrial paired options"
"""How `paired`'s refusals name their source: its options are its input (fields named as in a run config)."""


def _names(text: str, option: str) -> list[str]:
    """A comma-separated list of names; an empty one, or an empty name in it, is refused (it would
    otherwise read as "every task" or drop a name the user meant)."""
    names = [part.strip() for part in text.split(",")]
    if not any(names):
        raise MemtrialError(f"{PAIRED}: option {option}: {text!r} names nothing; give comma-separated names"
                            + (", or leave --tasks out to run every task" if option == "--tasks" else ""))
    if not all(names):
        raise MemtrialError(f"{PAIRED}: option {option}: {text!r} has an empty name between commas; remove the extra comma")
    return names


def paired(
    agent: AgentOpt = "calibration",
    tasks: OptionalTasksOpt = None,
    conditions: ConditionsOpt = "off,on",
    trials: TrialsOpt = 1,
    sandbox: Annotated[str, typer.Option(help="Sandbox the agent's commands run in: local or docker.")] = "local",
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    provisioner: Annotated[str | None, typer.Option(help="Measure the memory system this provisioner command reaches (restore, snapshot, destroy) instead of the embedded store, e.g. 'memtrial-reference-provisioner'.")] = None,
    provisioner_env: Annotated[list[str] | None, typer.Option("--provisioner-env", help="KEY=VALUE for the provisioner's environment (repeatable).")] = None,
    budget: BudgetOpt = None,
    workers: Annotated[int, typer.Option(help="Arms run in parallel (thread pool).")] = 2,
    artifacts: ArtifactRootOpt = None,
    revision: RevisionOpt = "HEAD",
    plain: PlainOpt = False,
    as_json: JsonFlag = False,
) -> None:
    """Run the paired matrix of one agent as a Prefect flow: every task under every condition,
    several trials, conditions interleaved; prints passes, injection and tokens per cell. The reference
    memory system embeds with the nightly default's embedder unless --embedder says otherwise."""
    from flows.runtime.settings import PROJECT_ROOT, default_artifact_root
    from tasks_lib.artifacts import new_run_id
    from tasks_lib.contracts import ContractError
    from tasks_lib.run.config import AgentSpec, RunConfig, RunnerSpec

    memory = _provisioner_option(provisioner, provisioner_env or [])
    try:
        config = RunConfig(
            **memory,
            tasks=_names(tasks, "--tasks") if tasks is not None else None,
            conditions=_names(conditions, "--conditions"), trials=trials,
            sandbox=sandbox, embedder=embedder, agents=[AgentSpec(name=agent)], revision=revision,  # type: ignore[arg-type]
            runner=RunnerSpec(workers=workers), budget={"config": str(budget.resolve()) if budget else None},  # type: ignore[arg-type]
        )
    except ValueError as error:
        from tasks_lib.contracts import violations_of

        raise ContractError(violations_of(error, PAIRED)) from None  # type: ignore[arg-type]
    from tasks_lib.run.preflight import preflight

    _check_root(artifacts or default_artifact_root(), "--artifacts" if artifacts else None, PAIRED, Path.cwd())
    _print_notes(preflight(config, PROJECT_ROOT, PAIRED))
    _start_prefect()
    from flows.nightly import cells_of
    from flows.paired import paired_flow
    from flows.runners import ready_task_runner
    from flows.runtime.interrupt import interruptible, tripped
    from flows.runtime.progress import reporting

    root = artifacts or default_artifact_root()
    run_id = new_run_id("paired")
    spec = next(a for a in config.all_agents if a.name == agent)
    _api_ready()
    err.print(f"memtrial: paired run {run_id} ({agent}: {len(config.conditions)} conditions x {trials} trial(s))")
    try:
        with interruptible(), reporting(err, live=False if plain or as_json else None):
            result = paired_flow.with_options(task_runner=ready_task_runner(config.runner))(config, run_id, str(PROJECT_ROOT), root, spec)
    except BaseException as error:
        if tripped() is None and not isinstance(error, Exception):
            raise
        _stop_if_interrupted(root, run_id, "the same 'memtrial paired' command runs it again (prepared tasks and invariants from cache)")
        if isinstance(error, MemtrialError):
            raise
        raise _failed(run_id, error, paired=True) from None
    cells: list[dict[str, Any]] = cells_of(result.records)
    location = f"{root.rstrip('/')}/runs/{run_id}/"
    summary = _stored_summary(root, result.run_id)  # graded in the flow's cached aggregate stage, as `run` grades
    if summary is None:
        raise MemtrialError(f"run {run_id}: no summary.json under {location} after grading; 'memtrial report {run_id}' grades it again")
    distrust = summary.distrust
    if as_json:
        emit_json({"run_id": run_id, "artifacts": location, "records": result.records_key, "cells": cells, "excluded": result.excluded,
                   "skipped": result.skipped, "distrust": list(distrust)})
        if distrust:
            raise typer.Exit(1)
        return
    out.print(summary_table(cells, COLUMNS, f"paired run {run_id} ({agent})"))
    for name, reason in sorted(result.excluded.items()):
        out.print(f"excluded {name}: {reason}")
    _print_skipped(result.skipped)
    out.print(f"records: {root.rstrip('/')}/{result.records_key}")
    _print_answer(agent, distrust, summary)
    if distrust:
        raise typer.Exit(1)


def _print_skipped(skipped: list[str]) -> None:
    """One line per cell the matrix skipped (a task without the condition's planted state)."""
    if skipped:
        out.print(f"skipped {len(skipped)} cell(s) whose task carries no planted state for the condition: {', '.join(skipped)}")


def _stored_summary(root: str, run_id: str) -> GradingSummary | None:
    """The grading summary a run stored (a paired run, or one agent's run of a nightly run), or None
    when it holds none."""
    from tasks_lib.analysis.grading import GradingSummary
    from tasks_lib.artifacts import open_store, run_key
    from tasks_lib.errors import ArtifactNotFound
    from tasks_lib.run.layout import SUMMARY_JSON

    try:
        return open_store(root).get_json(run_key(run_id, SUMMARY_JSON), GradingSummary)
    except ArtifactNotFound:
        return None


def _print_answer(agent: str, distrust: Sequence[str], summary: GradingSummary | None) -> None:
    """The run's last lines, where people look: its distrust warnings first, then whether memory helped
    (success on - off with its interval and p, net MUI, power), the token difference and the delivery
    rate of each condition with memory."""
    from flows.cli.report import headline_lines

    _print_distrust(agent, distrust)
    effect = None if summary is None else next((c for c in summary.headline if c.kind == "memory-effect"), None)
    if summary is None or effect is None:
        out.print(f"answer ({agent}): no on/off comparison in this run")
        return
    out.print(f"answer ({agent}):")
    for line in headline_lines(summary):
        out.print(f"  {line}", markup=False, highlight=False)
    tokens = effect.token_difference
    if tokens.estimate is not None:
        bounds = "" if tokens.low is None or tokens.high is None else f" [95% {tokens.low:+,.0f}, {tokens.high:+,.0f}]"
        label = " (exploratory)" if tokens.exploratory else ""
        out.print(f"  tokens on - off: {tokens.estimate:+,.0f} {tokens.unit}{bounds}{label}", markup=False, highlight=False)
    for rate in summary.delivery:
        out.print(f"  delivery {rate.condition}: {rate.confirmed}/{rate.attempts} attempts confirmed", markup=False, highlight=False)
