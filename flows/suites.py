"""The suite flows: `recall` (the sweep), `retrieval` (the offline retrieval suite) and `external`
(LongMemEval / LoCoMo on data files the config names).

Each flow is one cached stage over the suite's library entry point, keyed on the suite's typed options
(`tasks_lib.suites.options`, checked when the run config loads),
the embedder, the digest of its data (bundled case folders or the named dataset files) and the
stage code; its result is stored as JSON under `runs/<run_id>/suites/<name>.json`. The external
suite also stores every question's ranking, per dataset, beside it
(`runs/<run_id>/suites/external-<dataset>-rankings.parquet`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import Task, flow, task
from prefect.cache_policies import INPUTS, TASK_SOURCE
from prefect.futures import PrefectFuture

from flows import stages
from flows.runtime.progress import counted, reporter
from flows.runtime.settings import PROJECT_ROOT, build_under_test
from flows.stages import folder_digest, suite_stage
from tasks_lib.artifacts import suite_key, suite_rankings_key
from tasks_lib.contracts import ContractModel
from tasks_lib.errors import MemtrialError
from tasks_lib.resources import bundled_folder
from tasks_lib.run.config import RunConfig
from tasks_lib.suites.options import ExternalOptions, RecallOptions, RetrievalOptions
from tasks_lib.trees import sha256_file

P = ParamSpec("P")
R = TypeVar("R")

TREND = "trend"
REFERENCE_MEMORY = "reference"


class SuiteConfigError(MemtrialError):
    """A suite's options in the run config are unusable."""


def _put(artifact_root: str, key: str, payload: str) -> str:
    stages.artifact_store(artifact_root).put_bytes(key, payload.encode("utf-8"))
    return key


def suite_task(name: str) -> Callable[[Callable[P, R]], Task[P, R]]:
    """Prefect's `task` as every suite stage uses it: cached on inputs and source, retried once."""
    return task(name=name, cache_policy=INPUTS + TASK_SOURCE, persist_result=True, retries=1, retry_delay_seconds=2,
                retry_condition_fn=stages.retry_condition)


@suite_task(name="recall-sweep")
def recall_sweep(artifact_root: str, run_id: str, options: RecallOptions, embedder: str, data_digest: str, code: str) -> str:
    """Plant, bury, probe at every length (tasks_lib.suites.recall.run_sweep); store the SweepResult."""
    stages.enter_stage("recall-sweep")
    from tasks_lib.suites.recall import SweepConfig, run_sweep

    result = run_sweep(SweepConfig(memory=REFERENCE_MEMORY, embedder=embedder, **options.model_dump()))
    return _put(artifact_root, suite_key(run_id, "recall"), result.model_dump_json(indent=2))


@suite_task(name="retrieval-suite")
def retrieval_suite(artifact_root: str, run_id: str, options: RetrievalOptions, embedder: str, data_digest: str, code: str) -> str:
    """The offline retrieval suite on the bundled cases (tasks_lib.suites.retrieval); store the RetrievalResult."""
    stages.enter_stage("retrieval-suite")
    from tasks_lib.suites.public.runner import registry_factory
    from tasks_lib.suites.retrieval import (
        RetrievalGates,
        bundled_cases,
        load_gates,
        run_retrieval_suite,
    )

    gates = load_gates(PROJECT_ROOT / options.gates) if options.gates else RetrievalGates()
    cases, graph, policy = bundled_cases()
    result = run_retrieval_suite(registry_factory(REFERENCE_MEMORY, embedder), cases, gates, graph_cases=graph, policy=policy,
                                 adapter_name=REFERENCE_MEMORY, embedder=embedder)
    return _put(artifact_root, suite_key(run_id, "retrieval"), result.model_dump_json(indent=2))


def external_files(options: ExternalOptions, project_root: Path) -> dict[str, list[Path]]:
    """The dataset files `options` names, by dataset (relative ones from `project_root`); SuiteConfigError
    names the first dataset whose file is missing, or that none is named."""
    files: dict[str, list[Path]] = {}
    for name, paths in options.paths(project_root).items():
        missing = [str(p) for p in paths if not p.is_file()]
        if missing:
            raise SuiteConfigError(f"suite_options.external.{name}: {', '.join(missing)} is not a file; give the dataset's JSON file")
        files[name] = paths
    if not files:
        raise SuiteConfigError("suite_options.external: name a dataset file (locomo: FILE and/or longmemeval: [FILES]); the data is not bundled")
    return files


