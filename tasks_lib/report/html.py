"""The report as one self-contained HTML page: inline CSS, plots as `data:` PNGs, no external URL.

The headline comes first: per compared pair of conditions, the task-clustered effects of
`tasks_lib.analysis.headline` with their 95% intervals, units and rounded p-values. Every piece of
text that comes from an artifact goes through `html.escape`.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from html import escape

from tasks_lib.analysis.admission import AdmissionDecision
from tasks_lib.analysis.aggregate import CALIBRATION_REASON, Aggregate, AuditRow
from tasks_lib.analysis.grading import COST_SAVING_FACTOR, HARNESS_GAP_LIMIT, LOW_DELIVERY_RATE, GradingSummary
from tasks_lib.analysis.headline import Comparison, Effect, MuiEffect
from tasks_lib.report import plots

CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:72em;color:#222;padding:0 1em}
h1{font-size:1.6em}h2{font-size:1.25em;border-bottom:1px solid #ccc;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:.6em 0;font-size:.9em}
th,td{border:1px solid #ccc;padding:.25em .6em;text-align:left}th{background:#f2f2f2}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.flag td{background:#fde2e1}
.banner{padding:.8em 1em;margin:1em 0;border-radius:4px}
.calibration{background:#fff4ce;border:2px solid #c9a400}
.warning{background:#fde2e1;border:2px solid #c0392b}
.ok{background:#e6f4ea;border:1px solid #2e7d32}
.note{color:#555;font-size:.9em}
.headline{background:#eef4fb;border:2px solid #1f5f99}.headline h2{margin-top:.2em}
img.plot{max-width:100%;border:1px solid #ddd;margin:.5em 0}
"""


def _cell(value: object) -> str:
    text = "" if value is None else str(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], flagged: Sequence[bool] | None = None) -> str:
    """An HTML table; every header and cell is escaped; flagged rows are highlighted."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for index, row in enumerate(rows):
        mark = ' class="flag"' if flagged and flagged[index] else ""
        body.append(f"<tr{mark}>{''.join(_cell(v) for v in row)}</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def _pct(ratio: str) -> str:
    return f"{float(Fraction(ratio)):.0%}"


def _p(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def _img(uri: str, alt: str) -> str:
    return f'<img class="plot" alt="{escape(alt)}" src="{uri}">'


def title(summary: GradingSummary) -> str:
    """The page title and the run's facts."""
    facts = (f"{summary.attempts} attempts graded ({summary.excluded} excluded, {summary.ungradable} ungradable); "
             f"agents: {', '.join(summary.agents) or 'none'}; tasks: {len(summary.tasks)}; "
             f"conditions: {', '.join(summary.conditions)}.")
    return f"<h1>memtrial report: {escape(summary.run_id)}</h1><p>{escape(facts)}</p>"


def pvalue_text(p: float | None) -> str:
    """A p-value rounded to two significant digits, `< 0.001` below that, `not tested` for None."""
    if p is None:
        return "not tested"
    return "< 0.001" if p < 0.001 else f"{p:.2g}"


def p_phrase(p: float | None) -> str:
    """`p = 0.25`, `p < 0.001` or `p not tested`, for running text."""
    text = pvalue_text(p)
    return f"p {text}" if text.startswith(("<", "not")) else f"p = {text}"


def effect_text(effect: Effect, scale: float, digits: int, unit: str) -> str:
    """An effect with its unit and 95% interval, or why it has none."""
    if effect.estimate is None:
        return "n/a (no task graded under both conditions)"
    text = f"{effect.estimate * scale:+,.{digits}f} {unit}"
    if effect.exploratory:
        return f"{text} (exploratory: {effect.nonzero_tasks} task(s) differ, under 5)"
    low = "unbounded" if effect.low is None else f"{effect.low * scale:+,.{digits}f}"
    high = "unbounded" if effect.high is None else f"{effect.high * scale:+,.{digits}f}"
    return f"{text}, 95% CI [{low}, {high}]"


def mui_text(mui: MuiEffect) -> str:
    """Net MUI with its interval and split, in percent of on attempts, with the raw counts."""
    return (f"Net MUI {mui.net:+.1%} of on attempts, 95% CI [{mui.low:+.1%}, {mui.high:+.1%}], {p_phrase(mui.p_value)} "
            f"= success lift {mui.success_lift:.1%} [{mui.success_lift_low:.1%}, {mui.success_lift_high:.1%}] "
            f"+ cost saving {mui.cost_saving:.1%} [{mui.cost_saving_low:.1%}, {mui.cost_saving_high:.1%}] "
            f"- harm {mui.harm:.1%} [{mui.harm_low:.1%}, {mui.harm_high:.1%}]; "
            f"{mui.success_lifts} lift(s), {mui.cost_savings} saving(s), {mui.harms} harm(s) in {mui.on_attempts} "
            f"gradable on attempts over {mui.tasks} task(s).")


