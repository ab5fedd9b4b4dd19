"""`memtrial trend`: a suite's curve over time (table and PNG) and the regression gate of its latest run."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flows.cli.common import JsonFlag, emit_json, out
from flows.cli.options import ArtifactRootOpt
from tasks_lib.errors import MemtrialError

SHOWN = 6
"""Snapshots shown in the table (the plot shows all)."""


def trend(
    suite: Annotated[str, typer.Option(help="Curve to show: a suite name (retrieval, recall, ...) or a name given with --curve.")] = "retrieval",
    artifacts: ArtifactRootOpt = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="Write the PNG plot here (default: trend/<suite>.png in the artifact store).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a suite's scores over time; exit 1 when the latest snapshot regresses against the previous one."""
    from flows.runtime.settings import default_artifact_root
    from tasks_lib.analysis.trend import (
        TREND_PREFIX,
        curve_folder,
        load_trend,
        metric_order,
        regressions,
        render_trend_png,
        resolve_curve,
    )
    from tasks_lib.artifacts import open_store, write_atomically

    root = artifacts or default_artifact_root()
    store = open_store(root)
    curve_folder(suite)  # refuses a malformed name before listing the store
    suite = resolve_curve(store, suite)
    snapshots = load_trend(store, suite)
    if not snapshots:
        raise MemtrialError(f"trend: no snapshots at {root.rstrip('/')}/{curve_folder(suite)}; run a suite with --artifacts first")
    latest = snapshots[-1]
    failures = regressions(snapshots[-2], latest, latest.gated) if len(snapshots) > 1 else []
    png = render_trend_png(snapshots, f"{suite}: {latest.adapter}, cases {latest.case_set_digest[:10]}")
    if out_file is not None:
        write_atomically(out_file, png)
        plot = str(out_file)
    else:
        key = f"{TREND_PREFIX}/{suite}.png"
        store.put_bytes(key, png)
        plot = f"{root.rstrip('/')}/{key}"
    metrics = sorted({m for s in snapshots for m in s.gated}, key=metric_order)
    if as_json:
        emit_json({
            "curve": suite, "plot": plot, "regressions": failures, "compared": len(snapshots) > 1,
            "snapshots": [s.model_dump(mode="json") for s in snapshots],
        })
    else:
        shown = snapshots[-SHOWN:]
        table = Table(title=f"trend {suite}: last {len(shown)} of {len(snapshots)} snapshots (key {latest.comparability_key[:12]})")
        table.add_column("metric")
        for s in shown:
            table.add_column(s.time.strftime("%m-%d %H:%M"))
        table.add_row("build", *(s.build.removeprefix("memtrial ") for s in shown))
        for metric in metrics:
            table.add_row(f"{metric} ({latest.gated.get(metric, '?')})", *(f"{s.scores[metric]:.3f}" if metric in s.scores else "-" for s in shown))
        if any(s.knee is not None for s in shown):
            table.add_row("knee", *("-" if s.knee is None else f"{s.knee:g}" for s in shown))
        out.print(table)
        out.print(f"plot: {plot}")
        if len(snapshots) == 1:
            out.print("one snapshot: nothing to compare yet")
        for message in failures:
            out.print(f"REGRESSION {message}")
        if len(snapshots) > 1 and not failures:
            out.print("no regression against the previous snapshot")
    if failures:
        raise typer.Exit(1)
