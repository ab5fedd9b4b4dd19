"""Publish a run's report tables as Prefect artifacts, so they show in the Prefect UI.

Reads the stored `summary.json` (written by `memtrial report` / `tasks_lib.analysis.aggregate`); a run that
has not been aggregated yet is aggregated first. Artifact keys are `memtrial-<run>-<table>`.
"""

from __future__ import annotations

import re

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from tasks_lib.analysis.aggregate import SUMMARY_JSON, aggregate_run
from tasks_lib.analysis.grading import GradingSummary
from tasks_lib.artifacts import open_store, run_key
from tasks_lib.errors import ArtifactNotFound
from tasks_lib.report import REPORT_HTML
from tasks_lib.report.markdown import summary_markdown, table_rows


def artifact_key(run_id: str, table: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for one table of one run."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"memtrial-{run_id}-{table}".lower())).strip("-")


@task(name="load-grading-summary", cache_policy=None)
def load_summary(artifact_root: str, run_id: str) -> GradingSummary:
    """The run's stored summary, aggregating the run first when it has none."""
    store = open_store(artifact_root)
    try:
        return store.get_json(run_key(run_id, SUMMARY_JSON), GradingSummary)
    except ArtifactNotFound:
        return aggregate_run(store, run_id).summary


@flow(name="publish-report-artifacts", log_prints=False)
def publish_report_artifacts(artifact_root: str, run_id: str) -> list[str]:
    """Create one Markdown artifact (the digest) and table artifacts; return their keys."""
    summary = load_summary(artifact_root, run_id)
    report_uri = f"{artifact_root.rstrip('/')}/{run_key(run_id, REPORT_HTML)}"
    keys = [artifact_key(run_id, "summary")]
    create_markdown_artifact(markdown=summary_markdown(summary, report_uri), key=keys[0],
                             description=f"memtrial grading summary of run {run_id}")
    for name, rows in table_rows(summary).items():
        key = artifact_key(run_id, name)
        create_table_artifact(table=rows, key=key, description=f"memtrial {name} of run {run_id}")
        keys.append(key)
    return keys