KIND_LABELS = {"memory-effect": "memory effect", "ablation": "what the ablated lanes carry", "versus-off": "versus off"}


def _comparison_row(c: Comparison) -> tuple[object, ...]:
    return (f"{c.condition_a} - {c.condition_b}", KIND_LABELS[c.kind], c.tasks,
            f"{c.passes_a} of {c.gradable_a} vs {c.passes_b} of {c.gradable_b}",
            effect_text(c.success_difference, 100, 1, "pp"), pvalue_text(c.success_difference.p_value),
            effect_text(c.token_difference, 1, 0, "tokens/attempt"), pvalue_text(c.token_difference.p_value),
            effect_text(c.wall_difference, 1, 2, "s/attempt"), pvalue_text(c.wall_difference.p_value))


def headline_section(summary: GradingSummary) -> str:
    """The headline block: net MUI and every compared pair's task-clustered effects, first on the page."""
    parts = ['<div class="banner headline" id="headline"><h2>Headline: task-clustered effects (95% intervals)</h2>']
    if summary.calibration:
        parts.append("<p><strong>Calibration run</strong>: proves the apparatus; not a memory system's result.</p>")
    if not summary.headline:
        parts.append(_p("No pair of conditions to compare (a run needs on and off, or another condition and off)."))
    else:
        first = summary.headline[0]
        if first.mui is not None:
            parts.append(f"<p><strong>{escape(mui_text(first.mui))}</strong></p>")
        parts.append(table(["comparison (a - b)", "what it shows", "tasks", "passed (attempts, a vs b)",
                            "success difference (percentage points)", "p", "token difference (tokens per attempt)", "p",
                            "wall-time difference (seconds per attempt)", "p"], [_comparison_row(c) for c in summary.headline]))
        reference = first.trial_level_mcnemar
        parts.append(_p(
            "The task is the unit: each figure is the mean over tasks of a per-task difference (a task counts once, "
            f"whatever its trials). Test and interval: {first.success_difference.method}; bounds are clipped to the "
            "measure's range, and a zero-width interval means every task moved by the same amount (the test assumes "
            "symmetry), not certainty. Tokens and wall time are exploratory below 5 tasks with a difference."
            + (f" Reference only, treating trials as independent: trial-level exact McNemar over {reference.pairs} pairs, "
               f"{p_phrase(reference.p_value)}." if reference else "")))
    if summary.warnings:
        parts.append(f'<p><a href="#warnings">{len(summary.warnings)} warning(s) below</a>: read them before quoting these numbers.</p>')
    return "".join(parts) + "</div>"


def banners(summary: GradingSummary) -> str:
    """The calibration banner and every warning."""
    parts = []
    if summary.calibration:
        parts.append('<div class="banner calibration" id="calibration"><strong>Calibration run.</strong> These attempts were '
                     "run by the calibration agent, an instrument of known effect that proves the apparatus. They are "
                     "not a published cohort and must not be quoted as a memory system's result.</div>")
    if summary.warnings:
        items = "".join(f"<li>{escape(w)}</li>" for w in summary.warnings)
        parts.append(f'<div class="banner warning" id="warnings"><strong>Read before trusting these numbers:</strong><ul>{items}</ul></div>')
    return "".join(parts)


def delivery_section(summary: GradingSummary) -> str:
    """Layer one: the confirmed-delivery rate per condition, low rates as a warning."""
    rows = [(d.condition, d.attempts, d.confirmed, d.served_other, d.unwitnessed, d.unknown, f"{d.rate} ({_pct(d.rate)})", d.warning or "")
            for d in summary.delivery]
    low = [d for d in summary.delivery if d.warning]
    banner = (f'<div class="banner warning" id="delivery-warning"><strong>Delivery warning:</strong> '
              f"{escape(' '.join(d.warning or '' for d in low))}</div>") if low else \
        '<div class="banner ok">Delivery confirmed as expected for every condition.</div>'
    return ("<h2>Layer 1: memory delivered</h2>"
            + _p(f"Confirmed from the runner's delivery witness: an attempt is delivered only when the witness served "
                 f"one of the task's planted memories (by id or exact text); the transcript never decides. 'Other "
                 f"memories only' counts attempts where the memory system served none of the planted ones; 'unwitnessed' "
                 f"counts transcripts claiming a delivery the witness never served. Under on, a rate below "
                 f"{float(LOW_DELIVERY_RATE):.0%} is flagged; under off and ablate:all any delivery is a leak.")
            + banner + table(["condition", "attempts", "delivered", "other memories only", "unwitnessed", "unknown", "rate", "warning"],
                             rows, [bool(d.warning) for d in summary.delivery]))