@suite_task(name="external-suite")
def external_suite(artifact_root: str, run_id: str, options: ExternalOptions, embedder: str, data_digest: str, code: str) -> str:
    """LongMemEval / LoCoMo retrieval on the named files (tasks_lib.suites.public); store both results and their rankings."""
    stages.enter_stage("external-suite")
    from tasks_lib.suites.public.rankings import RankingRow, rankings_parquet
    from tasks_lib.suites.public.runner import registry_factory, run_locomo, run_longmemeval

    files = external_files(options, PROJECT_ROOT)
    limit = options.limit
    factory = registry_factory(REFERENCE_MEMORY, embedder)
    results = {}
    rankings: dict[str, list[RankingRow]] = {name: [] for name in files}
    if "locomo" in files:
        results["locomo"] = run_locomo(files["locomo"][0], factory, memory=REFERENCE_MEMORY, limit=limit,
                                       rankings=rankings["locomo"]).model_dump(mode="json")
    if "longmemeval" in files:
        results["longmemeval"] = run_longmemeval(files["longmemeval"], factory, memory=REFERENCE_MEMORY, limit=limit,
                                                 rankings=rankings["longmemeval"]).model_dump(mode="json")
    store = stages.artifact_store(artifact_root)
    for name, rows in rankings.items():
        store.put_bytes(suite_rankings_key(run_id, "external", name), rankings_parquet(rows))
    return _put(artifact_root, suite_key(run_id, "external"), json.dumps(results, indent=2, sort_keys=True))


def _path_digest(path: Path) -> str:
    """Digest of a file or folder's content; a marker for a missing one (the stage then reports it)."""
    if path.is_dir():
        return folder_digest(path)
    return sha256_file(path) if path.is_file() else f"missing:{path}"


def _data_digest(name: str, options: ContractModel) -> str:
    """Digest of every input file a suite reads, so editing one (not only renaming it) misses the cache.

    recall: its cases folder (`cases_dir`, else the bundled one) and any `filler_dataset`;
    retrieval: the bundled cases and any `gates` file; external: the named dataset files.
    """
    if isinstance(options, ExternalOptions):
        files = external_files(options, PROJECT_ROOT)
        return hashlib.sha256("".join(sha256_file(p) for paths in files.values() for p in paths).encode()).hexdigest()
    parts = [folder_digest(bundled_folder(name))]
    if isinstance(options, RecallOptions):
        if options.cases_dir:
            parts = [_path_digest(Path(options.cases_dir))]
        if options.filler_dataset:
            parts.append(_path_digest(Path(options.filler_dataset)))
    if isinstance(options, RetrievalOptions) and options.gates:
        parts.append(_path_digest(PROJECT_ROOT / options.gates))
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


SUITE_CODE = {
    "recall": ("tasks_lib.suites.recall", *stages.MEMORY_CODE),
    "retrieval": ("tasks_lib.suites.retrieval", "tasks_lib.suites.public.runner", *stages.MEMORY_CODE),
    "external": ("tasks_lib.suites.public", "tasks_lib.suites.public.runner", *stages.MEMORY_CODE),
}


def _suite_call(name: str, stage: Callable[..., str], config: RunConfig, run_id: str, artifact_root: str) -> tuple[Any, tuple[Any, ...]]:
    """The suite's task bound to the run's result storage, and its arguments; starts its progress line."""
    reporter().start(suite_stage(name), 1)
    options = config.suite_options.of(name)
    bound = stage.with_options(result_storage=stages.result_storage(artifact_root, config.result_root))  # type: ignore[attr-defined]
    return bound, (artifact_root, run_id, options, config.embedder, _data_digest(name, options), stages.code_digest(*SUITE_CODE[name]))


def _suite_done(name: str) -> None:
    reporter().finish(suite_stage(name))


