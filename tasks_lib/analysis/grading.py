"""Grading a paired run: three layers per attempt, the ablation deltas and the paired statistics.

Layer one, **delivered**: the record's `injection == "yes"` (confirmed from non-agent transcript
steps). Layer two/three, **MUI v2**: a memory-on attempt earns credit only if its planted memory
was confirmed delivered, it passed, and the memory-off attempt of the same task and trial either
failed (a *success lift*) or passed using at least 1.5x its tokens (a *cost saving*). The two
credits are mutually exclusive, so they sum to MUI. *Harm* counts the other direction over the same
delivered attempts: the paired off attempt passed and the on attempt failed, or both passed and on
used at least 1.5x off's tokens; net MUI = success lift + cost saving - harm. (Counting harm on every
attempt but credit only on delivered ones made a memory-ignoring agent read as harmful at 90% delivery.) The v1
*surface echo* (the memory's opening text in the agent's own words) is kept as a reference figure only.

Per-lane ablation deltas, success(on) - success(ablate:<lane>), are marginal contributions: lanes
overlap, so they are never summed. success(ablate:all) - success(off) is a harness check (far from
zero means the ablation switch misses an injection path), never a memory effect.

Every ratio is an exact `Fraction`, so a summary can be re-derived from the attempts it records.
The pooled figures here count attempts; the summary's `headline` (`tasks_lib.analysis.headline`)
is the task-clustered inference a team can publish: per compared pair of conditions, the mean
over tasks with a sign-flip test and its 95% interval (docs/STATISTICS.md), and MUI v2 with harm.
The trial-level McNemar test (`mcnemar`) treats trials as independent and is kept as a reference.
Ungradable attempts (missing evidence, infrastructure failure) are counted and shown but are in no
denominator: they are not outcomes.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StringConstraints

from tasks_lib.agents.base import Transcript
from tasks_lib.analysis.damage import Damage, damage_table
from tasks_lib.analysis.headline import Comparison, headline
from tasks_lib.analysis.stats import (
    clopper_pearson,
    mcnemar_exact,
    paired_continuous_summary,
    pass_at_k,
    pass_hat_k,
    wilson,
)
from tasks_lib.conditions import UnknownCondition, spec_of
from tasks_lib.contracts import (
    ATTEMPT_ERROR,
    Condition,
    ContractModel,
    Document,
    Identifier,
    RunRecord,
)

COST_SAVING_FACTOR = Fraction(3, 2)
"""The off attempt must use at least this many times the on attempt's tokens for a cost saving
(and on at least this many times a passing off's tokens for a harm)."""
LOW_DELIVERY_RATE = Fraction(9, 10)
"""Below this confirmed-delivery rate under `on`, the run is flagged: a human must see it."""
DELIVERY_ARMS = ("on", "notes", "placebo")
"""Arms whose point is that their memory reaches the agent: a low delivery rate there is a reason to distrust the run."""
HARNESS_GAP_LIMIT = Fraction(1, 5)
"""|success(ablate:all) - success(off)| above this is flagged as a harness problem."""
MISSING_EVIDENCE = "missing evidence: "
"""How a failure reason starts when the stored evidence did not back the recorded outcome (named per attempt)."""
NAMED_ATTEMPTS = 5
"""A grouped warning names its attempts up to this many; beyond, it names its tasks (as many again)."""
ECHO_CHARS = 40
"""Characters of a memory's opening text the v1 surface echo looks for."""
OWN_REASON_PREFIXES = (MISSING_EVIDENCE, ATTEMPT_ERROR)
"""Ungradable reasons that differ per attempt: grouped under the prefix, then each named with its own reason."""

Ratio = Annotated[str, StringConstraints(pattern=r"^-?\d+(?:/\d+)?$")]
"""An exact rational as text, `str(Fraction)`: `0`, `1`, `2/3`, `-1/4`."""
MuiCredit = Literal["success-lift", "cost-saving", "none"]


def ratio(value: Fraction) -> str:
    """An exact rational as text (`Fraction('2/3')` -> `'2/3'`)."""
    return str(value)


def fraction_of(k: int, n: int) -> Fraction:
    """k/n as a Fraction; 0 when n is 0 (callers show n, so an empty cell is visible)."""
    return Fraction(k, n) if n else Fraction(0)


# --------------------------------------------------------------------------- contracts


class AttemptGrade(ContractModel):
    """The grading layers of one attempt (one row of `grades.parquet`)."""

    task_id: Identifier
    """The task."""
    condition: Condition
    """The memory condition."""
    trial: int = Field(ge=0)
    """Trial index; an `on` attempt is paired with the `off` attempt of the same index."""
    calibration: bool
    """True when the calibration agent ran it (proves the apparatus; never a published cohort)."""
    outcome: Literal["pass", "fail", "ungradable"]
    """The verifier result as recorded."""
    delivered: Literal["yes", "no", "unknown"]
    """Layer one: the planted memory was confirmed delivered."""
    tokens: int = Field(ge=0)
    """Input plus output tokens."""
    wall_seconds: float = Field(ge=0)
    """Wall time of the agent's turn."""
    paired_off_outcome: Literal["pass", "fail", "ungradable", "missing"] | None
    """Outcome of the paired off attempt (`on` attempts only)."""
    paired_off_tokens: int | None = Field(default=None, ge=0)
    """Tokens of the paired off attempt (`on` attempts only, when it exists)."""
    mui_credit: MuiCredit
    """MUI v2 credit; `none` for every condition but `on`."""
    mui_reason: str
    """Why the attempt earned that credit (or none)."""
    harm: bool
    """MUI v2 harm (`on` only, planted memory confirmed delivered): off passed and this attempt failed, or used >= 1.5x
    a passing off's tokens."""
    harm_reason: str | None
    """Why the attempt counts as harm; None when it does not."""
    surface_echo: bool | None
    """v1 reference: the agent's own steps quote a planted memory's opening text; None when unknown."""


class DeliveryRate(ContractModel):
    """Confirmed-delivery rate of one condition."""

    condition: Condition
    """The memory condition."""
    attempts: int = Field(ge=0)
    """Attempts under the condition."""
    confirmed: int = Field(ge=0)
    """Attempts whose delivery witness served a planted memory (`injection == "yes"`)."""
    unknown: int = Field(ge=0)
    """Attempts whose delivery could not be read (no transcript)."""
    served_other: int = Field(default=0, ge=0)
    """Attempts whose memory system served memories, none of them planted for the task."""
    unwitnessed: int = Field(default=0, ge=0)
    """Attempts whose transcript shows a delivery the runner's witness never served (forged or leaked)."""
    rate: Ratio
    """confirmed / attempts, exact."""
    warning: str | None
    """Set when the rate is a reason to distrust the run: low under `on`, non-zero where memory is off."""


class PassRate(ContractModel):
    """Pass rate of one task (or `*` for all tasks) under one condition, with intervals."""

    task_id: str
    """The task, or `*` for every task pooled."""
    condition: Condition
    """The memory condition."""
    passes: int = Field(ge=0)
    """Passing attempts."""
    gradable: int = Field(ge=0)
    """Attempts that passed or failed (the denominator)."""
    ungradable: int = Field(ge=0)
    """Attempts with no outcome (not in the denominator)."""
    rate: Ratio
    """passes / gradable, exact."""
    wilson_low: float
    """Wilson 95% interval, lower bound."""
    wilson_high: float
    """Wilson 95% interval, upper bound."""
    cp_low: float
    """Clopper-Pearson 95% interval, lower bound."""
    cp_high: float
    """Clopper-Pearson 95% interval, upper bound."""


class MuiTally(ContractModel):
    """MUI v2 over a set of gradable `on` attempts; success lift + cost saving = MUI."""

    task_id: str
    """The task, or `*` for every task pooled."""
    on_attempts: int = Field(ge=0)
    """Gradable `on` attempts (the denominator)."""
    success_lift: int = Field(ge=0)
    """Attempts credited as a success lift."""
    cost_saving: int = Field(ge=0)
    """Attempts credited as a cost saving."""
    mui: Ratio
    """(success_lift + cost_saving) / on_attempts, exact."""
    success_lift_share: Ratio
    """success_lift / on_attempts, exact."""
    cost_saving_share: Ratio
    """cost_saving / on_attempts, exact."""
    harm: int | None = Field(default=None, ge=0)
    """Attempts counted as harm (off passed and on failed, or on used >= 1.5x a passing off's tokens);
    None only in a summary stored before harm was counted."""
    harm_share: Ratio | None = None
    """harm / on_attempts, exact (None like `harm`)."""
    net: Ratio | None = None
    """(success_lift + cost_saving - harm) / on_attempts, exact: MUI net of harm (None like `harm`)."""
    surface_echo: int = Field(ge=0)
    """v1 reference: `on` attempts whose agent quoted a planted memory's opening text."""
    surface_echo_known: int = Field(ge=0)
    """`on` attempts for which the echo could be read."""


class ConditionDelta(ContractModel):
    """success(a) - success(b) for one scope: an ablation's marginal contribution or the harness check."""

    kind: Literal["marginal", "harness-check"]
    """`marginal` (on minus ablate:<lane>; never summed) or `harness-check` (ablate:all minus off)."""
    task_id: str
    """The task, or `*` for every task pooled."""
    lane: str
    """The ablated lane (`all` for the harness check)."""
    condition_a: Condition
    """Minuend condition."""
    condition_b: Condition
    """Subtrahend condition."""
    passes_a: int = Field(ge=0)
    """Passes under condition a."""
    gradable_a: int = Field(ge=0)
    """Gradable attempts under condition a."""
    passes_b: int = Field(ge=0)
    """Passes under condition b."""
    gradable_b: int = Field(ge=0)
    """Gradable attempts under condition b."""
    delta: Ratio
    """success(a) - success(b), exact."""
    flagged: bool
    """Harness check only: the gap exceeds HARNESS_GAP_LIMIT, or a side has no gradable attempt."""

    @property
    def measured(self) -> bool:
        """True when both sides have a gradable attempt (otherwise `delta` reads 0 of nothing: not measured)."""
        return self.gradable_a > 0 and self.gradable_b > 0


class PairedMeasure(ContractModel):
    """A continuous measure compared on/off over paired attempts (on minus off)."""

    measure: Literal["tokens", "wall_seconds"]
    """What was compared."""
    pairs: int = Field(ge=0)
    """Paired differences."""
    median_difference: float | None
    """Median of on - off."""
    exploratory: bool
    """True below five pairs: described, not tested."""
    sign_pvalue: float | None
    """Exact sign test, two-sided; None when exploratory."""
    wilcoxon_pvalue: float | None
    """Exact Wilcoxon signed-rank test, two-sided; None when exploratory."""


class McNemarSummary(ContractModel):
    """Exact McNemar test on the on/off discordant pairs."""

    pairs: int = Field(ge=0)
    """Gradable on/off pairs (same task, same trial)."""
    on_only: int = Field(ge=0)
    """Pairs where only `on` passed."""
    off_only: int = Field(ge=0)
    """Pairs where only `off` passed."""
    pvalue: Ratio
    """Two-sided p-value, exact."""


class PassAtK(ContractModel):
    """Unbiased pass@k and pass^k of one condition: the mean over its tasks of each task's estimate."""

    condition: Condition
    """The memory condition."""
    k: int = Field(ge=1)
    """Attempts drawn; from 1 to the fewest gradable attempts of any of the condition's tasks."""
    tasks: int = Field(ge=1)
    """Tasks averaged (those with at least one gradable attempt)."""
    pass_at_k: Ratio
    """Chance that at least one of k attempts of a task passes, exact."""
    pass_hat_k: Ratio
    """Chance that all k attempts of a task pass (reliability), exact."""


class GradingSummary(Document):
    """Everything graded about one run (`summary.json`)."""

    KIND: ClassVar[str] = "grading summary"

    run_id: Identifier
    """The run."""
    calibration: bool
    """True when every attempt was run by the calibration agent: an apparatus proof, not a cohort."""
    agents: tuple[str, ...]
    """Agents that ran the attempts."""
    attempts: int = Field(ge=0)
    """Attempts graded (after excluded ones were removed)."""
    excluded: int = Field(ge=0)
    """Attempts excluded by an admission decision (kept, not graded)."""
    ungradable: int = Field(ge=0)
    """Graded attempts with no outcome."""
    tasks: tuple[str, ...]
    """Tasks, sorted."""
    conditions: tuple[str, ...]
    """Conditions present, in canonical order (off, on, ablate:all, ablate:<lane>...)."""
    delivery: tuple[DeliveryRate, ...]
    """Layer one per condition."""
    pass_rates: tuple[PassRate, ...]
    """Per task and condition, then pooled per condition (`*`)."""
    mui: tuple[MuiTally, ...]
    """MUI v2 per task, then pooled (`*`)."""
    ablations: tuple[ConditionDelta, ...]
    """Marginal lane deltas and the harness check, per task and pooled."""
    mcnemar: McNemarSummary | None
    """On/off pass/fail test over (task, trial) pairs; None without them. Reference only: it treats
    trials as independent; `headline` carries the task-clustered test."""
    paired: tuple[PairedMeasure, ...]
    """Tokens and wall time, on minus off, over (task, trial) pairs (reference; see `headline`)."""
    warnings: tuple[str, ...]
    """Everything a human must see before trusting the numbers."""
    distrust: tuple[str, ...] = ()
    """The warnings that make the run's figures untrustworthy (a delivery problem, a failed positive
    control or harness check, a harness check not measured, ungradable attempts once per cause, missing
    evidence, a failed suite gate): `memtrial run` and `memtrial
    paired` exit 1 when any is present. Notes such as "calibration run" are warnings only."""
    headline: tuple[Comparison, ...] = ()
    """Task-clustered effects per compared pair (on - off first): what a team can publish."""
    positive_control: PositiveControl | None = None
    """The calibration agent's memoryless attempts against their outcome by construction (None when
    the run has no calibration attempt under `off` or `ablate:all`)."""
    pass_at_k: tuple[PassAtK, ...] = ()
    """pass@k and pass^k per condition, k from 1 to the fewest gradable attempts of any of its tasks (ungradable
    attempts lower it below the trials)."""
    damage: tuple[Damage, ...] = ()
    """Per condition but `off`: tasks the `off` arm passed that the condition failed, task-clustered."""


# --------------------------------------------------------------------------- per attempt


def tokens_of(record: RunRecord) -> int:
    """Input plus output tokens of an attempt."""
    return record.input_tokens + record.output_tokens


def undelivered_reason(record: RunRecord) -> str:
    """Why `record` counts as not delivered, in the words the report uses."""
    others = len(set(record.served_ids) - set(record.delivered_ids))
    if record.injection == "no" and others:
        return f"delivered: none of the planted ones (the memory system served {others} other memor{'y' if others == 1 else 'ies'})"
    return f"planted memory not confirmed delivered (injection {record.injection})"


def mui_credit(on: RunRecord, off: RunRecord | None) -> tuple[MuiCredit, str]:
    """MUI v2 credit of one `on` attempt against its paired `off` attempt, with the reason."""
    if on.injection != "yes":
        return "none", undelivered_reason(on)
    if on.outcome != "pass":
        return "none", f"the on attempt did not pass ({on.outcome})"
    if off is None:
        return "none", "no paired off attempt (same task and trial)"
    if off.outcome == "ungradable":
        return "none", "the paired off attempt is ungradable"
    if off.outcome == "fail":
        return "success-lift", "passed where the paired off attempt failed"
    if tokens_of(on) == 0:
        return "none", "both passed; the on attempt reports no tokens, so no cost saving can be shown"
    if tokens_of(off) >= COST_SAVING_FACTOR * tokens_of(on):
        return "cost-saving", f"both passed; off used {tokens_of(off)} tokens >= 1.5 x {tokens_of(on)}"
    return "none", f"both passed; off used {tokens_of(off)} tokens < 1.5 x {tokens_of(on)}"


def mui_harm(on: RunRecord, off: RunRecord | None) -> str | None:
    """Why one gradable `on` attempt counts as MUI v2 harm against its paired `off` attempt; None when it does not.

    Like a credit, harm needs the planted memory confirmed delivered: lift, saving and harm are counted over the same
    attempts, so for an agent that ignores memory net MUI is symmetric about 0 at any delivery rate."""
    if on.outcome == "ungradable" or on.injection != "yes" or off is None or off.outcome != "pass":
        return None
    if on.outcome == "fail":
        return "failed where the paired off attempt passed"
    if tokens_of(off) and tokens_of(on) >= COST_SAVING_FACTOR * tokens_of(off):
        return f"both passed; on used {tokens_of(on)} tokens >= 1.5 x {tokens_of(off)}"
    return None


def _normal(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def surface_echo(transcript: Transcript | None, memory_texts: Sequence[str] | None) -> bool | None:
    """v1: does an agent-written step contain the opening ECHO_CHARS of a planted memory?

    Only the agent's own steps count (delivered context always contains the text). None when the
    transcript or the memory texts are unknown.
    """
    if transcript is None or not memory_texts:
        return None
    openings = [_normal(t)[:ECHO_CHARS] for t in memory_texts if _normal(t)]
    agent_text = _normal(" ".join(s.text for s in transcript.steps if s.source == "agent"))
    return any(o in agent_text for o in openings)


def grade_attempts(
    records: Sequence[RunRecord],
    transcripts: Mapping[tuple[str, str, int], Transcript | None] | None = None,
    memory_texts: Mapping[str, Sequence[str]] | None = None,
) -> list[AttemptGrade]:
    """Grade every attempt; `on` attempts are paired with `off` by (task, trial).

    `transcripts` maps (task, condition, trial) to the stored transcript (for the echo);
    `memory_texts` maps a task to its planted memories' texts.
    """
    off = {(r.task_id, r.trial): r for r in records if r.condition == "off"}
    grades = []
    for r in records:
        pair = off.get((r.task_id, r.trial)) if r.condition == "on" else None
        credit, reason = mui_credit(r, pair) if r.condition == "on" else ("none", "only on attempts earn MUI credit")
        harm = mui_harm(r, pair) if r.condition == "on" else None
        echo = None
        if r.condition == "on" and transcripts is not None and memory_texts is not None:
            echo = surface_echo(transcripts.get((r.task_id, r.condition, r.trial)), memory_texts.get(r.task_id))
        grades.append(AttemptGrade(
            task_id=r.task_id, condition=r.condition, trial=r.trial, calibration=r.calibration, outcome=r.outcome,
            delivered=r.injection, tokens=tokens_of(r), wall_seconds=r.wall_seconds,
            paired_off_outcome=(pair.outcome if pair else "missing") if r.condition == "on" else None,
            paired_off_tokens=tokens_of(pair) if pair else None,
            mui_credit=credit, mui_reason=reason, harm=harm is not None, harm_reason=harm, surface_echo=echo,
        ))
    return grades


# --------------------------------------------------------------------------- aggregates


def condition_order(conditions: Iterable[str]) -> tuple[str, ...]:
    """off, on, notes, placebo, ablate:all, then ablate:<lane> and harm:<state> alphabetically."""
    rank = {"off": 0, "on": 1, "notes": 2, "placebo": 3, "ablate:all": 4}
    return tuple(sorted(set(conditions), key=lambda c: (rank.get(c, 5), c)))


def delivery_rates(records: Sequence[RunRecord]) -> list[DeliveryRate]:
    """Layer one per condition, with a warning a human must see when the rate is suspicious."""
    out = []
    for condition in condition_order(r.condition for r in records):
        rows = [r for r in records if r.condition == condition]
        confirmed = sum(r.injection == "yes" for r in rows)
        served_other = sum(r.injection == "no" and bool(r.served_ids) for r in rows)
        unwitnessed = sum(bool(r.unwitnessed_ids) for r in rows)
        rate = fraction_of(confirmed, len(rows))
        problems = []
        if condition in DELIVERY_ARMS and rate < LOW_DELIVERY_RATE:
            problems.append(f"delivery confirmed on only {confirmed} of {len(rows)} {condition} attempts (below {LOW_DELIVERY_RATE}): "
                            "memory may not have reached the agent; distrust this run's memory figures")
        elif condition in ("off", "ablate:all") and confirmed:
            problems.append(f"memory was delivered on {confirmed} {condition} attempt(s), where it is switched off: a leak in the harness")
        if served_other:
            problems.append(f"delivered: none of the planted ones on {served_other} of {len(rows)} {condition} attempts "
                            "(the memory system served other memories than the task's)")
        if unwitnessed:
            problems.append(f"{unwitnessed} {condition} attempt(s) show a delivery in the transcript that the runner's witness "
                            "never served: a forged hook report or a path around the witness; counted as not delivered")
        if flooded := sum(r.witness_flooded for r in rows):
            problems.append(f"{flooded} {condition} attempt(s) flooded their delivery witness (connections or requests over its "
                            "bounds were refused; see each delivery.json): graded as usual, their agent denied itself memory")
        out.append(DeliveryRate(condition=condition, attempts=len(rows), confirmed=confirmed,
                                unknown=sum(r.injection == "unknown" for r in rows), served_other=served_other,
                                unwitnessed=unwitnessed, rate=ratio(rate), warning="; ".join(problems) or None))
    return out


def _tally(rows: Sequence[RunRecord]) -> tuple[int, int, int]:
    passes = sum(r.outcome == "pass" for r in rows)
    gradable = sum(r.outcome != "ungradable" for r in rows)
    return passes, gradable, len(rows) - gradable


def pass_rate(task_id: str, condition: str, rows: Sequence[RunRecord]) -> PassRate:
    """Pass rate of `rows` with Wilson and Clopper-Pearson 95% intervals."""
    passes, gradable, ungradable = _tally(rows)
    if gradable:
        w, cp = wilson(passes, gradable), clopper_pearson(passes, gradable)
        bounds = (w.lower, w.upper, cp.lower, cp.upper)
    else:
        bounds = (0.0, 1.0, 0.0, 1.0)
    return PassRate(task_id=task_id, condition=condition, passes=passes, gradable=gradable, ungradable=ungradable,
                    rate=ratio(fraction_of(passes, gradable)), wilson_low=bounds[0], wilson_high=bounds[1],
                    cp_low=bounds[2], cp_high=bounds[3])


def _by_cell(records: Sequence[RunRecord]) -> dict[tuple[str, str], list[RunRecord]]:
    cells: dict[tuple[str, str], list[RunRecord]] = defaultdict(list)
    for r in records:
        cells[(r.task_id, r.condition)].append(r)
        cells[("*", r.condition)].append(r)
    return cells


def _scopes(records: Sequence[RunRecord]) -> list[str]:
    return [*sorted({r.task_id for r in records}), "*"]


def pass_rates(records: Sequence[RunRecord]) -> list[PassRate]:
    """Per task and condition, then every task pooled per condition (`*`)."""
    cells = _by_cell(records)
    conditions = condition_order(r.condition for r in records)
    return [pass_rate(t, c, cells[(t, c)]) for t in _scopes(records) for c in conditions if cells.get((t, c))]


def mui_tallies(grades: Sequence[AttemptGrade]) -> list[MuiTally]:
    """MUI v2 per task, then pooled (`*`), over gradable `on` attempts."""
    on = [g for g in grades if g.condition == "on" and g.outcome != "ungradable"]
    out = []
    for task in [*sorted({g.task_id for g in on}), "*"]:
        rows = [g for g in on if task in ("*", g.task_id)]
        lift = sum(g.mui_credit == "success-lift" for g in rows)
        saving = sum(g.mui_credit == "cost-saving" for g in rows)
        harm = sum(g.harm for g in rows)
        known = [g for g in rows if g.surface_echo is not None]
        out.append(MuiTally(
            task_id=task, on_attempts=len(rows), success_lift=lift, cost_saving=saving,
            mui=ratio(fraction_of(lift + saving, len(rows))), success_lift_share=ratio(fraction_of(lift, len(rows))),
            cost_saving_share=ratio(fraction_of(saving, len(rows))), harm=harm, harm_share=ratio(fraction_of(harm, len(rows))),
            net=ratio(fraction_of(lift + saving - harm, len(rows))),
            surface_echo=sum(bool(g.surface_echo) for g in known), surface_echo_known=len(known),
        ))
    return out


def _delta(kind: Literal["marginal", "harness-check"], task: str, lane: str, a: str, b: str,
           cells: Mapping[tuple[str, str], list[RunRecord]]) -> ConditionDelta:
    pa_, ga, _ = _tally(cells.get((task, a), []))
    pb, gb, _ = _tally(cells.get((task, b), []))
    delta = fraction_of(pa_, ga) - fraction_of(pb, gb)
    flagged = kind == "harness-check" and (not ga or not gb or abs(delta) > HARNESS_GAP_LIMIT)
    return ConditionDelta(kind=kind, task_id=task, lane=lane, condition_a=a, condition_b=b, passes_a=pa_, gradable_a=ga,
                          passes_b=pb, gradable_b=gb, delta=ratio(delta), flagged=flagged)


def condition_deltas(records: Sequence[RunRecord]) -> list[ConditionDelta]:
    """Marginal on - ablate:<lane> deltas and the ablate:all - off harness check, per task and pooled."""
    cells = _by_cell(records)
    conditions = condition_order(r.condition for r in records)
    lanes = [c.removeprefix("ablate:") for c in conditions if c.startswith("ablate:") and c != "ablate:all"]
    out: list[ConditionDelta] = []
    for task in _scopes(records):
        if "on" in conditions:
            out.extend(_delta("marginal", task, lane, "on", f"ablate:{lane}", cells) for lane in lanes)
        if "ablate:all" in conditions and "off" in conditions:
            out.append(_delta("harness-check", task, "all", "ablate:all", "off", cells))
    return out


def on_off_pairs(records: Sequence[RunRecord]) -> list[tuple[RunRecord, RunRecord]]:
    """(on, off) attempts of the same task and trial, both gradable."""
    off = {(r.task_id, r.trial): r for r in records if r.condition == "off" and r.outcome != "ungradable"}
    return [(r, off[(r.task_id, r.trial)]) for r in records
            if r.condition == "on" and r.outcome != "ungradable" and (r.task_id, r.trial) in off]


def mcnemar_summary(pairs: Sequence[tuple[RunRecord, RunRecord]]) -> McNemarSummary | None:
    """Exact McNemar on the discordant on/off pairs; None without pairs."""
    if not pairs:
        return None
    on_only = sum(on.outcome == "pass" and off.outcome != "pass" for on, off in pairs)
    off_only = sum(off.outcome == "pass" and on.outcome != "pass" for on, off in pairs)
    return McNemarSummary(pairs=len(pairs), on_only=on_only, off_only=off_only,
                          pvalue=ratio(mcnemar_exact(on_only, off_only).pvalue_exact))


def paired_measures(pairs: Sequence[tuple[RunRecord, RunRecord]]) -> list[PairedMeasure]:
    """Tokens and wall time, on minus off; exploratory (no test) below five pairs."""
    out = []
    for measure, diffs in (
        ("tokens", [tokens_of(on) - tokens_of(off) for on, off in pairs]),
        ("wall_seconds", [Fraction(on.wall_seconds) - Fraction(off.wall_seconds) for on, off in pairs]),
    ):
        s = paired_continuous_summary(diffs)
        out.append(PairedMeasure(measure=measure, pairs=s.attempts, median_difference=s.median_difference,  # type: ignore[arg-type]
                                 exploratory=s.exploratory, sign_pvalue=s.sign_pvalue, wilcoxon_pvalue=s.wilcoxon_pvalue))
    return out


def pass_at_k_table(records: Sequence[RunRecord]) -> list[PassAtK]:
    """pass@k and pass^k per condition over its tasks with a gradable attempt, k up to the fewest of them."""
    cells = _by_cell(records)
    out = []
    for condition in condition_order(r.condition for r in records):
        tallies = [_tally(cells[(t, condition)])[:2] for t in sorted({r.task_id for r in records}) if cells.get((t, condition))]
        tallies = [(passes, gradable) for passes, gradable in tallies if gradable]
        for k in range(1, min((n for _, n in tallies), default=0) + 1):
            at = sum((pass_at_k(n, c, k) for c, n in tallies), Fraction(0)) / len(tallies)
            hat = sum((pass_hat_k(n, c, k) for c, n in tallies), Fraction(0)) / len(tallies)
            out.append(PassAtK(condition=condition, k=k, tasks=len(tallies), pass_at_k=ratio(at), pass_hat_k=ratio(hat)))
    return out


class PositiveControl(ContractModel):
    """The positive control for arms without memory: the calibration agent's `off` and `ablate:all`
    outcome of every task is known by construction (pass exactly on kinds exploration solves)."""

    checked: int = Field(ge=0)
    """Calibration attempts under `off` or `ablate:all` with a known task kind and an outcome."""
    deviations: tuple[str, ...]
    """Each attempt whose outcome differs from its construction, named; any one is a distrust warning."""

    @property
    def passed(self) -> bool:
        return self.checked > 0 and not self.deviations


MEMORYLESS = ("off", "ablate:all")
"""Conditions in which no memory may reach the agent."""


def positive_control(records: Sequence[RunRecord]) -> PositiveControl | None:
    """Check every calibration attempt without memory against its outcome by construction; None when
    there is none to check. A memoryless pass on a kind only memory solves means memory leaked in."""
    from tasks_lib.agents.calibration import EXPLORABLE

    checked, deviations = 0, []
    for r in records:
        if not r.calibration or r.condition not in MEMORYLESS or r.task_kind is None or r.outcome == "ungradable":
            continue
        checked += 1
        expected = "pass" if r.task_kind in EXPLORABLE else "fail"
        if r.outcome != expected:
            deviations.append(f"{r.task_id}/{r.condition}/t{r.trial} ({r.task_kind}) {r.outcome}ed, {expected} by construction")
    return PositiveControl(checked=checked, deviations=tuple(deviations)) if checked else None


def _named(rows: Sequence[RunRecord]) -> str:
    """The attempts of `rows` (up to NAMED_ATTEMPTS), else their tasks (as many, then how many more)."""
    if len(rows) <= NAMED_ATTEMPTS:
        return ", ".join(f"{r.task_id}/{r.condition}/t{r.trial}" for r in rows)
    tasks = sorted({r.task_id for r in rows})
    more = f" and {len(tasks) - NAMED_ATTEMPTS} more" if len(tasks) > NAMED_ATTEMPTS else ""
    return f"in {len(tasks)} task(s): {', '.join(tasks[:NAMED_ATTEMPTS])}{more}"


def ungradable_warnings(records: Sequence[RunRecord]) -> list[str]:
    """One warning per cause of the ungradable attempts, with their count and names (most frequent
    first), then each missing-evidence or attempt-error attempt with its own reason: a run whose every
    check could not be sandboxed says so once, not once per task."""
    causes: dict[str, list[RunRecord]] = defaultdict(list)
    for r in records:
        if r.outcome == "ungradable":
            reason = r.failure_reason or "no reason recorded"
            own = next((p for p in OWN_REASON_PREFIXES if reason.startswith(p)), None)
            causes[own.strip().removesuffix(":").removesuffix(" in") if own else reason].append(r)
    lines = [f"{len(rows)} attempt(s) are ungradable (no outcome; in no rate's denominator): {cause} ({_named(rows)})"
             for cause, rows in sorted(causes.items(), key=lambda item: (-len(item[1]), item[0]))]
    return lines + [f"{r.task_id}/{r.condition}/t{r.trial}: {r.failure_reason}" for r in records
                    if r.outcome == "ungradable" and (r.failure_reason or "").startswith(OWN_REASON_PREFIXES)]


def harness_warnings(deltas: Sequence[ConditionDelta]) -> list[str]:
    """The flagged harness checks: each measured gap above the limit, and the checks with no gradable
    attempt on a side as one "not measured" line (every task when the pooled check is not measured)."""
    checks = [d for d in deltas if d.kind == "harness-check"]
    unmeasured = sorted(d.task_id for d in checks if not d.measured and d.task_id != "*")
    lines = []
    if any(d.task_id == "*" and not d.measured for d in checks):
        lines.append(f"harness check not measured: no gradable attempt under ablate:all or off in any of {len(unmeasured)} task(s); "
                     "the ablation switch is unverified")
    elif unmeasured:
        more = f" and {len(unmeasured) - NAMED_ATTEMPTS} more" if len(unmeasured) > NAMED_ATTEMPTS else ""
        lines.append(f"harness check not measured for {len(unmeasured)} task(s) with no gradable attempt under ablate:all or off: "
                     f"{', '.join(unmeasured[:NAMED_ATTEMPTS])}{more}")
    for d in checks:
        if d.flagged and d.measured and d.task_id == "*":
            lines.append(f"harness check: success(ablate:all) - success(off) = {d.delta} (limit {HARNESS_GAP_LIMIT}); "
                         "the ablation switch may not reach every injection path")
        elif d.flagged and d.measured:
            lines.append(f"harness check, task {d.task_id}: success(ablate:all) - success(off) = {d.delta} "
                         f"({d.passes_a}/{d.gradable_a} vs {d.passes_b}/{d.gradable_b} passed; limit {HARNESS_GAP_LIMIT})")
    return lines


def by_design(condition: str) -> bool:
    """Whether `condition` has a cell only on tasks that carry its planted state (placebo, harm, feed):
    the matrix skips it elsewhere and says so (`tasks_lib.arm.steps.skipped_cells`)."""
    try:
        return spec_of(condition).planted in ("placebo", "harm", "feed")
    except UnknownCondition:
        return False


def left_out_warnings(comparisons: Sequence[Comparison], records: Sequence[RunRecord]) -> tuple[list[str], list[str]]:
    """(distrust, notes) naming every task a compared pair left out of its figures, one line per set of tasks
    and cause (the pairs listed with the tasks each compares). A task with no gradable attempt under one side is
    distrust, except a cell the matrix never runs by design (no record at all under a placebo, harm or feed
    condition for a task without its planted state): that is a note."""
    cells = {(r.task_id, r.condition) for r in records}
    grouped: dict[tuple[tuple[str, ...], bool], list[str]] = defaultdict(list)
    for c in comparisons:
        skipped = tuple(t for t in c.left_out if any(by_design(x) and (t, x) not in cells for x in (c.condition_a, c.condition_b)))
        missing = tuple(t for t in c.left_out if t not in skipped)
        for tasks, designed in ((missing, False), (skipped, True)):
            if tasks:
                grouped[(tasks, designed)].append(f"{c.condition_a} - {c.condition_b} (over {c.tasks} task(s))")
    distrust: list[str] = []
    notes: list[str] = []
    for (tasks, designed), pairs in grouped.items():
        why = "not run by design: no planted state for the condition" if designed else "no gradable attempt under one side"
        more = f" and {len(tasks) - NAMED_ATTEMPTS} more" if len(tasks) > NAMED_ATTEMPTS else ""
        (notes if designed else distrust).append(
            f"{len(tasks)} task(s) left out of {', '.join(pairs)} ({why}): {', '.join(tasks[:NAMED_ATTEMPTS])}{more}")
    return distrust, notes


def summarize(run_id: str, records: Sequence[RunRecord], grades: Sequence[AttemptGrade], excluded: int = 0,
              run_warnings: Sequence[str] = ()) -> GradingSummary:
    """The run's grading summary; `warnings` collects every figure a human must not miss, and
    `distrust` those that make the figures untrustworthy. `run_warnings` are distrust warnings from
    outside the records (a failed suite gate, a task left out of the matrix), listed first."""
    delivery = delivery_rates(records)
    deltas = condition_deltas(records)
    pairs = on_off_pairs(records)
    calibration = bool(records) and all(r.calibration for r in records)
    distrust = [*run_warnings, *(d.warning for d in delivery if d.warning)]
    control = positive_control(records)
    if control is not None and control.deviations:
        distrust.append(f"positive control failed: {len(control.deviations)} of {control.checked} calibration attempts without memory "
                        f"differ from their construction ({'; '.join(control.deviations)}): memory reached an arm that has none, "
                        "or the apparatus changed; distrust every memory figure of this run")
    ungradable = sum(r.outcome == "ungradable" for r in records)
    distrust.extend(ungradable_warnings(records))
    distrust.extend(harness_warnings(deltas))
    compared = headline(grades, condition_order(r.condition for r in records))
    left_out, skipped = left_out_warnings(compared, records)
    distrust.extend(left_out)
    warnings = [*distrust, *skipped]
    unenforced = sorted({note for r in records for note in r.agent_unenforced})
    if unenforced:
        limited = sum(bool(r.agent_unenforced) for r in records)
        warnings.append(f"{limited} attempt(s) ran with limits the agent's sandbox could not enforce on this machine: "
                        + "; ".join(unenforced))
    mui = mui_tallies(grades)
    if not records:
        warnings.append("the run has no attempts to grade")
    elif mui[-1].on_attempts == 0:
        warnings.append("no gradable on attempts: MUI is not defined for this run (its tallies read 0 of 0)")
    in_process = sorted({r.task_id for r in records if r.judge == "in-process"})
    if in_process:
        warnings.append(f"{len(in_process)} of {len({r.task_id for r in records})} task(s) judged in process ({', '.join(in_process)}): "
                        "their post-turn tests ran beside the code they judge, which could read or forge them")
    if calibration:
        warnings.append("calibration run: the calibration agent proves the apparatus; these are not published-cohort figures")
    return GradingSummary(
        run_id=run_id, calibration=calibration, agents=tuple(sorted({r.agent for r in records})), attempts=len(records),
        excluded=excluded, ungradable=ungradable, tasks=tuple(sorted({r.task_id for r in records})),
        conditions=condition_order(r.condition for r in records), delivery=tuple(delivery),
        pass_rates=tuple(pass_rates(records)), mui=tuple(mui), ablations=tuple(deltas),
        mcnemar=mcnemar_summary(pairs), paired=tuple(paired_measures(pairs)), warnings=tuple(warnings), distrust=tuple(distrust),
        positive_control=control,
        headline=tuple(compared),
        pass_at_k=tuple(pass_at_k_table(records)),
        damage=tuple(damage_table(records, condition_order(r.condition for r in records))),
    )
