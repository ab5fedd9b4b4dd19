"""The headline of a run: task-clustered effects with intervals, one block per compared pair of conditions.

The task is the unit of analysis. Trials of one task share its difficulty (a deterministic agent
repeats itself exactly), so counting them as independent pairs overstates the evidence: 7 of 13
tasks won by memory over 3 trials read p = 1/1,048,576 by trial-level McNemar, for the
information of p = 1/64. So every headline figure is the mean over tasks of a per-task figure
(each task weighs the same, whatever its number of gradable trials), tested by a sign-flip
permutation test over tasks (`tasks_lib.analysis.stats.sign_flip_test`: exact over all 2^n sign
assignments up to 20 tasks, a seeded Monte Carlo above, as its `method` says). A bounded figure
(success difference, MUI, damage) gets the Agresti-Min pseudo-task t interval
(`stats.adjusted_mean_interval`), which covers at 95% where few tasks differ, and is labelled
exploratory below MIN_NONZERO_TASKS differing tasks; tokens and wall time get the interval that
inverts the test (docs/STATISTICS.md). With one trial per task the success test equals exact McNemar.

Compared pairs, a minus b: `on` - `off` (the memory effect, with MUI v2 and its harm),
`on` - `ablate:<lane>` (what the ablated lanes carry, a marginal contribution), every other
condition - `off`, and every arm that is not an ablation - `notes` (does the memory system beat the
incumbent notes file?) when the run has a `notes` arm. Tokens and wall time are compared the same way on per-task means; below
`MIN_ATTEMPTS_FOR_TEST` tasks with a non-zero difference they are exploratory (no test, no interval).
The trial-level McNemar test stays as a labelled reference figure only.

Beside the memory effect stands what the test could have seen: the smallest success difference it
detects with 80% power at the 5% level for this run's tasks and trials, simulated from a
beta-binomial fitted to the run's observed per-task off counts (`tasks_lib.analysis.power`, seeded, `HEADLINE_REPLICATES` corpora,
its Monte Carlo error stated). A null result under a large detectable difference is no evidence
of no effect.

MUI v2 per task is a share of the task's gradable `on` attempts, over the tasks of the success
difference: success lift and cost saving as `tasks_lib.analysis.grading` defines them, minus harm
(the paired `off` attempt passed and `on` failed, or `on` used at least 1.5x the tokens of a passing
`off`), all three only where the planted memory was confirmed delivered. net = lift + saving - harm
is then antisymmetric in on and off, so for an agent that ignores memory each task's net is
symmetric about 0 at any delivery rate and the sign-flip test of net is exact. A task a comparison
leaves out is named in `Comparison.left_out`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import Literal, Protocol

from pydantic import Field

from tasks_lib.analysis.power import (
    DetectableDifference,
    PowerError,
    run_detectable_difference,
)
from tasks_lib.analysis.stats import (
    MIN_ATTEMPTS_FOR_TEST,
    adjusted_mean_interval,
    mcnemar_exact,
    sign_flip_test,
)
from tasks_lib.contracts import Condition, ContractModel

ComparisonKind = Literal["memory-effect", "ablation", "versus-off", "versus-notes"]
"""What a compared pair of conditions measures."""
SHARE = (0, 1)
"""Range of a per-task share (MUI components)."""
DIFFERENCE = (-1, 1)
"""Range of a per-task difference of shares (success difference, net MUI)."""
MIN_NONZERO_TASKS = MIN_ATTEMPTS_FOR_TEST
"""Below this many tasks with a non-zero per-task figure, an effect is exploratory (a bounded one keeps its interval)."""
TOKENS_PER_ATTEMPT = "tokens per gradable attempt (failed attempts included, ungradable ones left out)"
"""Unit and definition of the token difference."""
TOKENS_PER_SOLVE = "tokens per solve: a task's tokens over its gradable attempts / its passes, over tasks passed under both"
"""Unit and definition of the tokens-per-solved-task difference."""
HEADLINE_REPLICATES = 1000
"""Simulated corpora behind the detectable difference printed beside the headline."""


class Graded(Protocol):
    """What the headline reads of a graded attempt; `tasks_lib.analysis.grading.AttemptGrade` has it
    (a protocol, so this module does not import grading, which imports it)."""

    @property
    def task_id(self) -> str: ...
    @property
    def condition(self) -> str: ...
    @property
    def trial(self) -> int: ...
    @property
    def outcome(self) -> str: ...
    @property
    def tokens(self) -> int: ...
    @property
    def wall_seconds(self) -> float: ...
    @property
    def mui_credit(self) -> str: ...
    @property
    def harm(self) -> bool: ...


# --------------------------------------------------------------------------- contracts


class Effect(ContractModel):
    """The mean over tasks of a per-task figure, its sign-flip test and the 95% interval that inverts it."""

    estimate: float | None
    """Mean over tasks; None when no task has a gradable attempt on both sides."""
    low: float | None
    """Lower 95% bound, within the measure's range; None for an exploratory continuous measure, or unbounded with no range."""
    high: float | None
    """Upper 95% bound, like `low`."""
    p_value: float | None
    """Two-sided sign-flip p-value over tasks (H0: mean 0); None for an exploratory continuous measure or without tasks."""
    method: str
    """The test and the interval in words, with the sign assignments counted (exact or Monte Carlo)."""
    unit: str
    """What one unit of `estimate` is."""
    tasks: int = Field(ge=0)
    """Tasks averaged (the units of the test)."""
    nonzero_tasks: int = Field(ge=0)
    """Tasks whose figure is not zero."""
    exploratory: bool
    """Fewer than five tasks with a non-zero figure: a continuous measure is described, not tested; a bounded one
    (success difference, MUI, damage) keeps its interval and test but is too thin to publish as a finding."""
    exact: bool
    """All sign assignments were counted (False: a seeded Monte Carlo sample, see `method`)."""
    assignments: int = Field(ge=0)
    """Sign assignments counted; 0 when nothing was tested."""


