"""The report's tables as Markdown and as row lists, for Prefect artifacts (no Prefect import here)."""

from __future__ import annotations

from typing import Any

from tasks_lib.analysis.grading import GradingSummary


def _md_cell(value: object) -> str:
    return ("" if value is None else str(value)).replace("|", "\\|").replace("\n", " ")


def _md_number(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def md_table(headers: list[str], rows: list[list[object]]) -> str:
    """A GitHub-flavoured Markdown table; pipes in cells are escaped."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(_md_cell(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


def summary_markdown(summary: GradingSummary, report_uri: str) -> str:
    """A short Markdown digest of the run: warnings first, then MUI, delivery and the harness check."""
    parts = [f"# memtrial report `{summary.run_id}`", ""]
    if summary.calibration:
        parts += ["**Calibration run**: proves the apparatus; not a published cohort.", ""]
    parts += [f"- WARNING: {_md_cell(w)}" for w in summary.warnings]
    if summary.headline:
        parts += ["", "## Headline (task-clustered, 95% intervals)", md_table(
            ["a - b", "tasks", "success difference", "low", "high", "p", "tokens/attempt", "net MUI", "MUI low", "MUI high"],
            [[f"{c.condition_a} - {c.condition_b}", c.tasks,
              _md_number(c.success_difference.estimate) + (" (exploratory)" if c.success_difference.exploratory else ""),
              _md_number(c.success_difference.low),
              _md_number(c.success_difference.high), _md_number(c.success_difference.p_value), _md_number(c.token_difference.estimate),
              *([_md_number(c.mui.net), _md_number(c.mui.low), _md_number(c.mui.high)] if c.mui else ["", "", ""])]
             for c in summary.headline])]
        powered = next((c.power for c in summary.headline if c.power is not None), None)
        if powered is not None:
            parts += ["", f"Power: {_md_cell(powered.sentence())}."]
    parts += ["", "## MUI v2", md_table(["task", "on attempts", "success lift", "cost saving", "MUI", "harm", "net"],
                                         [[t.task_id, t.on_attempts, t.success_lift_share, t.cost_saving_share, t.mui, t.harm_share, t.net]
                                          for t in summary.mui])]
    parts += ["", "## Delivery (layer 1)", md_table(["condition", "confirmed", "attempts", "rate", "warning"],
                                                     [[d.condition, d.confirmed, d.attempts, d.rate, d.warning or ""] for d in summary.delivery])]
    if summary.damage:
        parts += ["", "## Damage (failed where off passed, per condition; task-clustered 95% intervals)", md_table(
            ["condition", "memory system", "tasks", "off passed (pairs)", "damaged (pairs)", "damaged tasks", "share", "low", "high"],
            [[d.condition, d.system, d.tasks, d.off_passed_pairs, d.damaged_pairs, ", ".join(d.damaged_tasks) or "none",
              _md_number(d.share.estimate), _md_number(d.share.low), _md_number(d.share.high)] for d in summary.damage])]
    harness = [a for a in summary.ablations if a.kind == "harness-check"]
    if harness:
        parts += ["", "## Harness check (ablate:all - off; not a memory effect)",
                  md_table(["task", "gap", "flag"], [[a.task_id, a.delta if a.measured else "n/a",
                                                           "not measured" if not a.measured else "FLAGGED" if a.flagged else "ok"]
                                                          for a in harness])]
    parts += ["", f"Full report: `{report_uri}`"]
    return "\n".join(parts)


def table_rows(summary: GradingSummary) -> dict[str, list[dict[str, Any]]]:
    """Rows for table artifacts: pass rates, MUI and the ablation deltas (marginal, never summed)."""
    return {
        "pass-rates": [r.model_dump(mode="json") for r in summary.pass_rates],
        "mui": [t.model_dump(mode="json") for t in summary.mui],
        "ablations": [a.model_dump(mode="json") for a in summary.ablations],
    }
