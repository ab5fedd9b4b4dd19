"""The report as one self-contained HTML page: inline CSS, plots as `data:` PNGs, no external URL.

The page reads in the order a reader should: what to distrust (inline, before any figure), then
the headline (the success difference first; net MUI after it with its rule), then the results
behind it, then the provenance (hashes, hosts, configs) and the attempts. Units, raw counts and
p-value wording follow `tasks_lib.report.wording`. Every piece of text that comes from an artifact
goes through `html.escape`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from fractions import Fraction
from html import escape
from typing import Any, TypeVar

from tasks_lib.analysis.admission import AdmissionDecision
from tasks_lib.analysis.aggregate import CALIBRATION_REASON, Aggregate, AuditRow
from tasks_lib.analysis.grading import (
    HARNESS_GAP_LIMIT,
    LOW_DELIVERY_RATE,
    GradingSummary,
)
from tasks_lib.analysis.headline import TOKENS_PER_SOLVE, Comparison, Effect
from tasks_lib.conditions import NO_MEMORY_SYSTEM, condition_summary
from tasks_lib.contracts import RunRecord
from tasks_lib.report import plots
from tasks_lib.report.suites import SuiteResults
from tasks_lib.report.wording import (
    MUI_RULE,
    PP,
    effect_figure,
    effect_p,
    mui_figure,
    points,
    power_capped,
    power_result,
    raw_rate,
    share_figure,
)
from tasks_lib.run.provenance import RunProvenance
from tasks_lib.suites.writepath import WritePathResult

T = TypeVar("T")

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
.lead{font-size:1.15em}.warning li.distrust{font-weight:bold}
img.plot{display:block;max-width:100%;height:auto;border:1px solid #ddd;margin:.5em 0}
table.facts th{width:14em;vertical-align:top}code{font-size:.85em;word-break:break-all}
.missing{color:#8a6d00;font-style:italic}
"""


class Markup(str):
    """A cell already rendered as HTML (built here from escaped parts); `table` does not escape it again."""


Linker = Callable[[str], "str | None"]
"""Artifact key -> href relative to the report, or None when the page cannot reach the store."""
NOT_RECORDED = Markup('<span class="missing">not recorded</span>')
"""What the report shows for a fact the run did not record (never a guess)."""


def _cell(value: object) -> str:
    if isinstance(value, Markup):
        return f"<td>{value}</td>"
    text = "" if value is None else str(value)
    numeric = isinstance(value, (int, float)) and not isinstance(value, bool)
    return f'<td class="num">{escape(text)}</td>' if numeric else f"<td>{escape(text)}</td>"


def _pp(ratio: str) -> str:
    """A difference of two rates (an exact ratio) in percentage points only."""
    return points(float(Fraction(ratio)))


def _share(count: int | None, attempts: int) -> str:
    """A count of attempts with its share of `attempts`: raw counts, never a reduced ratio."""
    return "n/a" if count is None else raw_rate(count, attempts)


def table(headers: Sequence[str], rows: Sequence[Sequence[object]], flagged: Sequence[bool] | None = None,
          attempts: Sequence[str] | None = None) -> str:
    """An HTML table; every header and cell is escaped (but `Markup`); flagged rows are highlighted;
    `attempts` names the attempt of each row (`class="attempt" data-attempt=...`)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in headers)
    body = []
    for index, row in enumerate(rows):
        mark = ' class="flag"' if flagged and flagged[index] else ""
        if attempts is not None:
            mark += f' class="attempt" data-attempt="{escape(attempts[index])}"' if not mark else f' data-attempt="{escape(attempts[index])}"'
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
    """A reference test's p-value (sign test, Wilcoxon, McNemar) to three significant digits, `< 0.001` below, `not tested` for None."""
    if p is None:
        return "not tested"
    return "< 0.001" if p < 0.001 else f"{p:.3g}"


def p_phrase(p: float | None) -> str:
    """A reference test's p for running text: `p = 0.625`, `p < 0.001`, `p not tested`."""
    text = pvalue_text(p)
    return f"p {text}" if text.startswith(("<", "not")) else f"p = {text}"