class MuiEffect(ContractModel):
    """MUI v2 with harm over tasks: the mean over tasks of each per-task share of gradable `on` attempts."""

    success_lift: float
    """Mean share of on attempts that passed where the paired off attempt failed (memory delivered)."""
    cost_saving: float
    """Mean share of on attempts that passed with at most 1/1.5 the tokens of a passing off."""
    harm: float
    """Mean share of on attempts that failed where off passed, or used >= 1.5x a passing off's tokens."""
    net: float
    """success_lift + cost_saving - harm."""
    low: float
    """Lower 95% bound of `net`, in [-1, 1]."""
    high: float
    """Upper 95% bound of `net`, in [-1, 1]."""
    p_value: float
    """Two-sided sign-flip p-value of `net` over tasks (H0: net 0)."""
    method: str
    """The test and the interval in words."""
    success_lift_low: float
    """Lower 95% bound of `success_lift`, in [0, 1]."""
    success_lift_high: float
    """Upper 95% bound of `success_lift`."""
    cost_saving_low: float
    """Lower 95% bound of `cost_saving`, in [0, 1]."""
    cost_saving_high: float
    """Upper 95% bound of `cost_saving`."""
    harm_low: float
    """Lower 95% bound of `harm`, in [0, 1]."""
    harm_high: float
    """Upper 95% bound of `harm`."""
    tasks: int = Field(ge=0)
    """Tasks with a gradable on attempt."""
    on_attempts: int = Field(ge=0)
    """Gradable on attempts over those tasks."""
    success_lifts: int = Field(ge=0)
    """On attempts credited as a success lift."""
    cost_savings: int = Field(ge=0)
    """On attempts credited as a cost saving."""
    harms: int = Field(ge=0)
    """On attempts counted as harm."""


class TrialMcNemar(ContractModel):
    """Reference only: exact McNemar over (task, trial) pairs, which treats trials as independent."""

    pairs: int = Field(ge=0)
    """Gradable a/b pairs of the same task and trial."""
    a_only: int = Field(ge=0)
    """Pairs where only condition a passed."""
    b_only: int = Field(ge=0)
    """Pairs where only condition b passed."""
    p_value: float
    """Two-sided exact p-value; overstates the evidence when a task's trials agree."""


