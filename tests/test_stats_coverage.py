"""Intervals that keep their promise (issue #31): coverage in sparse runs, a symmetric net MUI, no silent drops.

The coverage test is a small, seeded version of `benchmarks/sim_coverage.py` (docs/STATISTICS.md):
simulated corpora with known truth, the success difference computed by `headline.task_effect`, the
function the headline uses. The other tests go through `grade_attempts` and `summarize`, the
grading a stored run gets.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from scipy import stats as sps

from tasks_lib.analysis.grading import grade_attempts, summarize
from tasks_lib.analysis.headline import DIFFERENCE, Comparison, task_effect
from tasks_lib.analysis.stats import StatsError, adjusted_mean_interval, sign_flip_test
from tasks_lib.contracts import RunRecord

UNIT = "difference in pass rate (fraction of attempts)"


def _sparse_coverage(trials: int, effect: str, replicates: int, seed: int) -> float:
    """Coverage of the headline's success-difference interval at 10 tasks, baselines near 0 or 1."""
    rng = np.random.default_rng(seed)
    off = np.where(rng.random((replicates, 10)) < 0.5, rng.uniform(0, 0.1, (replicates, 10)), rng.uniform(0.9, 1, (replicates, 10)))
    shift = np.where(rng.random(off.shape) < 0.6, 0.3, -0.3) if effect == "mixed" else np.full(off.shape, float(effect))
    on = np.clip(off + shift, 0, 1)
    counts = rng.binomial(trials, on) - rng.binomial(trials, off)
    truth = (on - off).mean(axis=1)
    hits = 0
    for row, target in zip(counts, truth, strict=True):
        effect_ = task_effect([Fraction(int(c), trials) for c in row], UNIT, DIFFERENCE)
        assert effect_.low is not None and effect_.high is not None
        hits += effect_.low - 1e-12 <= target <= effect_.high + 1e-12
    return hits / replicates


@pytest.mark.parametrize(("trials", "effect"), [(1, "+0.1"), (1, "mixed"), (3, "+0.1")],
                         ids=["10x1-effect-0.1", "10x1-help-and-hurt", "10x3-effect-0.1"])
def test_success_interval_covers_in_sparse_ten_task_runs(trials: int, effect: str) -> None:
    """Prevents the interval that inverted the sign-flip test from under-covering where few tasks differ
    (0.78 at 10 tasks x 1 trial, baselines near 0 or 1, effect +0.1): coverage must stay at least 0.93."""
    coverage = _sparse_coverage(trials, effect, replicates=300, seed=3100 + trials)
    assert coverage >= 0.93, f"coverage {coverage:.3f} of the 95% success-difference interval"


def test_one_task_differing_leaves_positive_effects_inside_and_is_exploratory() -> None:
    """Prevents a task whose observed difference is 0 being read as an exact zero: one task at -1 and
    nine at 0 gave [-0.333, 0], excluding every positive effect, with nothing marking it as thin."""
    effect = task_effect([Fraction(-1)] + [Fraction(0)] * 9, UNIT, DIFFERENCE)
    assert effect.low is not None and effect.high is not None
    assert effect.low < -0.1 and effect.high > 0.1
    assert effect.exploratory and effect.method.startswith("exploratory: 1 task(s)")
    assert effect.p_value == sign_flip_test([-1] + [0] * 9).pvalue == 1.0, "the exact sign-flip p-value is unchanged"
    none_differ = task_effect([Fraction(0)] * 10, UNIT, DIFFERENCE)
    assert none_differ.low is not None and none_differ.high is not None
    assert none_differ.low < 0 < none_differ.high, "no task differing is not certainty of no effect"


@pytest.mark.parametrize("seed", range(5))
def test_adjusted_interval_equals_the_formula_worked_independently(seed: int) -> None:
    """Prevents the interval drifting from its documented construction: Agresti-Min pseudo-tasks (half at
    each end of [-1, 1], one at 0) and a Student t interval on n - 1 df, recomputed here with numpy."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    values = rng.integers(-3, 4, n) / 3
    got = adjusted_mean_interval(values.tolist(), -1, 1)
    data = np.concatenate([values, [-1.0, 1.0, 0.0]])
    weights = np.concatenate([np.ones(n), [0.5, 0.5, 1.0]])
    centre = np.average(data, weights=weights)
    variance = np.sum(weights * (data - centre) ** 2) / (weights.sum() - 1)
    half = sps.t.ppf(0.975, n - 1) * math.sqrt(variance / weights.sum())
    assert got.center == pytest.approx(centre)
    assert got.lower == pytest.approx(max(-1.0, min(centre - half, values.mean())))
    assert got.upper == pytest.approx(min(1.0, max(centre + half, values.mean())))


def test_adjusted_interval_refuses_values_outside_the_range() -> None:
    """Prevents a per-task figure outside the measure's range (a bug upstream) yielding a silent interval."""
    with pytest.raises(StatsError, match=r"values: must lie in \[-1, 1\]"):
        adjusted_mean_interval([0.5, 1.5], -1, 1)
    with pytest.raises(StatsError, match="at least one value"):
        adjusted_mean_interval([], -1, 1)