def effect_text(effect: Effect, scale: float, digits: int, unit: str) -> str:
    """An effect in one unit with its 95% interval and the tasks it is over, labelled exploratory when thin."""
    figure = effect_figure(effect, unit, scale, digits)
    if effect.estimate is None:
        return figure
    label = f" (exploratory: {effect.nonzero_tasks} task(s) differ, under 5)" if effect.exploratory else ""
    if effect.exploratory and effect.low is None and effect.high is None:
        return figure + label
    return f"{figure}{label} over {effect.tasks} task(s)"


KIND_LABELS = {"memory-effect": "memory effect", "ablation": "what the ablated lanes carry", "versus-off": "versus off",
               "versus-notes": "versus the notes file (the incumbent)"}


def _comparison_row(c: Comparison) -> tuple[object, ...]:
    return (f"{c.condition_a} - {c.condition_b}", KIND_LABELS[c.kind], c.tasks,
            f"{c.passes_a}/{c.gradable_a} vs {c.passes_b}/{c.gradable_b}",
            effect_text(c.success_difference, 100, 1, PP), effect_p(c.success_difference),
            effect_text(c.token_difference, 1, 0, "tokens/attempt"), effect_p(c.token_difference),
            "n/a (stored before it)" if c.tokens_per_solve is None else effect_text(c.tokens_per_solve, 1, 0, "tokens/solve"),
            effect_text(c.wall_difference, 1, 2, "s/attempt"), effect_p(c.wall_difference))


def success_lead(c: Comparison) -> str:
    """The first figure of the page: a - b in success, with its interval, p and the raw counts behind it."""
    d = c.success_difference
    return (f"Success {c.condition_a} - {c.condition_b}: {effect_text(d, 100, 1, PP)}, {effect_p(d)} "
            f"({c.passes_a}/{c.gradable_a} {c.condition_a} vs {c.passes_b}/{c.gradable_b} {c.condition_b} attempts passed).")


def tokens_lead(c: Comparison) -> str:
    """The cost side of the first comparison: tokens per attempt and per solve, a - b."""
    solve = ("" if c.tokens_per_solve is None else
             f"; per solve {effect_text(c.tokens_per_solve, 1, 0, 'tokens/solve')}, {effect_p(c.tokens_per_solve)}")
    return f"Tokens {c.condition_a} - {c.condition_b}: {effect_text(c.token_difference, 1, 0, 'tokens/attempt')}, " \
           f"{effect_p(c.token_difference)}{solve}."


def power_paragraph(c: Comparison) -> str:
    """What the test could have seen, its method stated once; empty without a power figure."""
    if c.power is None:
        return ""
    capped = power_capped(c.power)
    text = power_result(c.power, design=False) + (f" ({capped})" if capped else "") + f". Method: {c.power.method}."
    return f'<p id="power"><strong>What this test can see</strong>: {escape(text)}</p>'


