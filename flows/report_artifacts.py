"""Publish a run's report tables as Prefect artifacts, so they show in the Prefect UI.

Reads the stored `summary.json` (written by `memtrial report` / `tasks_lib.analysis.aggregate`); a run that
has not been aggregated yet is aggregated first. Artifact keys are `memtrial-<run>-<table>`.
`publish_headline` is what the nightly flow publishes at its end: the headline of each agent's run.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from prefect import flow, task
from prefect.artifacts import create_markdown_artifact, create_table_artifact

from tasks_lib.analysis.aggregate import SUMMARY_JSON, aggregate_run
from tasks_lib.analysis.grading import GradingSummary
from tasks_lib.artifacts import open_store, run_key
from tasks_lib.errors import ArtifactNotFound
from tasks_lib.report import REPORT_HTML
from tasks_lib.report.markdown import summary_markdown, table_rows
from tasks_lib.run.index import headline_of


def artifact_key(run_id: str, table: str) -> str:
    """A Prefect artifact key (lowercase letters, digits and dashes) for one table of one run."""
    return re.sub(r"-+", "-", re.sub(r"[^a-z0-9-]", "-", f"memtrial-{run_id}-{table}".lower())).strip("-")


@task(name="load-grading-summary", cache_policy=None)  # type: ignore[call-overload]  # None (no policy) is valid; stubs omit it
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


def _pp(value: float | None) -> float | str:
    """A fraction as percentage points with one decimal, or `n/a`."""
    return "n/a" if value is None else round(value * 100, 1)


def publish_headline(artifact_root: str, run_id: str, agent_runs: Sequence[tuple[str, str]]) -> list[str]:
    """Publish the headline of each (agent, agent run id) of run `run_id` as one Markdown artifact and one
    table artifact (keys `memtrial-<run>-headline`, `memtrial-<run>-headline-table`); return the keys.
    Call inside a flow run, after grading wrote each agent run's summary.json."""
    store = open_store(artifact_root)
    lines = [f"# memtrial run {run_id}", ""]
    rows = []
    for agent, agent_run in agent_runs:
        summary = store.get_json(run_key(agent_run, SUMMARY_JSON), GradingSummary)
        head = headline_of(summary)
        on = next((d for d in summary.delivery if d.condition == "on"), None)
        delivered = f"{on.confirmed}/{on.attempts}" if on else "n/a"
        rows.append({
            "agent": agent, "run": agent_run, "attempts": summary.attempts, "tasks": head.tasks if head else 0,
            "on_minus_off_pp": _pp(head.success_difference if head else None),
            "ci95_low_pp": _pp(head.success_low if head else None), "ci95_high_pp": _pp(head.success_high if head else None),
            "p_value": "n/a" if head is None or head.p_value is None else round(head.p_value, 4),
            "net_mui_pp": _pp(head.net_mui if head else None),
            "net_mui_low_pp": _pp(head.mui_low if head else None), "net_mui_high_pp": _pp(head.mui_high if head else None),
            "on_delivered": delivered, "warnings": len(summary.warnings),
        })
        report = f"{artifact_root.rstrip('/')}/{run_key(agent_run, REPORT_HTML)}"
        lines.append(f"- **{agent}** (`{agent_run}`): {head.describe() if head else 'no on/off comparison'}; "
                     f"memory delivered in {delivered} on attempts; report: `{report}`")
        lines.extend(f"  - warning: {w}" for w in summary.warnings)
    keys = [artifact_key(run_id, "headline"), artifact_key(run_id, "headline-table")]
    create_markdown_artifact(markdown="\n".join(lines) + "\n", key=keys[0], description=f"memtrial headline of run {run_id}")
    create_table_artifact(table=rows, key=keys[1], description=f"memtrial headline of run {run_id}, one row per agent")
    return keys