def pass_rate_section(summary: GradingSummary, plot: str) -> str:
    """Pass rates per task and condition with both intervals."""
    rows = [("all tasks" if r.task_id == "*" else r.task_id, r.condition, r.passes, r.gradable, r.ungradable, r.rate,
             f"{r.wilson_low:.3f} - {r.wilson_high:.3f}", f"{r.cp_low:.3f} - {r.cp_high:.3f}") for r in summary.pass_rates]
    return ("<h2>Pass rates</h2>" + _p("Ungradable attempts are counted but in no denominator. Intervals are 95%.")
            + _img(plot, "pass rate per task and condition")
            + table(["task", "condition", "passes", "gradable", "ungradable", "rate", "Wilson 95%", "Clopper-Pearson 95%"], rows)
            + _p("pass@k: the chance that at least one of k attempts of a task passes; pass^k: that all k pass "
                 "(unbiased estimators, averaged over the condition's tasks).")
            + table(["condition", "k (attempts)", "tasks", "pass@k", "pass^k"],
                    [(r.condition, r.k, r.tasks, f"{r.pass_at_k} ({_pct(r.pass_at_k)})", f"{r.pass_hat_k} ({_pct(r.pass_hat_k)})")
                     for r in summary.pass_at_k]))


def mui_section(summary: GradingSummary, plot: str) -> str:
    """MUI v2 per task, split into success lift and cost saving, with harm and net; the v1 echo as reference."""
    rows = [("all tasks" if t.task_id == "*" else t.task_id, t.on_attempts, t.success_lift, t.cost_saving, t.harm,
             f"{t.mui} ({_pct(t.mui)})" if t.on_attempts else "n/a (no gradable on attempts)", t.success_lift_share, t.cost_saving_share,
             t.harm_share, f"{t.net} ({_pct(t.net)})" if t.on_attempts and t.net is not None else "n/a",
             f"{t.surface_echo}/{t.surface_echo_known}" if t.surface_echo_known else "unknown") for t in summary.mui]
    return ("<h2>Layer 2-3: MUI v2 (memory changed the result)</h2>"
            + _p("An on attempt earns credit only if its planted memory was confirmed delivered, it passed, and the "
                 f"off attempt of the same task and trial failed (success lift) or used at least {float(COST_SAVING_FACTOR)} "
                 "times its tokens (cost saving). The two are exclusive and sum to MUI. Harm counts the other direction, "
                 "delivered or not: off passed and on failed, or on used at least 1.5 times a passing off's tokens; "
                 "net = MUI - harm. Shares are of gradable on attempts, pooled; the headline averages them per task. "
                 "The v1 surface echo (the agent quoting a memory's opening text) is a reference figure only.")
            + (_img(plot, "MUI split per task") if summary.mui else "")
            + table(["task", "on attempts", "success lift", "cost saving", "harm", "MUI", "lift share", "saving share",
                     "harm share", "net MUI", "v1 echo (reference)"], rows))


def paired_section(summary: GradingSummary, plot: str) -> str:
    """Exact McNemar on discordant pairs; tokens and wall time, exploratory below five pairs."""
    parts = ["<h2>Paired statistics (on vs off, trial level: reference only)</h2>",
             _p("These pair attempts by task and trial as if trials were independent, which overstates the evidence "
                "when a task's trials agree; the headline's task-clustered figures are the ones to publish.")]
    if summary.mcnemar:
        m = summary.mcnemar
        parts.append(table(["pairs", "only on passed", "only off passed", "exact McNemar p (two-sided)"],
                           [(m.pairs, m.on_only, m.off_only, f"{m.pvalue} ({pvalue_text(float(Fraction(m.pvalue)))})")]))
    else:
        parts.append(_p("No gradable on/off pairs: no McNemar test."))
    rows = [(p.measure, p.pairs, None if p.median_difference is None else round(p.median_difference, 3), "exploratory (fewer than 5 pairs): no test" if p.exploratory else "tested",
             pvalue_text(p.sign_pvalue), pvalue_text(p.wilcoxon_pvalue)) for p in summary.paired]
    parts.append(table(["measure (on - off)", "pairs", "median difference", "status", "sign test p", "Wilcoxon p"], rows))
    parts.append(_img(plot, "token distribution per condition"))
    return "".join(parts)