def headline_section(summary: GradingSummary) -> str:
    """The headline block: the success difference first, then every compared pair, then net MUI with its rule and power."""
    parts = ['<div class="banner headline" id="headline"><h2>Headline: task-clustered effects (95% intervals)</h2>']
    if summary.calibration:
        parts.append("<p><strong>Calibration run</strong>: proves the apparatus; not a memory system's result.</p>")
    if not summary.headline:
        parts.append(_p("No pair of conditions to compare (a run needs on and off, or another condition and off)."))
        return "".join(parts) + "</div>"
    first = summary.headline[0]
    parts.append(f'<p class="lead" id="success-difference"><strong>{escape(success_lead(first))}</strong></p>')
    parts.append(f"<p>{escape(tokens_lead(first))}</p>")
    parts.append(table(["comparison (a - b)", "what it shows", "tasks", "passed (attempts, a vs b)",
                        f"success difference ({PP}, percentage points)", "p", "token difference (tokens per attempt)", "p",
                        "token difference (tokens per solve)",
                        "wall-time difference (seconds per attempt)", "p"], [_comparison_row(c) for c in summary.headline]))
    if first.mui is not None:
        parts.append(f'<p id="net-mui"><strong>{escape(first.condition_a)} - {escape(first.condition_b)}: '
                     f"{escape(mui_figure(first.mui))}.</strong> {escape(MUI_RULE)}</p>")
    reference = first.trial_level_mcnemar
    parts.append(_p(
        "The task is the unit: each figure is the mean over tasks of a per-task difference (a task counts once, "
        f"whatever its trials). Test and interval: {first.success_difference.method}; bounds lie in the measure's "
        "range (docs/STATISTICS.md). A p-value marked exact counted every sign assignment; one marked with draws counted a "
        "seeded Monte Carlo sample, which cannot show p below 2 / (draws + 1). Below 5 tasks with a difference the success "
        "difference is exploratory (its interval is shown, too thin to publish), and tokens and wall time are described, "
        f"not tested. Tokens per attempt: {first.token_difference.unit}. T{TOKENS_PER_SOLVE[1:]}."
        + (f" Reference only, treating trials as independent: trial-level exact McNemar over {reference.pairs} pairs, "
           f"{p_phrase(reference.p_value)}." if reference else "")))
    parts.append(power_paragraph(first))
    return "".join(parts) + "</div>"


def banners(summary: GradingSummary) -> str:
    """The calibration banner and every warning, the distrust ones first: shown before any figure."""
    parts = []
    if summary.calibration:
        parts.append('<div class="banner calibration" id="calibration"><strong>Calibration run.</strong> These attempts were '
                     "run by the calibration agent, an instrument of known effect that proves the apparatus. They are "
                     "not a published cohort and must not be quoted as a memory system's result.</div>")
    if summary.warnings:
        distrust = [w for w in summary.warnings if w in summary.distrust]
        notes = [w for w in summary.warnings if w not in summary.distrust]
        items = "".join([*(f'<li class="distrust">DISTRUST: {escape(w)}</li>' for w in distrust),
                         *(f"<li>{escape(w)}</li>" for w in notes)])
        parts.append(f'<div class="banner warning" id="warnings"><strong>Read before trusting the figures below '
                     f"({len(distrust)} distrust, {len(notes)} other):</strong><ul>{items}</ul></div>")
    return "".join(parts)


def delivery_section(summary: GradingSummary) -> str:
    """Layer one: the confirmed-delivery rate per condition, low rates as a warning."""
    rows = [(d.condition, d.attempts, d.confirmed, d.served_other, d.unwitnessed, d.unknown, raw_rate(d.confirmed, d.attempts), d.warning or "")
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
                 f"{float(LOW_DELIVERY_RATE):.0%} is flagged (likewise under notes and placebo); under off and ablate:all any "
                 f"delivery is a leak. The notes arm's receipt is the runner's own: it placed the notes file, intact, where "
                 f"the agent's harness loads it.")
            + banner + table(["condition", "attempts", "delivered", "other memories only", "unwitnessed", "unknown", "rate", "warning"],
                             rows, [bool(d.warning) for d in summary.delivery]))


def damage_section(summary: GradingSummary) -> str:
    """Per arm and condition: what it plants, and the tasks `off` passed that it failed (damage), task-clustered."""
    if not summary.damage:
        return ""
    rows = [(d.condition, condition_summary(d.condition), d.system, d.tasks, d.pairs, d.off_passed_pairs, d.damaged_pairs,
             ", ".join(d.damaged_tasks) or "none", share_figure(d.share, "pairs") + (
                 f" (exploratory: {d.share.nonzero_tasks} task(s) differ, under 5)" if d.share.exploratory else "")
             + f" over {d.share.tasks} task(s)")
            for d in summary.damage]
    return ("<h2>Damage per arm and condition (failed where off passed)</h2>"
            + _p("A pair is the attempt under the condition and the off attempt of the same task and trial, both gradable. "
                 "Damage counts pairs whose off attempt passed and whose attempt under the condition failed; the share is "
                 "averaged per task (each task counts once), with the task-clustered 95% interval.")
            + table(["condition", "what it plants", "memory system", "tasks", "pairs", "off passed (pairs)",
                     "damaged (pairs)", "damaged tasks", "damage share"], rows, [bool(d.damaged_pairs) for d in summary.damage]))


