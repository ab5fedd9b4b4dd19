"""The per-run report: one self-contained HTML file regenerated from the run's stored artifacts.

`build_report` grades the run again from its records, transcripts and audit receipts (writing the
aggregation tables), renders `runs/<run_id>/report.html` into the artifact store and, when asked,
a copy to a local file.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tasks_lib.analysis.aggregate import Aggregate, aggregate_run
from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.trees import write_atomically

REPORT_HTML = "report.html"


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


def build_report(
    store: ArtifactStore,
    run_id: str,
    *,
    out: Path | None = None,
    memory_texts: Mapping[str, Sequence[str]] | None = None,
) -> BuiltReport:
    """Aggregate `run_id` from its stored artifacts and write its HTML report; return where it is."""
    from tasks_lib.report.html import render_html

    aggregate = aggregate_run(store, run_id, memory_texts)
    page = render_html(aggregate, datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S UTC"))
    key = run_key(run_id, REPORT_HTML)
    store.put_bytes(key, page.encode("utf-8"))
    if out is not None:
        write_local(out, page)
    return BuiltReport(aggregate, key, f"{store.uri.rstrip('/')}/{key}", out)
