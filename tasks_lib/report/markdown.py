"""The report's tables as Markdown and as row lists, for Prefect artifacts (no Prefect import here).

The digest words its figures as the HTML page does (`tasks_lib.report.wording`): warnings first,
differences in percentage points, p-values with how they were counted, raw counts.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from tasks_lib.analysis.grading import GradingSummary
from tasks_lib.report.wording import (
    MUI_RULE,
    PP,
    effect_p,
    mui_p,
    points,
    power_capped,
    power_result,
)


def _md_cell(value: object) -> str:
    return ("" if value is None else str(value)).replace("|", "\\|").replace("\n", " ")


def _md_points(value: float | None) -> str:
    """A difference of rates in percentage points, signed, without the unit (the header names it)."""
    return "" if value is None else f"{value * 100:+.1f}"


def _md_percent(value: float | None) -> str:
    """A rate or share in percent, without the sign a difference carries."""
    return "" if value is None else f"{value * 100:.1f}"


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
    parts += [f"- {'DISTRUST' if w in summary.distrust else 'WARNING'}: {_md_cell(w)}" for w in summary.warnings]
    if summary.headline:
        tokens = [c.token_difference.estimate for c in summary.headline]
        parts += ["", "## Headline (task-clustered, 95% intervals)", md_table(
            ["a - b", "tasks", f"success difference ({PP})", "low", "high", "p", "tokens/attempt",
             f"net MUI ({PP})", "MUI low", "MUI high", "MUI p"],
            [[f"{c.condition_a} - {c.condition_b}", c.tasks,
              _md_points(c.success_difference.estimate) + (" (exploratory)" if c.success_difference.exploratory else ""),
              _md_points(c.success_difference.low), _md_points(c.success_difference.high), effect_p(c.success_difference),
              "" if token is None else f"{token:+,.0f}",
              *([_md_points(c.mui.net), _md_points(c.mui.low), _md_points(c.mui.high), mui_p(c.mui)] if c.mui else ["", "", "", ""])]
             for c, token in zip(summary.headline, tokens, strict=True)])]
        if any(c.mui for c in summary.headline):
            parts += ["", _md_cell(MUI_RULE)]
        powered = next((c.power for c in summary.headline if c.power is not None), None)
        if powered is not None:
            capped = power_capped(powered)
            parts += ["", f"Power: {_md_cell(power_result(powered, design=False))}" + (f" ({_md_cell(capped)})" if capped else "")
                      + f". Method: {_md_cell(powered.method)}."]
    parts += ["", "## MUI v2 (attempts)", md_table(
        ["task", "on attempts", "success lift", "cost saving", "harm", "net MUI"],
        [[t.task_id, t.on_attempts, t.success_lift, t.cost_saving, "" if t.harm is None else t.harm,
          "" if t.net is None or not t.on_attempts else points(float(Fraction(t.net)))] for t in summary.mui])]
    parts += ["", "## Delivery (layer 1)", md_table(["condition", "confirmed", "attempts", "rate", "warning"],
                                                     [[d.condition, d.confirmed, d.attempts, f"{d.confirmed / d.attempts:.0%}" if d.attempts else "n/a",
                                                       d.warning or ""] for d in summary.delivery])]
    if summary.damage:
        parts += ["", "## Damage (failed where off passed, per condition; task-clustered 95% intervals)", md_table(
            ["condition", "memory system", "tasks", "off passed (pairs)", "damaged (pairs)", "damaged tasks", "share (%)", "low", "high"],
            [[d.condition, d.system, d.tasks, d.off_passed_pairs, d.damaged_pairs, ", ".join(d.damaged_tasks) or "none",
              *(_md_percent(v) for v in (d.share.estimate, d.share.low, d.share.high))] for d in summary.damage])]
    harness = [a for a in summary.ablations if a.kind == "harness-check"]
    if harness:
        parts += ["", "## Harness check (ablate:all - off; not a memory effect)",
                  md_table(["task", f"gap ({PP})", "flag"], [[a.task_id, points(float(Fraction(a.delta))) if a.measured else "n/a",
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