def pass_rate_section(summary: GradingSummary, plot: str) -> str:
    """Pass rates per task and condition with both intervals."""
    rows = [("all tasks" if r.task_id == "*" else r.task_id, r.condition, r.passes, r.gradable, r.ungradable, raw_rate(r.passes, r.gradable),
             f"{r.wilson_low:.1%} - {r.wilson_high:.1%}", f"{r.cp_low:.1%} - {r.cp_high:.1%}") for r in summary.pass_rates]
    return ("<h2>Pass rates</h2>" + _p("Ungradable attempts are counted but in no denominator. Intervals are 95%.")
            + _img(plot, "pass rate per task and condition")
            + table(["task", "condition", "passes (attempts)", "gradable (attempts)", "ungradable (attempts)", "pass rate",
                     "Wilson 95% (%)", "Clopper-Pearson 95% (%)"], rows)
            + _p("pass@k: the chance that at least one of k attempts of a task passes; pass^k: that all k pass "
                 "(unbiased estimators, averaged over the condition's tasks).")
            + table(["condition", "k (attempts)", "tasks", "pass@k", "pass^k"],
                    [(r.condition, r.k, r.tasks, _pct(r.pass_at_k), _pct(r.pass_hat_k))
                     for r in summary.pass_at_k]))


def mui_section(summary: GradingSummary, plot: str) -> str:
    """MUI v2 per task, split into success lift and cost saving, with harm and net; the v1 echo as reference."""
    rows = [("all tasks" if t.task_id == "*" else t.task_id, t.on_attempts, t.success_lift, t.cost_saving, t.harm,
             _share(t.success_lift + t.cost_saving, t.on_attempts) if t.on_attempts else "n/a (no gradable on attempts)",
             _share(t.success_lift, t.on_attempts), _share(t.cost_saving, t.on_attempts), _share(t.harm, t.on_attempts),
             _pp(t.net) if t.on_attempts and t.net is not None else "n/a",
             f"{t.surface_echo}/{t.surface_echo_known}" if t.surface_echo_known else "unknown") for t in summary.mui]
    return ("<h2>Layer 2-3: MUI v2 (memory changed the result)</h2>"
            + _p(f"{MUI_RULE} Lift and saving are exclusive and sum to MUI. Here counts and shares (%) are of gradable on "
                 f"attempts, pooled per task and over all tasks (the last row); net is a difference, in {PP}. The headline "
                 "averages the per-task figures. The v1 surface echo (the agent quoting a memory's opening text) is a "
                 "reference figure only.")
            + (_img(plot, "MUI split per task") if summary.mui else "")
            + table(["task", "on attempts", "success lift (attempts)", "cost saving (attempts)", "harm (attempts)", "MUI",
                     "lift share", "saving share", "harm share", f"net MUI ({PP})", "v1 echo (reference, attempts)"], rows))