def _record(task: str, condition: str, trial: int, outcome: str, tokens: int, delivered: bool) -> RunRecord:
    extra = {"delivery_receipt": f"runs/r/{task}/{condition}/{trial}/delivery.json", "delivery_nonce": "0" * 32,
             "planted_ids": ("m1",), "delivered_ids": ("m1",)} if delivered else {}
    return RunRecord(
        run_id="r", task_id=task, condition=condition, trial=trial, agent="scripted", calibration=False,
        outcome=outcome, infra_failure=outcome == "ungradable", input_tokens=tokens, output_tokens=0,  # type: ignore[arg-type]
        cost_usd=0.0, wall_seconds=1.0, injection="yes" if delivered else "no",
        transcript=f"runs/r/{task}/{condition}/{trial}/transcript.json", audit_receipt=f"runs/r/{task}/{condition}/{trial}/audit.json",
        build_under_test="scripted/1", check_exit_code={"pass": 0, "fail": 1}.get(outcome),
        audit_passed=None if outcome == "ungradable" else True, **extra,
    )


def _memory_effect(records: list[RunRecord]) -> Comparison:
    summary = summarize("r", records, grade_attempts(records))
    return next(c for c in summary.headline if c.kind == "memory-effect")


def test_net_mui_of_a_memory_ignoring_agent_is_antisymmetric_at_partial_delivery() -> None:
    """Prevents harm being counted on attempts whose delivery was not confirmed while credit is not: a run
    and its mirror (on and off outcomes and tokens swapped, delivery kept) must read opposite net MUI.
    Otherwise an agent that ignores memory reads as harmful at 90% delivery (14.5% rejections at 100 x 5)."""
    plan = [("pass", 900, "fail", 1000, True), ("fail", 1000, "pass", 1000, False), ("pass", 1000, "pass", 1600, False),
            ("fail", 1000, "fail", 1000, True), ("pass", 1000, "pass", 1000, True)]

    def run(mirror: bool) -> list[RunRecord]:
        records = []
        for task in range(6):
            for trial, (on, on_tokens, off, off_tokens, delivered) in enumerate(plan):
                if mirror:
                    on, on_tokens, off, off_tokens = off, off_tokens, on, on_tokens
                records += [_record(f"t{task}", "on", trial, on, on_tokens, delivered), _record(f"t{task}", "off", trial, off, off_tokens, False)]
        return records

    before, after = _memory_effect(run(False)).mui, _memory_effect(run(True)).mui
    assert before is not None and after is not None
    assert after.net == pytest.approx(-before.net) and after.p_value == pytest.approx(before.p_value)
    assert (before.success_lifts, before.harms, after.success_lifts, after.harms) == (6, 0, 0, 6), \
        "undelivered attempts earn neither credit nor harm; each task's delivered lift mirrors into a delivered harm"


def test_a_task_missing_from_one_condition_is_named_and_every_figure_is_over_the_same_tasks() -> None:
    """Prevents a task with no off record (or only ungradable ones) vanishing from the comparison with
    `distrust` empty, and net MUI averaging over more tasks than the success difference (6 vs 5)."""
    records = []
    for task in ("a", "b", "c", "d", "e"):
        records += [_record(task, "on", 0, "pass", 1000, True), _record(task, "off", 0, "fail", 1000, False)]
    records.append(_record("lonely", "on", 0, "pass", 1000, True))  # no off record at all
    records += [_record("broken", "on", 0, "fail", 1000, True), _record("broken", "off", 0, "ungradable", 0, False)]
    summary = summarize("r", records, grade_attempts(records))
    effect = next(c for c in summary.headline if c.kind == "memory-effect")
    assert effect.left_out == ("broken", "lonely")
    assert effect.tasks == effect.success_difference.tasks == 5
    assert effect.mui is not None and effect.mui.tasks == 5 and effect.mui.net == 1.0
    named = [line for line in summary.distrust if "left out" in line]
    assert named == ["2 task(s) left out of on - off (over 5 task(s)) (no gradable attempt under one side): broken, lonely"]


def test_an_arm_that_fails_fast_shows_no_saving_per_solve() -> None:
    """Prevents a fast-failing arm reading as a token saving: per attempt it is cheaper, but per solve (a task's
    tokens over its passes) it costs more, and both figures say what they are and over how many tasks."""
    records = []
    for task in ("a", "b", "c", "d", "e", "f"):
        for trial in range(2):  # on: one pass at 1000 and one quick failure at 100; off: two passes at 900
            records += [_record(task, "on", trial, "pass" if trial == 0 else "fail", 1000 if trial == 0 else 100, True),
                        _record(task, "off", trial, "pass", 900, False)]
    effect = _memory_effect(records)
    assert effect.token_difference.estimate == (1000 + 100) / 2 - 900
    assert "gradable attempt" in effect.token_difference.unit and "failed attempts included" in effect.token_difference.unit
    assert effect.tokens_per_solve is not None
    assert effect.tokens_per_solve.estimate == 1100 - 900 and effect.tokens_per_solve.tasks == 6
    assert effect.tokens_per_solve.unit.startswith("tokens per solve")
