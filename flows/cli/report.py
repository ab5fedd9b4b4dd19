"""`memtrial report RUN`: regenerate a run's grading tables and HTML report from stored artifacts.

A thin edge over `tasks_lib.report`; an unknown run or a bad table is a `MemtrialError` (one line,
exit 2). A nightly run's own id (no records of its own) names its one agent run, as in `memtrial show`.
Warnings in the report are also printed on stderr, so a low delivery rate is seen twice.
"""

from __future__ import annotations

from contextlib import suppress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, err, out
from flows.cli.options import ArtifactRootOpt

if TYPE_CHECKING:
    from tasks_lib.analysis.grading import GradingSummary


def bundled_memory_texts() -> dict[str, list[str]] | None:
    """Planted memory texts per bundled task (for the v1 surface echo); None when the corpus is absent."""
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.corpus.tasks import scan_tasks

    root = PROJECT_ROOT / "corpora" / "tasks"
    if not root.is_dir():
        return None
    return {t.task_id: [m.text for m in t.manifest.memories] for t in scan_tasks(root).tasks}


def headline_lines(summary: GradingSummary) -> list[str]:
    """The task-clustered on-vs-off success difference first, then net MUI and power, one line each, differences in
    percentage points with their 95% intervals and p-values worded as the report words them (`tasks_lib.report.wording`)."""
    from tasks_lib.report.wording import (
        effect_figure,
        effect_p,
        mui_figure,
        power_capped,
        power_result,
    )

    lines = []
    effect = next((c for c in summary.headline if c.kind == "memory-effect"), None)
    if effect is not None:
        d = effect.success_difference
        lines.append(f"success on - off: {effect_figure(d)}, {effect_p(d)} over {effect.tasks} tasks "
                     f"({effect.passes_a}/{effect.gradable_a} on vs {effect.passes_b}/{effect.gradable_b} off attempts passed)")
        if effect.mui is not None:
            lines.append(mui_figure(effect.mui))
        if effect.power is not None:
            capped = power_capped(effect.power)
            lines.append(f"power: {power_result(effect.power)}" + (f" ({capped})" if capped else ""))
    return lines


def report(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, as printed by 'memtrial paired' (runs/<RUN>/records.parquet).")],
    artifacts: ArtifactRootOpt = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Also write the HTML report to this local file.")] = None,
    publish_artifacts: Annotated[bool, typer.Option("--prefect-artifacts", help="Also publish the report's tables as Prefect artifacts (starts Prefect).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Grade a stored run again (grades, ablations, audit receipts, summary.json) and write its
    self-contained HTML report next to them; print where it is."""
    from flows.cli.common import agent_run
    from flows.runtime.settings import default_artifact_root
    from tasks_lib.analysis.aggregate import summary_json
    from tasks_lib.artifacts import open_store, run_key
    from tasks_lib.report import build_report
    from tasks_lib.run.index import UnknownRunError, UnreadableRunError
    from tasks_lib.run.layout import RECORDS_TABLE

    root = artifacts or default_artifact_root()
    store = open_store(root)
    if not store.exists(run_key(run_id, RECORDS_TABLE)):  # a nightly run's own id: its one agent run
        with suppress(UnknownRunError, UnreadableRunError):  # the report names what is missing or damaged itself
            run_id = agent_run(store, run_id, "report", "memtrial report {run}")
    built = build_report(store, run_id, out=out_file, memory_texts=bundled_memory_texts())
    summary = built.aggregate.summary
    published: list[str] = []
    if publish_artifacts:
        import logging
        import os

        from flows.runtime.settings import configure_prefect

        os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
        os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
        configure_prefect()
        from flows.runtime.localserver import ready

        line = ready()
        if line:
            err.print(line, markup=False, highlight=False)
        logging.getLogger("prefect").setLevel(logging.WARNING)
        from flows.report_artifacts import publish_report_artifacts

        published = publish_report_artifacts(root, run_id)
    tables = {name: f"{root.rstrip('/')}/{key}" for name, key in built.aggregate.keys.items()}
    if as_json:
        emit_json({"run_id": run_id, "report": built.uri, "out": str(out_file) if out_file else None, "tables": tables,
                   "prefect_artifacts": published, "summary": summary_json(summary)})
    else:
        for line in headline_lines(summary):
            out.print(line)
        for name in sorted(tables):
            out.print(f"table:  {tables[name]}")
        for key in published:
            out.print(f"prefect artifact: {key}")
        out.print(f"report: {built.uri}")
        if out_file:
            out.print(f"copy:   {out_file}")
    for warning in summary.warnings:
        err.print(f"warning: {warning}")
