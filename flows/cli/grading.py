"""`memtrial prereg`, `memtrial admit`, `memtrial publish`, `memtrial compare`: a thin edge over
`tasks_lib.analysis.prereg`, `tasks_lib.analysis.admission`, `tasks_lib.analysis.publish` and `tasks_lib.analysis.compare`.

Library errors propagate to `flows.cli.main.main` (one line, exit 2); a release that fails the
publication test exits 1 with one line per problem.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, err, out
from flows.cli.options import AgentOpt, ArtifactRootOpt, ConditionsOpt, TasksOpt, TrialsOpt

if TYPE_CHECKING:
    from tasks_lib.artifacts import ArtifactStore



def _store(artifacts: str | None) -> ArtifactStore:
    from flows.runtime.settings import default_artifact_root
    from tasks_lib.artifacts import open_store

    return open_store(artifacts or default_artifact_root())


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def prereg(
    name: Annotated[str, typer.Argument(help="Name of the study (lowercase identifier).")],
    tasks: TasksOpt,
    agent: AgentOpt,
    budget_usd: Annotated[float, typer.Option("--budget-usd", help="Most one run may spend in total, in USD.")],
    primary: Annotated[str, typer.Option(help="The primary analysis, in words.")],
    model: Annotated[str | None, typer.Option(help="Model name the agent runs (omit for agents that take none).")] = None,
    conditions: ConditionsOpt = "off,on",
    trials: TrialsOpt = 1,
    correction: Annotated[str | None, typer.Option(help="Apparatus correction: why; makes the next version and excludes runs admitted under the old one.")] = None,
    artifacts: ArtifactRootOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Freeze prompts, verifier, model, budget and analysis plan as one digest, before any paid run."""
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.analysis.admission import apply_correction
    from tasks_lib.analysis.prereg import create_prereg, load_prereg, prereg_digest, prereg_key
    from tasks_lib.arm.comparability import model_label
    from tasks_lib.arm.steps import check_conditions, select_tasks
    from tasks_lib.corpus.tasks import load_tasks
    from tasks_lib.memory.reference.lanes import LANES

    store = _store(artifacts)
    chosen = select_tasks(load_tasks(PROJECT_ROOT / "corpora" / "tasks"), _split(tasks))
    previous = load_prereg(store, name) if correction else None
    doc = create_prereg(
        store, name, chosen, model=model_label(agent, model), budget_usd=budget_usd,
        conditions=check_conditions(_split(conditions), LANES), trials=trials, primary=primary, correction=correction,
    )
    superseded = apply_correction(store, previous, doc) if previous else []
    digest = prereg_digest(doc)
    location = f"{store.uri.rstrip('/')}/{prereg_key(name, doc.version)}"
    if as_json:
        emit_json({"name": name, "version": doc.version, "digest": digest, "document": location, "superseded_runs": superseded})
        return
    out.print(f"preregistered {name} v{doc.version}: {digest}")
    out.print(f"document: {location}")
    for run_id in superseded:
        out.print(f"run {run_id}: admitted records now excluded (apparatus_correction)")


def admit(
    run_id: Annotated[str, typer.Argument(help="The run to decide on.")],
    prereg_ref: Annotated[str, typer.Option("--prereg", help="Preregistration NAME (latest version) or NAME@vN.")],
    exclude: Annotated[list[str] | None, typer.Option(help="Operator exclusion TASK/CONDITION/TRIAL=REASON:DETAIL (repeatable; reasons audit_failed, infra_failure, protocol_deviation).")] = None,
    artifacts: ArtifactRootOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Record, once, whether each completed attempt of a run is admitted or excluded, with a reason code."""
    from tasks_lib.analysis.admission import admissions_key, admit_run, parse_exclusion
    from tasks_lib.analysis.prereg import load_prereg

    store = _store(artifacts)
    exclusions = {}
    for text in exclude or []:
        cell, reason, detail = parse_exclusion(text)
        exclusions[cell] = (reason, detail)
    decisions = admit_run(store, run_id, load_prereg(store, prereg_ref), exclusions=exclusions)
    admitted = sum(d.decision == "admitted" for d in decisions)
    if as_json:
        emit_json({"run_id": run_id, "table": admissions_key(run_id), "admitted": admitted,
                   "excluded": len(decisions) - admitted, "decisions": [d.model_dump(mode="json") for d in decisions]})
        return
    for d in decisions:
        out.print(f"{d.decision:9} {d.task_id}/{d.condition}/t{d.trial}  {d.reason_code}: {d.detail}")
    out.print(f"{admitted} admitted, {len(decisions) - admitted} excluded; {store.uri.rstrip('/')}/{admissions_key(run_id)}")


def publish(
    run_id: Annotated[str, typer.Argument(help="The admitted run to release.")],
    out_dir: Annotated[Path, typer.Option("--out", help="New folder for the release (must not exist).")],
    artifacts: ArtifactRootOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Build a release folder and run the publication test; exit 1, one line per problem, and write nothing when it fails."""
    from tasks_lib.analysis.publish import publish_run

    result = publish_run(_store(artifacts), run_id, out_dir)
    if as_json:
        emit_json({"run_id": run_id, "out": str(result.out_dir), "ok": result.ok, "problems": list(result.problems),
                   "files": len(result.manifest.files) if result.manifest else 0})
    else:
        for problem in result.problems:
            out.print(problem)
        if result.ok and result.manifest:
            out.print(f"published {run_id}: {len(result.manifest.files)} files in {result.out_dir}")
        else:
            err.print(f"memtrial: publication test failed: {len(result.problems)} problem(s); nothing written")
    if not result.ok:
        raise typer.Exit(1)


def compare(
    run_a: Annotated[str, typer.Argument(help="The first run.")],
    run_b: Annotated[str, typer.Argument(help="The second run.")],
    completed: Annotated[bool, typer.Option("--completed", help="Count every completed record, not only admitted ones (e.g. calibration runs).")] = False,
    artifacts: ArtifactRootOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Per task and condition pass rates (Wilson 95%) of two runs and their difference, only when their comparability keys match."""
    from rich.table import Table

    from tasks_lib.analysis.compare import RateCell, compare_runs

    result = compare_runs(_store(artifacts), run_a, run_b, "completed" if completed else "admitted")
    if as_json:
        emit_json(result.model_dump(mode="json"))
        return

    def show(cell: RateCell) -> str:
        if cell.rate is None:
            return "0/0"
        return f"{cell.passes}/{cell.graded} {cell.rate:.2f} [{cell.wilson_low:.2f}, {cell.wilson_high:.2f}]"

    table = Table(title=f"{run_b} vs {run_a} ({result.basis} records)")
    for column in ("task", "condition", run_a, run_b, "difference"):
        table.add_column(column)
    for c in result.cells:
        table.add_row(c.task_id, c.condition, show(c.a), show(c.b), "n/a" if c.difference is None else f"{c.difference:+.2f}")
    out.print(table)
    builds = sorted({b for c in result.cells for b in c.b.builds}), sorted({b for c in result.cells for b in c.a.builds})
    out.print(f"builds under test: {run_a}: {', '.join(builds[1])}; {run_b}: {', '.join(builds[0])}")
    configs = sorted({k.memory_config_digest[:12] for k in result.keys if k.memory_config_digest})
    out.print(f"memory config (same in both runs): {', '.join(configs) or 'none (no arm with memory)'}")