def _run_suite(name: str, stage: Callable[..., str], config: RunConfig, run_id: str, artifact_root: str) -> str:
    bound, args = _suite_call(name, stage, config, run_id, artifact_root)
    key = counted(bound, suite_stage(name), *args)
    _suite_done(name)
    return key


def submit_suites(config: RunConfig, run_id: str, artifact_root: str) -> dict[str, PrefectFuture | None]:
    """Every configured suite that is a task (`SUITE_TASKS`) submitted as a task of the calling flow, so
    the suites run concurrently with each other and with whatever the flow does next (each plants in
    its own scratch store); a suite that is a flow of its own (`write-path`, whose steps are cached
    tasks) is None here and runs when collected. Collect them with `collect_suites`. Call inside a flow."""
    futures: dict[str, PrefectFuture | None] = {}
    for name in config.suites:
        if name not in SUITE_TASKS:
            futures[name] = None
            continue
        bound, args = _suite_call(name, SUITE_TASKS[name], config, run_id, artifact_root)
        futures[name] = bound.submit(*args)
    return futures


def collect_suites(futures: dict[str, PrefectFuture | None], config: RunConfig, run_id: str, artifact_root: str) -> dict[str, str]:
    """Each suite's result key, in the order submitted (the first failure raises); a suite that is a
    flow of its own runs now (`SUITE_FLOWS`)."""
    keys = {}
    for name, future in futures.items():
        if future is None:
            keys[name] = SUITE_FLOWS[name](config, run_id, artifact_root)
            continue
        keys[name] = future.result()
        reporter().advance(suite_stage(name), cached=future.state.is_completed() and future.state.name == "Cached")
        _suite_done(name)
    return keys


@flow(name="recall", log_prints=False)
def recall_flow(config: RunConfig, run_id: str, artifact_root: str) -> str:
    """The recall sweep of the reference memory system; returns the result's artifact key."""
    return _run_suite("recall", recall_sweep, config, run_id, artifact_root)


@flow(name="retrieval", log_prints=False)
def retrieval_flow(config: RunConfig, run_id: str, artifact_root: str) -> str:
    """The offline retrieval suite of the reference memory system; returns the result's artifact key."""
    return _run_suite("retrieval", retrieval_suite, config, run_id, artifact_root)


@flow(name="external", log_prints=False)
def external_flow(config: RunConfig, run_id: str, artifact_root: str) -> str:
    """LongMemEval / LoCoMo on the dataset files of suite_options.external; returns the result's key."""
    return _run_suite("external", external_suite, config, run_id, artifact_root)


SUITE_TASKS: dict[str, Callable[..., str]] = {"recall": recall_sweep, "retrieval": retrieval_suite, "external": external_suite}
"""Each suite's task (what `submit_suites` submits; `SUITE_FLOWS` runs one as its own flow)."""


def write_path_suite(config: RunConfig, run_id: str, artifact_root: str) -> str:
    """The write-path suite (`flows.writepath`, imported here on use)."""
    from flows.writepath import write_path_flow

    return write_path_flow(config, run_id, artifact_root)


SUITE_FLOWS: dict[str, Callable[[RunConfig, str, str], str]] = {
    "recall": recall_flow,
    "retrieval": retrieval_flow,
    "external": external_flow,
    "write-path": write_path_suite,
}


TREND_SUITES = ("recall", "retrieval")
"""Suites whose results become trend snapshots (the external suites have no curve yet)."""


def trend_curve(suite: str, embedder: str) -> str:
    """Curve a nightly run appends to: the suite's name for the default embedder, else `<suite>-<memory>-<embedder>`."""
    return suite if embedder == "hashed" else f"{suite}-{REFERENCE_MEMORY}-{embedder}"