class Comparison(ContractModel):
    """The headline of one compared pair of conditions: a minus b, task by task."""

    kind: ComparisonKind
    """`memory-effect` (on - off), `ablation` (on - ablate:<lane>), `versus-off` (another condition - off),
    `versus-notes` (an arm - notes, the incumbent)."""
    condition_a: Condition
    """Minuend condition."""
    condition_b: Condition
    """Subtrahend condition."""
    tasks: int = Field(ge=0)
    """Tasks with a gradable attempt under both conditions; every count and figure below (MUI too) is over these tasks."""
    left_out: tuple[str, ...] = ()
    """Tasks with an attempt under a or b left out of every figure: no record under one of them, or none gradable."""
    attempts_a: int = Field(ge=0)
    """Attempts under a, ungradable ones included."""
    attempts_b: int = Field(ge=0)
    """Attempts under b, ungradable ones included."""
    gradable_a: int = Field(ge=0)
    """Gradable attempts under a."""
    gradable_b: int = Field(ge=0)
    """Gradable attempts under b."""
    passes_a: int = Field(ge=0)
    """Passing attempts under a."""
    passes_b: int = Field(ge=0)
    """Passing attempts under b."""
    success_difference: Effect
    """Mean over tasks of success-rate(a) - success-rate(b)."""
    token_difference: Effect
    """Mean over tasks of mean tokens(a) - mean tokens(b) per gradable attempt (failed attempts included, ungradable
    ones left out): what an attempt costs, so an arm that fails fast reads cheaper here; see `tokens_per_solve`."""
    tokens_per_solve: Effect | None = None
    """Mean over tasks passed at least once under both of tokens(a)/passes(a) - tokens(b)/passes(b), tokens summed over
    the task's gradable attempts: what a solve costs (failing fast buys nothing here); None in a summary stored before it."""
    wall_difference: Effect
    """Mean over tasks of mean wall seconds(a) - mean wall seconds(b), per attempt."""
    mui: MuiEffect | None
    """MUI v2 with harm (memory-effect only; None elsewhere or without gradable on attempts)."""
    trial_level_mcnemar: TrialMcNemar | None
    """Reference only (trials as independent); None without a/b pairs."""
    power: DetectableDifference | None = None
    """Memory effect only: the smallest success difference this run's tasks and trials detect with 80% power,
    simulated from its observed off rates; None elsewhere or without a gradable off attempt."""


# --------------------------------------------------------------------------- per-task figures


def task_effect(values: Sequence[Fraction], unit: str, bounds: tuple[int, int] | None, *, continuous: bool = False) -> Effect:
    """Test the mean of per-task `values` by sign flips and give its 95% interval.

    A bounded measure (`bounds` its range) gets `adjusted_mean_interval` and is labelled exploratory
    below MIN_NONZERO_TASKS tasks with a non-zero value (the interval and test are still given).
    An unbounded (`continuous`) measure gets the interval that inverts the sign-flip test, and
    below MIN_NONZERO_TASKS non-zero values is exploratory: described, not tested.
    """
    nonzero = sum(1 for v in values if v)
    if not values:
        return Effect(estimate=None, low=None, high=None, p_value=None, unit=unit, tasks=0, nonzero_tasks=0,
                      method="not tested: no task has a gradable attempt on both sides", exploratory=False, exact=True, assignments=0)
    sparse = nonzero < MIN_NONZERO_TASKS
    label = f"exploratory: {nonzero} task(s) with a non-zero difference (fewer than {MIN_NONZERO_TASKS}); "
    if continuous and sparse:
        return Effect(estimate=float(sum(values) / len(values)), low=None, high=None, p_value=None, unit=unit,
                      tasks=len(values), nonzero_tasks=nonzero, exploratory=True, exact=True, assignments=0,
                      method=f"{label}described, not tested")
    result = sign_flip_test(values)
    if bounds is None:
        low, high, method = result.lower_exact, result.upper_exact, result.method
        return Effect(estimate=result.estimate, low=None if low is None else float(low), high=None if high is None else float(high),
                      p_value=result.pvalue, method=method, unit=unit, tasks=result.n, nonzero_tasks=result.nonzero,
                      exploratory=False, exact=result.exact, assignments=result.assignments)
    interval = adjusted_mean_interval(values, bounds[0], bounds[1])
    test = result.method.partition("; ")[0]
    method = f"{label if sparse else ''}p: {test}; 95% interval: {interval.method}"
    return Effect(estimate=result.estimate, low=interval.lower, high=interval.upper, p_value=result.pvalue, method=method, unit=unit,
                  tasks=result.n, nonzero_tasks=result.nonzero, exploratory=sparse, exact=result.exact, assignments=result.assignments)