def paired_section(summary: GradingSummary, plot: str) -> str:
    """Exact McNemar on discordant pairs; tokens and wall time, exploratory below five pairs."""
    parts = ["<h2>Paired statistics (on vs off, trial level: reference only)</h2>",
             _p("These pair attempts by task and trial as if trials were independent, which overstates the evidence "
                "when a task's trials agree; the headline's task-clustered figures are the ones to publish.")]
    if summary.mcnemar:
        m = summary.mcnemar
        parts.append(table(["pairs (attempts)", "only on passed (pairs)", "only off passed (pairs)", "exact McNemar p (two-sided)"],
                           [(m.pairs, m.on_only, m.off_only, f"{m.pvalue} ({pvalue_text(float(Fraction(m.pvalue)))})")]))
    else:
        parts.append(_p("No gradable on/off pairs: no McNemar test."))
    units = {"tokens": ("tokens per attempt", 0), "wall_seconds": ("s per attempt", 2)}
    rows = [(f"{p.measure} ({units[p.measure][0]})", p.pairs,
             "n/a" if p.median_difference is None else f"{p.median_difference:+,.{units[p.measure][1]}f} {units[p.measure][0].split()[0]}",
             "exploratory (fewer than 5 pairs): no test" if p.exploratory else "tested",
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
        parts.append(table(["task", "lane", "on (passed/gradable)", "ablated (passed/gradable)", "marginal delta (pp)"],
                           [("all tasks" if a.task_id == "*" else a.task_id, a.lane, f"{a.passes_a}/{a.gradable_a}",
                             f"{a.passes_b}/{a.gradable_b}", _pp(a.delta)) for a in marginal]))
    else:
        parts.append(_p("No on and ablate:<lane> conditions in this run."))
    parts.append("<h2>Harness check: ablate:all - off</h2>")
    parts.append(_p(f"Not a memory effect. With every lane ablated the agent should behave as with memory off; a gap "
                    f"above {float(HARNESS_GAP_LIMIT) * 100:.0f} {PP} means the ablation switch misses an injection path."))
    if harness:
        parts.append(table(["task", "ablate:all (passed/gradable)", "off (passed/gradable)", "gap (pp)", "flag"],
                           [("all tasks" if a.task_id == "*" else a.task_id, f"{a.passes_a}/{a.gradable_a}",
                             f"{a.passes_b}/{a.gradable_b}", _pp(a.delta) if a.measured else "n/a",
                             "not measured" if not a.measured else "FLAGGED" if a.flagged else "ok") for a in harness],
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


def _link(key: str | None, label: str, link: Linker, exists: Callable[[str], bool], missing: str) -> Markup:
    """A link to a stored artifact, or why there is none (not stored, stored but gone, unreachable)."""
    if key is None:
        return Markup(f'<span class="missing">{escape(missing)}</span>')
    if not exists(key):
        return Markup(f'<span class="missing">{escape(label)} missing ({escape(key)})</span>')
    href = link(key)
    if href is None:
        return Markup(f"<code>{escape(key)}</code>")
    return Markup(f'<a class="artifact" href="{escape(href)}">{escape(label)}</a>')


def _no_check(record: RunRecord) -> str:
    """Why an attempt links no check output: its check never ran, or it ran before memtrial kept its output."""
    ran = record.check_exit_code is not None or record.check_sandbox is not None
    return "not recorded (stored before memtrial kept check output)" if ran else "no check ran"


def attempts_section(aggregate: Aggregate, link: Linker, exists: Callable[[str], bool]) -> str:
    """Every graded attempt, one row each, linking its transcript and its check's stored output."""
    records = {(r.task_id, r.condition, r.trial): r for r in aggregate.records}
    rows, ids = [], []
    for g in aggregate.grades:
        r = records.get((g.task_id, g.condition, g.trial))
        transcript = _link(r.transcript if r else None, "transcript", link, exists, "not recorded")
        check = _link(r.check_output, "check output", link, exists, _no_check(r)) if r else NOT_RECORDED
        cost = f"{r.cost_usd:,.4f}" if r else NOT_RECORDED
        rows.append((g.task_id, g.condition, g.trial, g.outcome, g.delivered, f"{g.tokens:,}", f"{g.wall_seconds:,.3f}", cost,
                     g.mui_credit, g.mui_reason, transcript, check))
        ids.append(f"{g.task_id}/{g.condition}/t{g.trial}")
    body = table(["task", "condition", "trial", "outcome", "delivered", "tokens (input + output)", "wall time (s)", "cost (USD)",
                  "MUI credit", "why", "transcript", "check output"], rows, attempts=ids)
    return ('<h2 id="attempts">Attempts</h2>'
            + _p("Links open the attempt's stored transcript and the post-turn check's output (exit status, sandbox, "
                 "post-turn verdict, stderr and stdout tails), both sealed with the run.") + body)


def _code(text: str | None) -> Markup:
    return NOT_RECORDED if text is None else Markup(f"<code>{escape(text)}</code>")


def _distinct(values: Sequence[T]) -> list[T]:
    return list(dict.fromkeys(values))


def _values(values: Sequence[str | None], code: bool = False) -> Markup:
    """Distinct values of one record field; `not recorded` for records without it."""
    out = []
    for value in _distinct(values):
        if value is None:
            out.append(str(NOT_RECORDED) + " (some records)" if len(set(values)) > 1 else str(NOT_RECORDED))
        else:
            out.append(f"<code>{escape(value)}</code>" if code else escape(value))
    return Markup(", ".join(out) or str(NOT_RECORDED))


def provenance_section(provenance: RunProvenance | None, records: Sequence[RunRecord], link: Linker,
                       exists: Callable[[str], bool]) -> str:
    """Where the numbers come from: memtrial, memory system, agent and model, corpus, config, machine."""
    p = provenance
    missing = NOT_RECORDED

    def fact(value: object) -> object:
        return missing if value is None else value

    if p is not None:
        build = Markup(escape(p.memtrial_version) + (", commit " + str(_code(p.memtrial_commit)) if p.memtrial_commit else
                                                     ", commit " + str(missing))
                       + (" <strong>with uncommitted changes</strong>" if p.memtrial_dirty else ""))
        memory = Markup(escape(p.memory_system) + (" (" + " ".join(escape(a) for a in p.provisioner_argv) + ")" if p.provisioner_argv else "")
                        + "; config digest " + str(_code(p.memory_config_digest))
                        + ("; adapter config " + str(_code(p.adapter_config.system)) + " " + str(_code(p.adapter_config.digest[:12]))
                           + " (" + escape(p.adapter_config.note) + ")" if p.adapter_config else "; adapter config: not known"))
        config = Markup((escape(p.config_name) if p.config_name else str(missing)) + "; digest " + str(_code(p.config_digest))
                        + ("; " + str(_link(p.config_key, "stored config", link, exists, "")) if p.config_key else ""))
        corpus = Markup(str(_code(p.corpus_commit)) + f" ({escape(p.tasks_root)})")
        when = f"records stored {p.recorded_at}"
        where = Markup(escape(p.hostname) + f" ({escape(p.platform)})")
        matrix = f"{', '.join(p.conditions)}; {p.trials} trial(s) per task and condition"
        sandbox: object = p.sandbox
        embedder: object = p.embedder
        parent: object = p.parent_run_id or "none (a run of its own)"
    else:
        build = memory = config = corpus = where = missing
        when, sandbox, embedder, parent = missing, missing, missing, missing
        trials = max((r.trial for r in records), default=-1) + 1
        matrix = Markup(escape(f"{', '.join(_distinct([r.condition for r in records]))}; {trials} trial(s) (from the records)"))
    agents = _values([r.agent for r in records])
    configs = [r.memory_config_digest for r in records if r.condition not in NO_MEMORY_SYSTEM]
    rows: list[tuple[str, object]] = [
        ("memtrial", build),
        ("memory system under test", Markup(str(_values([r.build_under_test for r in records])) + "; " + str(memory))),
        ("memory config digest (comparability key)", _values(configs, code=True) if configs else "none (no arm with memory)"),
        ("embedder", fact(embedder)),
        ("agent and model", Markup(str(agents) + "; model " + str(_values([r.model for r in records], code=True)))),
        ("corpus revision (fixtures built from)", corpus),
        ("tasks' source commits", _values([r.source_commit for r in records], code=True)),
        ("fixtures (corpus ids)", Markup(", ".join(
            f"{escape(t)}: " + (str(_code(c[:16] + "...")) if c else str(missing))
            for t, c in dict.fromkeys((r.task_id, r.corpus_id) for r in records)) or str(missing))),
        ("run config", config),
        ("conditions and trials", matrix),
        ("sandbox", fact(sandbox)),
        ("when", when),
        ("where (host)", where),
        ("nightly run", parent),
    ]
    note = ("" if p is not None else
            _p("This run has no provenance.json (stored before memtrial recorded one): facts only it holds are not recorded."))
    head = '<h2 id="provenance">Provenance</h2>'
    facts = "".join(f"<tr><th>{escape(label)}</th>{_cell(value)}</tr>" for label, value in rows)
    return f'{head}{note}<table class="facts"><tbody>{facts}</tbody></table>'


def _gate_number(name: str, value: float | None) -> str:
    """A gate's value (or bar) with its unit, read from the gate's name."""
    if value is None:
        return "unmeasured"
    if name.endswith(("_probes_min", "_cases_min")):
        return f"{value:g} cases"
    if "llm_calls" in name:
        return f"{value:g} calls"
    if "leaks" in name:
        return f"{value:g} leaks"
    if name.startswith("mrr"):
        return f"{value:.3f} (MRR, 0-1)"
    if "gain" in name or "regression" in name:
        return f"{value * 100:+.1f} pp"
    if name == "graph_calibration":
        return f"{value:g}"
    return f"{value:.1%}"


def _rate(rate: object) -> str:
    value = getattr(rate, "rate", None)
    if value is None:
        return "n/a (no cases)"
    return f"{value:.0%} ({rate.k}/{rate.n}; 95% {rate.lower:.0%} - {rate.upper:.0%})"  # type: ignore[attr-defined]


def write_path_section(result: WritePathResult) -> str:
    """One write-path sequence: the learning curve (pass/fail and tokens per position, off vs feed) and
    feed - off over the later tasks, the task as the unit."""
    e = result.later
    interval = (f"95% CI [{e.success_interval[0] * 100:+.1f}, {e.success_interval[1] * 100:+.1f}]" if e.success_interval
                else f"no interval ({e.method})")
    parts = [f'<h3 id="suite-write-path-{escape(result.sequence_id)}">Write-path sequence {escape(result.sequence_id)}: learning curve</h3>',
             _p(f"Tasks run in order on one project by {result.agent}. Under feed the memory system ingested, after each task, "
                "the agent's own session and the failing check's message through its own write path; under off nothing is kept. "
                f"Later tasks (n = {e.tasks}): success feed - off {points(e.success_difference)} (mean over tasks), {interval}; "
                f"tokens feed - off {e.token_difference:+.0f} per task."),
             table(["position", "task", "off", "feed", "tokens off", "tokens feed"],
                   [(c.position, c.task_id, "pass" if c.passed["off"] else "fail", "pass" if c.passed["feed"] else "fail",
                     c.tokens["off"], c.tokens["feed"]) for c in result.curve])]
    return "".join(parts)


def suites_section(suites: SuiteResults | None, link: Linker, exists: Callable[[str], bool]) -> str:
    """The suites' results stored with the run (or its nightly run), the retrieval suite's gates first."""
    parts = ['<h2 id="suites">Suites</h2>']
    if suites is None or suites.empty:
        parts.append("<p>No suite results stored with this run (its nightly run ran none, or it is a run of its own).</p>")
        return "".join(parts)
    sources = ", ".join(str(_link(key, f"{name}.json", link, exists, "")) for name, key in suites.keys.items())
    parts.append(f'<p class="note">From run {escape(suites.run_id)}: {sources}.</p>')
    if suites.retrieval is not None:
        r = suites.retrieval
        failed = [g for g in r.gates if not g.passed]
        verdict = (f"all {len(r.gates)} gates held" if not failed else f"{len(failed)} of {len(r.gates)} gates FAILED")
        parts.append(f'<h3 id="suite-retrieval">Retrieval suite: {escape(verdict)}</h3>')
        parts.append(_p(f"Memory system {r.adapter}, embedder {r.embedder}; score (Recall@5 over answerable cases) "
                        f"{r.score:.1%}; {r.efficiency.queries} queries, mean search {r.efficiency.search_ms_mean:.2f} ms, "
                        f"{r.efficiency.llm_calls} LLM calls."))
        parts.append(table(["gate", "measured", "bar", "held", "what was counted"],
                           [(g.name, _gate_number(g.name, g.value), f"{g.op} {_gate_number(g.name, g.threshold)}", "held" if g.passed else "FAILED",
                             g.detail) for g in r.gates], [not g.passed for g in r.gates]))
    if suites.recall is not None:
        w = suites.recall
        knee = (f"knee between {w.knee.previous} and {w.knee.length} turns (recall {w.knee.baseline_recall:.0%} -> "
                f"{w.knee.recall:.0%}, a drop of {w.knee.drop_points:.1f} pp; threshold {w.knee.threshold_points:.1f} pp)"
                if w.knee else "no knee: recall held at every length")
        parts.append(f'<h3 id="suite-recall">Recall sweep: {escape(knee)}</h3>')
        parts.append(_p("Plant, bury under filler turns, probe. Rates are of cases at each length, with 95% Wilson intervals. "
                        f"{w.model_calls} model call(s). No gate: a regression against the previous run is checked by the trend."))
        parts.append(table(["filler length (turns)", "recall", "stale answers", "false recall", "abstention"],
                           [(n, _rate(m.recall), _rate(m.staleness), _rate(m.false_recall), _rate(m.abstention))
                            for n, m in sorted(w.metrics_by_length.items())]))
    for seq in suites.write_path:
        parts.append(write_path_section(seq))
    for dataset, result in suites.external.items():
        overall = result.overall()
        parts.append(f'<h3 id="suite-{escape(dataset)}">{escape(dataset)}: {result.questions} questions</h3>')
        parts.append(_p(f"Memory system {result.memory}; {result.groups} groups; index {result.index_seconds:.1f} s, "
                        f"query p50 {result.query_p50_ms:.1f} ms, p95 {result.query_p95_ms:.1f} ms. No gate."))
        parts.append(table(["level", "metric", "k (results)", "overall"],
                           [(m.level, m.metric, m.k, f"{m.value:.3f} (0-1)" if m.metric == "ndcg" else f"{m.value:.1%}")
                            for m in overall.scores]))
    return "".join(parts)


def plot_calls(aggregate: Aggregate) -> tuple[tuple[Callable[..., str], tuple[Any, ...]], ...]:
    """The report's plots as (plot function, its inputs), in page order: pass rate, MUI split, tokens."""
    summary = aggregate.summary
    conditions = list(summary.conditions)
    return ((plots.pass_rate_plot, (summary.pass_rates, conditions)), (plots.mui_plot, (summary.mui,)),
            (plots.token_plot, (aggregate.grades, conditions)))


def render_html(aggregate: Aggregate, generated_at: str, *, provenance: RunProvenance | None = None,
                suites: SuiteResults | None = None, link: Linker = lambda key: None,
                exists: Callable[[str], bool] = lambda key: True, plot: plots.Plotter = plots.draw) -> str:
    """The whole report page for one aggregated run; `link` turns an artifact key into a relative href
    (None: the key is shown as text), `exists` says whether a key is stored, `plot` draws each plot
    (`plots.stored_plotter`: or finds it drawn)."""
    summary = aggregate.summary
    pass_rate_png, mui_png, token_png = (plot(fn, args) for fn, args in plot_calls(aggregate))
    body = "".join([
        title(summary),
        banners(summary),
        headline_section(summary),
        delivery_section(summary),
        damage_section(summary),
        pass_rate_section(summary, pass_rate_png),
        mui_section(summary, mui_png),
        paired_section(summary, token_png),
        ablation_section(summary),
        suites_section(suites, link, exists),
        audit_section(aggregate.audit),
        excluded_section(aggregate.excluded, aggregate.admissions_recorded),
        provenance_section(provenance, aggregate.records, link, exists),
        attempts_section(aggregate, link, exists),
        f'<p class="note">Generated {escape(generated_at)} from the run\'s stored artifacts by memtrial report.</p>',
    ])
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>memtrial report {escape(summary.run_id)}</title>'
            f"<style>{CSS}</style></head><body>{body}</body></html>\n")