@task(name="trend-snapshot", cache_policy=INPUTS + TASK_SOURCE, persist_result=True, retries=0)
def trend_snapshot(artifact_root: str, run_id: str, suite: str, result_key: str, embedder: str) -> dict[str, Any]:
    """Append the suite result's snapshot to its trend curve and check it against the previous one.

    Cached per run and result, so a rerun never appends the same run twice. A curve whose snapshots
    measure something else (another case set or config) is not mixed: a new curve named after the
    new comparability key is started instead. Returns the curve's folder, the snapshot's key and
    the regression messages.
    """
    stages.enter_stage("trend-snapshot", suite)
    from tasks_lib.analysis.trend import (
        TrendError,
        append_snapshot,
        curve_folder,
        load_trend,
        now,
        regressions,
    )

    store = stages.artifact_store(artifact_root)
    if suite == "recall":
        from tasks_lib.suites.recall import SweepResult
        from tasks_lib.suites.recall.snapshot import recall_snapshot

        snapshot = recall_snapshot(store.get_json(result_key, SweepResult), build_under_test(), now())
    else:
        from tasks_lib.suites.retrieval import RetrievalResult
        from tasks_lib.suites.retrieval.snapshot import retrieval_snapshot

        snapshot = retrieval_snapshot(store.get_json(result_key, RetrievalResult), build_under_test(), now())
    curve = trend_curve(suite, embedder)
    try:
        key = append_snapshot(store, snapshot, curve)
    except TrendError:
        curve = f"{curve}-{snapshot.comparability_key[:8]}"
        key = append_snapshot(store, snapshot, curve)
    history = load_trend(store, curve)
    failures = regressions(history[-2], history[-1], history[-1].gated) if len(history) > 1 else []
    return {"curve": curve_folder(curve), "snapshot": key, "regressions": failures}


def trend_snapshots(config: RunConfig, run_id: str, artifact_root: str, results: dict[str, str]) -> dict[str, dict[str, Any]]:
    """The trend stage of a nightly run: one snapshot per suite result that has a curve."""
    progress = reporter()
    chosen = [s for s in TREND_SUITES if s in results]
    progress.start(TREND, len(chosen))
    bound = trend_snapshot.with_options(result_storage=stages.result_storage(artifact_root, config.result_root))
    out = {}
    for suite in chosen:
        out[suite] = counted(bound, TREND, artifact_root, run_id, suite, results[suite], config.embedder)
    failures = sum(len(v["regressions"]) for v in out.values())
    progress.finish(TREND, f"{failures} regression(s)" if failures else "no regression")
    return out


def suite_failures(name: str, artifact_root: str, key: str) -> list[str]:
    """One distrust line per failed gate of a stored suite result (only the retrieval suite has gates
    in a nightly run; the others have none to fail)."""
    if name != "retrieval":
        return []
    payload = json.loads(stages.artifact_store(artifact_root).get_bytes(key))
    return [f"suite retrieval: gate {g['name']} failed: {'unmeasured' if g['value'] is None else format(g['value'], '.3f')} "
            f"(bar {g['op']} {g['threshold']:g})" for g in payload["gates"] if not g["passed"]]


def suite_headline(name: str, artifact_root: str, key: str) -> str:
    """One line a person reads after a nightly run: the retrieval suite's failed gates, the recall
    sweep's curve and knee, the external suites' recall_any@5. Read back from the stored result."""
    payload = json.loads(stages.artifact_store(artifact_root).get_bytes(key))
    if name == "retrieval":
        failed = [g for g in payload["gates"] if not g["passed"]]
        held = len(payload["gates"]) - len(failed)
        if not failed:
            return f"retrieval: all {held} gates held"
        shown = "; ".join(
            f"{g['name']} {'unmeasured' if g['value'] is None else format(g['value'], '.3f')} (bar {g['op']} {g['threshold']:g})" for g in failed
        )
        return f"retrieval: {held}/{len(payload['gates'])} gates held; FAILED {shown}"
    if name == "recall":
        curve = ", ".join(f"{length}: {m['recall']['rate']:.2f}" if m["recall"]["rate"] is not None else f"{length}: -"
                          for length, m in sorted(payload["metrics_by_length"].items(), key=lambda item: int(item[0])))
        knee = payload.get("knee")
        where = f"knee between {knee['previous']} and {knee['length']} turns" if knee else "no knee"
        return f"recall by length {{{curve}}}; {where}"
    if name == "write-path":
        from tasks_lib.suites.writepath import WritePathResult, render_curve

        return "\n  ".join(render_curve(WritePathResult.model_validate(r)) for r in payload)
    return f"{name}: stored ({', '.join(sorted(payload))})"