Cells = dict[tuple[str, str], list[Graded]]


def _gradable_cells(grades: Sequence[Graded]) -> tuple[Cells, Cells]:
    """(every attempt, gradable attempts) by (task, condition)."""
    every: Cells = defaultdict(list)
    gradable: Cells = defaultdict(list)
    for g in grades:
        every[(g.task_id, g.condition)].append(g)
        if g.outcome != "ungradable":
            gradable[(g.task_id, g.condition)].append(g)
    return every, gradable


def _mean(rows: Sequence[Graded], value: Callable[[Graded], Fraction]) -> Fraction:
    return sum((value(g) for g in rows), Fraction(0)) / len(rows)


def _passed(g: Graded) -> Fraction:
    return Fraction(g.outcome == "pass")


def _tokens(g: Graded) -> Fraction:
    return Fraction(g.tokens)


def _per_solve(rows: Sequence[Graded]) -> Fraction:
    """Tokens over `rows` (a task's gradable attempts under one condition) per passing attempt among them."""
    return Fraction(sum(g.tokens for g in rows), sum(g.outcome == "pass" for g in rows))


def _wall(g: Graded) -> Fraction:
    return Fraction(g.wall_seconds)


def _figures(effect: Effect) -> tuple[float, float, float, float]:
    """(estimate, low, high, p) of an effect tested on a bounded range, where none of them is None."""
    if effect.estimate is None or effect.low is None or effect.high is None or effect.p_value is None:
        raise ValueError(f"an effect tested on a bounded range lacks a figure: {effect}")
    return effect.estimate, effect.low, effect.high, effect.p_value


def mui_effect(grades: Sequence[Graded], tasks: Sequence[str] | None = None) -> MuiEffect | None:
    """MUI v2 with harm over the gradable `on` attempts of `tasks` (default: every task with one); None without any.

    The headline passes the tasks of its success difference, so both figures are over the same tasks and on attempts.
    """
    wanted = None if tasks is None else set(tasks)
    by_task: dict[str, list[Graded]] = defaultdict(list)
    for g in grades:
        if g.condition == "on" and g.outcome != "ungradable" and (wanted is None or g.task_id in wanted):
            by_task[g.task_id].append(g)
    if not by_task:
        return None
    rows = [by_task[t] for t in sorted(by_task)]
    lift = [_mean(r, lambda g: Fraction(g.mui_credit == "success-lift")) for r in rows]
    saving = [_mean(r, lambda g: Fraction(g.mui_credit == "cost-saving")) for r in rows]
    harm = [_mean(r, lambda g: Fraction(g.harm)) for r in rows]
    unit = "share of on attempts"
    lift_, lift_low, lift_high, _ = _figures(task_effect(lift, unit, SHARE))
    saving_, saving_low, saving_high, _ = _figures(task_effect(saving, unit, SHARE))
    harm_, harm_low, harm_high, _ = _figures(task_effect(harm, unit, SHARE))
    net_effect = task_effect([a + b - c for a, b, c in zip(lift, saving, harm, strict=True)], unit, DIFFERENCE)
    net, low, high, p = _figures(net_effect)
    flat = [g for r in rows for g in r]
    return MuiEffect(
        success_lift=lift_, cost_saving=saving_, harm=harm_, net=net, low=low, high=high, p_value=p, method=net_effect.method,
        success_lift_low=lift_low, success_lift_high=lift_high, cost_saving_low=saving_low,
        cost_saving_high=saving_high, harm_low=harm_low, harm_high=harm_high,
        tasks=len(rows), on_attempts=len(flat), success_lifts=sum(g.mui_credit == "success-lift" for g in flat),
        cost_savings=sum(g.mui_credit == "cost-saving" for g in flat), harms=sum(g.harm for g in flat),
    )


