"""The per-run report: one self-contained HTML file regenerated from the run's stored artifacts.

`build_report` grades the run again from its records, transcripts and audit receipts (writing the
aggregation tables), reads the run's provenance and suite results, renders
`runs/<run_id>/report.html` into the artifact store and, when asked, a copy to a local file. The
page links each attempt's transcript and check output by a path relative to where the page is:
from the stored report to its run's folder, from a local copy to a local artifact root (a copy of a
report on S3 names the keys instead, as it cannot reach them).
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tasks_lib.analysis.aggregate import Aggregate, aggregate_run
from tasks_lib.artifacts import ArtifactStore, LocalStore, run_key
from tasks_lib.report.suites import load_suites
from tasks_lib.run.layout import REPORT_HTML
from tasks_lib.run.provenance import load_provenance
from tasks_lib.trees import write_atomically

Linker = Callable[[str], str | None]
"""Artifact key -> the href of a link to it from the report, or None when the page cannot reach it."""


@dataclass(frozen=True)
class BuiltReport:
    """Where a report went and what it says."""

    aggregate: Aggregate
    key: str
    """Key of the report in the artifact store."""
    uri: str
    """Full location of the report in the artifact store."""
    out: Path | None
    """The local copy, when one was asked for."""


def write_local(path: Path, text: str) -> None:
    """Write `text` to `path` atomically (temp file in the same folder, then rename)."""
    write_atomically(path, text.encode("utf-8"), "the report")


def stored_linker(report_key: str) -> Linker:
    """Links from the report stored under `report_key` to other keys of the same store (relative POSIX paths)."""
    folder = posixpath.dirname(report_key)
    return lambda key: posixpath.relpath(key, folder)


def local_linker(store: ArtifactStore, out: Path) -> Linker:
    """Links from a local copy at `out` to the store's files: relative paths for a local store, none otherwise."""
    if not isinstance(store, LocalStore):
        return lambda key: None
    folder = out.resolve().parent
    return lambda key: Path(os.path.relpath(store.root / key, folder)).as_posix()


def draw_plots(store: ArtifactStore, aggregate: Aggregate) -> None:
    """Draw the report's plots of `aggregate` into the store's plot cache (`plots.stored_plotter`). The
    aggregate stage does, so that a report stage that fails and is rerun draws nothing."""
    from tasks_lib.report.html import plot_calls
    from tasks_lib.report.plots import stored_plotter

    plot = stored_plotter(store)
    for fn, args in plot_calls(aggregate):
        plot(fn, args)


def build_report(
    store: ArtifactStore,
    run_id: str,
    *,
    out: Path | None = None,
    memory_texts: Mapping[str, Sequence[str]] | None = None,
) -> BuiltReport:
    """Aggregate `run_id` from its stored artifacts and write its HTML report; return where it is."""
    from tasks_lib.report.html import render_html
    from tasks_lib.report.plots import stored_plotter

    aggregate = aggregate_run(store, run_id, memory_texts)
    provenance = load_provenance(store, run_id)
    suites = load_suites(store, run_id, provenance)
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    key = run_key(run_id, REPORT_HTML)
    plot = stored_plotter(store)
    page = render_html(aggregate, generated, provenance=provenance, suites=suites, link=stored_linker(key),
                       exists=store.exists, plot=plot)
    store.put_bytes(key, page.encode("utf-8"))
    if out is not None:
        write_local(out, render_html(aggregate, generated, provenance=provenance, suites=suites,
                                     link=local_linker(store, out), exists=store.exists, plot=plot))
    return BuiltReport(aggregate, key, f"{store.uri.rstrip('/')}/{key}", out)