def ablation_section(summary: GradingSummary) -> str:
    """Marginal lane deltas (never summed) and the harness check (never a memory effect)."""
    marginal = [a for a in summary.ablations if a.kind == "marginal"]
    harness = [a for a in summary.ablations if a.kind == "harness-check"]
    parts = ["<h2>Per-lane ablation (marginal contributions)</h2>",
             _p("success(on) - success(ablate:<lane>). Lanes overlap, so these are marginal contributions: do not "
                "sum them to explain the on/off gap.")]
    if marginal:
        parts.append(table(["task", "lane", "on", "ablated", "marginal delta"],
                           [("all tasks" if a.task_id == "*" else a.task_id, a.lane, f"{a.passes_a}/{a.gradable_a}",
                             f"{a.passes_b}/{a.gradable_b}", a.delta) for a in marginal]))
    else:
        parts.append(_p("No on and ablate:<lane> conditions in this run."))
    parts.append("<h2>Harness check: ablate:all - off</h2>")
    parts.append(_p(f"Not a memory effect. With every lane ablated the agent should behave as with memory off; a gap "
                    f"above {HARNESS_GAP_LIMIT} ({float(HARNESS_GAP_LIMIT):.0%}) means the ablation switch misses an injection path."))
    if harness:
        parts.append(table(["task", "ablate:all", "off", "gap", "flag"],
                           [("all tasks" if a.task_id == "*" else a.task_id, f"{a.passes_a}/{a.gradable_a}",
                             f"{a.passes_b}/{a.gradable_b}", a.delta, "FLAGGED" if a.flagged else "ok") for a in harness],
                           [a.flagged for a in harness]))
    else:
        parts.append(_p("No ablate:all and off conditions in this run: the harness was not checked."))
    return "".join(parts)


def audit_section(rows: Sequence[AuditRow]) -> str:
    """Mutation-audit receipts: found, passed, violations."""
    bad = [r for r in rows if not r.found or not r.passed]
    summary = f"{len(rows)} attempts; {sum(r.found for r in rows)} receipts found; {sum(bool(r.passed) for r in rows)} passed."
    detail = table(["task", "condition", "trial", "receipt", "violations"],
                   [(r.task_id, r.condition, r.trial, "found" if r.found else "MISSING", ", ".join(r.violation_paths) or r.violations)
                    for r in bad], [True] * len(bad)) if bad else ""
    return "<h2>Mutation audit</h2>" + f"<p>{escape(summary)}</p>" + detail


def excluded_section(excluded: Sequence[AdmissionDecision], recorded: bool) -> str:
    """Attempts excluded by an admission decision, with their reasons."""
    parts = ['<h2 id="excluded">Excluded attempts</h2>']
    if not recorded:
        parts.append("<p>No admission decisions recorded for this run: every completed attempt is graded.</p>")
    elif not excluded:
        parts.append("<p>Admission decisions recorded; none excluded.</p>")
    else:
        parts.append(table(["task", "condition", "trial", "reason code", "detail"],
                           [(e.task_id, e.condition, e.trial, e.reason_code, e.detail) for e in excluded]))
        if any(e.reason_code == CALIBRATION_REASON for e in excluded):
            parts.append(_p(f"Attempts excluded as {CALIBRATION_REASON} are not publishable; they are graded above "
                            "only as the calibration of the apparatus."))
    return "".join(parts)


def attempts_section(aggregate: Aggregate) -> str:
    """Every graded attempt, one row each."""
    rows = [(g.task_id, g.condition, g.trial, g.outcome, g.delivered, g.tokens, round(g.wall_seconds, 3), g.mui_credit, g.mui_reason)
            for g in aggregate.grades]
    return "<h2>Attempts</h2>" + table(["task", "condition", "trial", "outcome", "delivered", "tokens", "wall s", "MUI credit", "why"], rows)


def render_html(aggregate: Aggregate, generated_at: str) -> str:
    """The whole report page for one aggregated run."""
    summary = aggregate.summary
    conditions = list(summary.conditions)
    body = "".join([
        title(summary),
        headline_section(summary),
        banners(summary),
        delivery_section(summary),
        pass_rate_section(summary, plots.pass_rate_plot(summary.pass_rates, conditions)),
        mui_section(summary, plots.mui_plot(summary.mui)),
        paired_section(summary, plots.token_plot(aggregate.grades, conditions)),
        ablation_section(summary),
        audit_section(aggregate.audit),
        excluded_section(aggregate.excluded, aggregate.admissions_recorded),
        attempts_section(aggregate),
        f'<p class="note">Generated {escape(generated_at)} from the run\'s stored artifacts by memtrial report.</p>',
    ])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>memtrial report {escape(summary.run_id)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