def trial_mcnemar(grades: Sequence[Graded], a: str, b: str) -> TrialMcNemar | None:
    """The trial-level reference test of a vs b; None without gradable pairs."""
    side_b = {(g.task_id, g.trial): g for g in grades if g.condition == b and g.outcome != "ungradable"}
    pairs = [(g, side_b[(g.task_id, g.trial)]) for g in grades
             if g.condition == a and g.outcome != "ungradable" and (g.task_id, g.trial) in side_b]
    if not pairs:
        return None
    a_only = sum(x.outcome == "pass" and y.outcome != "pass" for x, y in pairs)
    b_only = sum(y.outcome == "pass" and x.outcome != "pass" for x, y in pairs)
    return TrialMcNemar(pairs=len(pairs), a_only=a_only, b_only=b_only, p_value=mcnemar_exact(a_only, b_only).pvalue)


def compare(grades: Sequence[Graded], kind: ComparisonKind, a: str, b: str) -> Comparison:
    """The headline of a minus b over the tasks both conditions graded."""
    every, gradable = _gradable_cells(grades)
    tasks = sorted({t for t, c in gradable if c == a and (t, b) in gradable})

    def per_task(value: Callable[[Graded], Fraction]) -> list[Fraction]:
        return [_mean(gradable[(t, a)], value) - _mean(gradable[(t, b)], value) for t in tasks]

    def count(condition: str, cells: Cells, keep: Callable[[Graded], bool] = lambda g: True) -> int:
        return sum(keep(g) for t in tasks for g in cells[(t, condition)])

    seen = {t for t, c in every if c in (a, b)}
    solved = [t for t in tasks if any(g.outcome == "pass" for g in gradable[(t, a)]) and any(g.outcome == "pass" for g in gradable[(t, b)])]

    return Comparison(
        kind=kind, condition_a=a, condition_b=b, tasks=len(tasks),
        attempts_a=count(a, every), attempts_b=count(b, every), gradable_a=count(a, gradable), gradable_b=count(b, gradable),
        passes_a=count(a, gradable, lambda g: g.outcome == "pass"), passes_b=count(b, gradable, lambda g: g.outcome == "pass"),
        left_out=tuple(sorted(seen - set(tasks))),
        success_difference=task_effect(per_task(_passed), "difference in pass rate (fraction of attempts)", DIFFERENCE),
        token_difference=task_effect(per_task(_tokens), TOKENS_PER_ATTEMPT, None, continuous=True),
        tokens_per_solve=task_effect([_per_solve(gradable[(t, a)]) - _per_solve(gradable[(t, b)]) for t in solved],
                                     TOKENS_PER_SOLVE, None, continuous=True),
        wall_difference=task_effect(per_task(_wall), "seconds per attempt", None, continuous=True),
        mui=mui_effect(grades, tasks) if kind == "memory-effect" else None,
        trial_level_mcnemar=trial_mcnemar(grades, a, b),
        power=headline_power(grades, tasks) if kind == "memory-effect" else None,
    )


def headline_power(grades: Sequence[Graded], tasks: Sequence[str]) -> DetectableDifference | None:
    """The detectable difference for the compared tasks, from their gradable off attempts; None without any."""
    wanted = set(tasks)
    try:
        return run_detectable_difference([g for g in grades if g.task_id in wanted], run_label="this run", replicates=HEADLINE_REPLICATES)
    except PowerError:
        return None


def compared_pairs(conditions: Sequence[str]) -> list[tuple[ComparisonKind, str, str]]:
    """on - off, on - each ablate:<...>, each other condition - off, then each arm that is not an
    ablation - notes; in the order of `conditions`."""
    pairs: list[tuple[ComparisonKind, str, str]] = []
    if "on" in conditions and "off" in conditions:
        pairs.append(("memory-effect", "on", "off"))
    if "on" in conditions:
        pairs.extend(("ablation", "on", c) for c in conditions if c.startswith("ablate:"))
    if "off" in conditions:
        pairs.extend(("versus-off", c, "off") for c in conditions if c not in ("on", "off"))
    if "notes" in conditions:
        pairs.extend(("versus-notes", c, "notes") for c in conditions if c not in ("off", "notes") and not c.startswith("ablate:"))
    return pairs


def headline(grades: Sequence[Graded], conditions: Sequence[str]) -> list[Comparison]:
    """One Comparison per compared pair of the run's conditions (canonical order)."""
    return [compare(grades, kind, a, b) for kind, a, b in compared_pairs(conditions)]
