"""Tests for tasks_lib.analysis.stats: exact small-sample statistics, checked against SciPy and brute force.

SciPy is a test-only dependency; the module under test uses the standard library alone. Random
inputs come from fixed seeds, so every run checks the same thousands of cases.
"""

from __future__ import annotations

import math
import random
import subprocess
import sys
from collections.abc import Callable
from fractions import Fraction
from itertools import combinations, product
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats as sps

from tasks_lib.analysis.stats import (
    MIN_ATTEMPTS_FOR_TEST,
    SIGN_FLIP_DRAWS,
    SIGN_FLIP_EXACT_MAX,
    Interval,
    StatsError,
    clopper_pearson,
    mcnemar_exact,
    normal_ppf,
    paired_continuous_summary,
    pass_at_k,
    pass_hat_k,
    sign_flip_test,
    sign_test,
    wilcoxon_signed_rank_exact,
    wilson,
)
from tasks_lib.errors import MemtrialError

CONFIDENCES = (0.5, 0.8, 0.9, 0.95, 0.99, 0.999)
DERANDOMIZED = settings(derandomize=True, max_examples=100, deadline=None)


def close(ours: float, ref: float, rel: float = 1e-9, abs_: float = 0.0) -> bool:
    return math.isclose(ours, float(ref), rel_tol=rel, abs_tol=abs_)


def random_confidence(rng: random.Random) -> float:
    return rng.choice(CONFIDENCES) if rng.random() < 0.7 else rng.uniform(0.01, 0.9999)


def random_proportions(seed: int, count: int, max_n: int) -> list[tuple[int, int, float]]:
    """Random (k, n, confidence), a third of them at 0/n or n/n."""
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        n = rng.randint(1, max_n)
        k = rng.choice((0, n, rng.randint(0, n)))
        cases.append((k, n, random_confidence(rng)))
    return cases


# --------------------------------------------------------------------------- normal quantile


def test_normal_ppf_matches_scipy_from_deep_tail_to_centre() -> None:
    rng = random.Random(11)
    ps = [10.0**-e for e in range(1, 301)] + [rng.random() for _ in range(3000)]
    ps += [0.5, 0.02425, 0.25, 0.5 - 1e-12, 0.5 + 1e-12, 1e-10, 1 - 1e-10, 1 - 2**-53]
    ps += [1.0 - p for p in ps if 1e-16 < p < 0.5]
    for p, ref in zip(ps, sps.norm.ppf(np.array(ps)), strict=True):
        assert close(normal_ppf(p), ref, rel=1e-13, abs_=1e-300), p


def test_normal_ppf_is_antisymmetric_and_zero_at_half() -> None:
    assert normal_ppf(0.5) == 0.0
    for p in (2.0**-30, 2.0**-7, 0.125, 0.375, 0.4990234375):  # 1 - p is exact for these
        assert normal_ppf(1.0 - p) == pytest.approx(-normal_ppf(p), rel=1e-15)


# --------------------------------------------------------------------------- intervals


def test_wilson_matches_scipy_on_random_and_boundary_inputs() -> None:
    cases = random_proportions(seed=1, count=800, max_n=500)
    cases += [(k, n, 0.95) for n in range(1, 31) for k in range(n + 1)]
    for k, n, confidence in cases:
        ours = wilson(k, n, confidence)
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="wilson")
        assert close(ours.lower, ref.low, abs_=1e-12), (k, n, confidence)
        assert close(ours.upper, ref.high, abs_=1e-12), (k, n, confidence)


def test_clopper_pearson_matches_scipy_on_random_and_boundary_inputs() -> None:
    """SciPy solves with brentq (xtol 2e-12), so agreement is bounded by its absolute error."""
    cases = random_proportions(seed=2, count=250, max_n=80)
    cases += [(k, n, 0.95) for n in range(1, 13) for k in range(n + 1)]
    for k, n, confidence in cases:
        ours = clopper_pearson(k, n, confidence)
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=confidence, method="exact")
        assert close(ours.lower, ref.low, abs_=1e-11), (k, n, confidence)
        assert close(ours.upper, ref.high, abs_=1e-11), (k, n, confidence)


def test_clopper_pearson_matches_closed_forms_at_the_edges() -> None:
    """k = 0, 1, n - 1 and n have closed-form bounds; these hold to a few ulps, far beyond SciPy."""
    for n in [*range(1, 41), 55, 80, 120, 200]:
        for confidence in CONFIDENCES:
            tail = (1.0 - confidence) / 2.0
            root_tail = math.exp(math.log(tail) / n)  # tail ** (1/n)
            root_body = math.exp(math.log1p(-tail) / n)  # (1 - tail) ** (1/n)
            assert clopper_pearson(0, n, confidence).upper == pytest.approx(1 - root_tail, rel=1e-13)
            assert clopper_pearson(n, n, confidence).lower == pytest.approx(root_tail, rel=1e-13)
            expected_low = -math.expm1(math.log1p(-tail) / n)
            assert clopper_pearson(1, n, confidence).lower == pytest.approx(expected_low, rel=1e-13)
            assert clopper_pearson(n - 1, n, confidence).upper == pytest.approx(root_body, rel=1e-13)


def binomial_cdf_exact(k: int, n: int, p: float) -> Fraction:
    """P(X <= k) for X ~ Binomial(n, p), with the float p taken as an exact fraction."""
    q = Fraction(p)
    return sum((math.comb(n, i) * q**i * (1 - q) ** (n - i) for i in range(k + 1)), Fraction(0))


def test_clopper_pearson_bounds_are_the_conservative_floats_next_to_the_exact_root() -> None:
    """Each bound is the float just outside the exact root; its neighbour inward is inside it."""
    rng = random.Random(3)
    for _ in range(150):
        n = rng.randint(1, 25)
        k = rng.randint(0, n)
        confidence = random_confidence(rng)
        tail = (1 - Fraction(confidence)) / 2
        ci = clopper_pearson(k, n, confidence)
        if k > 0:  # P(X >= k) crosses the tail between lower and the next float up
            inward = math.nextafter(ci.lower, 1.0)
            assert 1 - binomial_cdf_exact(k - 1, n, ci.lower) < tail, (k, n, confidence)
            assert 1 - binomial_cdf_exact(k - 1, n, inward) >= tail, (k, n, confidence)
        if k < n:  # P(X <= k) crosses the tail between the previous float and upper
            inward = math.nextafter(ci.upper, 0.0)
            assert binomial_cdf_exact(k, n, ci.upper) <= tail, (k, n, confidence)
            assert binomial_cdf_exact(k, n, inward) > tail, (k, n, confidence)


@DERANDOMIZED
@given(n=st.integers(1, 60), data=st.data())
def test_intervals_contain_the_estimate_and_widen_with_confidence(n: int, data: Any) -> None:
    k = data.draw(st.integers(0, n))
    low_conf = data.draw(st.floats(0.05, 0.9))
    high_conf = data.draw(st.floats(low_conf + 0.05, 0.999))
    for method in (wilson, clopper_pearson):
        narrow, wide = method(k, n, low_conf), method(k, n, high_conf)
        assert 0.0 <= wide.lower <= narrow.lower <= k / n <= narrow.upper <= wide.upper <= 1.0
        assert narrow.estimate == k / n


@DERANDOMIZED
@given(n=st.integers(1, 60), data=st.data())
def test_clopper_pearson_is_symmetric_in_successes_and_failures(n: int, data: Any) -> None:
    k = data.draw(st.integers(0, n))
    ci, mirror = clopper_pearson(k, n), clopper_pearson(n - k, n)
    assert ci.lower == pytest.approx(1.0 - mirror.upper, abs=1e-15)
    assert ci.upper == pytest.approx(1.0 - mirror.lower, abs=1e-15)


def test_no_wald_collapse_at_zero_or_all_successes() -> None:
    """A Wald interval at 0/5 or 5/5 has zero width and claims certainty from five attempts."""
    for method in (wilson, clopper_pearson):
        none, every = method(0, 5), method(5, 5)
        assert (none.lower, every.upper) == (0.0, 1.0)
        assert none.upper > 0.4 and every.lower < 0.6


# Reference values computed independently to 40 digits (mpmath): Wilson from its closed form with
# z = sqrt(2) * erfinv(0.95); Clopper-Pearson at 0/n and n/n as 1 - 0.025**(1/n) and 0.025**(1/n).
INTERVAL_EDGES = [
    (wilson, 0, 10, 0.0, 0.27753279986288925),
    (wilson, 10, 10, 0.72246720013711075, 1.0),
    (wilson, 0, 1, 0.0, 0.79345068562276261),
    (wilson, 1, 1, 0.20654931437723739, 1.0),
    (clopper_pearson, 0, 10, 0.0, 0.30849710781876076),
    (clopper_pearson, 10, 10, 0.69150289218123924, 1.0),
    (clopper_pearson, 0, 1, 0.0, 0.975),
    (clopper_pearson, 1, 1, 0.025000000000000022, 1.0),
]


@pytest.mark.parametrize(
    ("method", "k", "n", "lower", "upper"),
    INTERVAL_EDGES,
    ids=[f"{m.__name__}-{k}/{n}" for m, k, n, _, _ in INTERVAL_EDGES],
)
def test_interval_edge_cases(method: Callable[..., Interval], k: int, n: int, lower: float, upper: float) -> None:
    ci = method(k, n)
    assert ci.lower == pytest.approx(lower, rel=1e-12, abs=0.0)
    assert ci.upper == pytest.approx(upper, rel=1e-12, abs=0.0)
    assert (ci.k, ci.n, ci.confidence, ci.estimate) == (k, n, 0.95, k / n)
    assert (ci.lower == 0.0) == (k == 0) and (ci.upper == 1.0) == (k == n)


# --------------------------------------------------------------------------- McNemar and sign test


def test_mcnemar_matches_scipy_binomtest() -> None:
    rng = random.Random(4)
    cases = [(b, c) for b in range(15) for c in range(15)]
    cases += [(rng.randint(0, 300), rng.randint(0, 300)) for _ in range(400)]
    for b, c in cases:
        if b + c == 0:
            continue
        ours = mcnemar_exact(b, c)
        assert close(ours.pvalue, sps.binomtest(b, b + c, 0.5).pvalue), (b, c)
        assert ours.n == b + c


def test_sign_test_matches_scipy_binomtest_and_counts_zeros() -> None:
    rng = random.Random(5)
    for _ in range(500):
        diffs = [rng.choice((-1, 0, 1)) * rng.choice((1, 0.5, 3.25, 7)) for _ in range(rng.randint(1, 60))]
        ours = sign_test(diffs)
        positive = sum(d > 0 for d in diffs)
        negative = sum(d < 0 for d in diffs)
        assert (ours.positive, ours.negative, ours.zeros) == (positive, negative, len(diffs) - positive - negative)
        expected = 1.0 if ours.n == 0 else sps.binomtest(positive, ours.n, 0.5).pvalue
        assert close(ours.pvalue, expected), diffs


def brute_force_two_sided(b: int, n: int) -> Fraction:
    """Two-sided p at p = 1/2 by listing all 2**n outcomes: twice the smaller tail, capped at 1."""
    outcomes = [sum(bits) for bits in product((0, 1), repeat=n)]
    low = sum(1 for s in outcomes if s <= b)
    high = sum(1 for s in outcomes if s >= b)
    return min(Fraction(1), Fraction(2 * min(low, high), 2**n))


@pytest.mark.parametrize("n", range(0, 11), ids=lambda n: f"n={n}")
def test_mcnemar_is_an_exact_count_over_all_outcomes(n: int) -> None:
    for b in range(n + 1):
        result = mcnemar_exact(b, n - b)
        assert result.pvalue_exact == brute_force_two_sided(b, n)
        assert result.pvalue == float(result.pvalue_exact)


# --------------------------------------------------------------------------- Wilcoxon signed-rank


def brute_force_wilcoxon(diffs: list[float]) -> tuple[Fraction, Fraction]:
    """(min(W+, W-), two-sided p) over all 2**n sign assignments of the observed average ranks.

    Ranks are doubled so they are integers: twice the average rank of x is 2 * #{|d| < x} +
    #{|d| == x} + 1. Every subset of ranks (the positive ones) is listed through a bitmask.
    """
    nonzero = [d for d in diffs if d != 0]
    mags = [abs(d) for d in nonzero]
    ranks2 = [2 * sum(m < x for m in mags) + sum(m == x for m in mags) + 1 for x in mags]
    w_plus2 = sum(r for r, d in zip(ranks2, nonzero) if d > 0)
    total2 = sum(ranks2)
    sums = [0] * (1 << len(ranks2))
    for mask in range(1, len(sums)):
        low = mask & -mask
        sums[mask] = sums[mask ^ low] + ranks2[low.bit_length() - 1]
    low_tail = sum(1 for s in sums if s <= w_plus2)
    high_tail = sum(1 for s in sums if s >= w_plus2)
    p = min(Fraction(1), Fraction(2 * min(low_tail, high_tail), len(sums)))
    return Fraction(min(w_plus2, total2 - w_plus2), 2), p


def test_wilcoxon_matches_scipy_exact_without_ties() -> None:
    rng = random.Random(6)
    for _ in range(500):
        n = rng.randint(1, 25)
        mags = rng.sample(range(1, 1000), n)
        diffs = [m * rng.choice((-1, 1)) / 8 for m in mags] + [0.0] * rng.choice((0, 0, 1, 3))
        rng.shuffle(diffs)
        ours = wilcoxon_signed_rank_exact(diffs)
        ref = sps.wilcoxon(diffs, zero_method="wilcox", method="exact")
        assert ours.statistic == float(ref.statistic), diffs
        assert close(ours.pvalue, ref.pvalue), diffs
        assert (ours.n, ours.zeros) == (n, len(diffs) - n)


def test_wilcoxon_with_ties_and_zeros_matches_brute_force_enumeration() -> None:
    rng = random.Random(7)
    for _ in range(400):
        diffs = [rng.randint(-4, 4) / 2 for _ in range(rng.randint(1, 12))]
        ours = wilcoxon_signed_rank_exact(diffs)
        statistic, p = brute_force_wilcoxon(diffs)
        assert ours.pvalue_exact == p, diffs
        assert ours.statistic == float(statistic), diffs
        assert ours.w_plus + ours.w_minus == ours.n * (ours.n + 1) / 2


def test_wilcoxon_with_ties_matches_scipy_exhaustive_permutation() -> None:
    """SciPy's exact path assumes no ties; its exhaustive permutation test handles them."""
    rng = random.Random(8)
    exhaustive = sps.PermutationMethod(n_resamples=np.inf)
    for _ in range(8):
        diffs = [rng.choice((-3, -2, -1, 1, 1, 2, 3)) for _ in range(rng.randint(4, 9))]
        ref = sps.wilcoxon(diffs, zero_method="wilcox", method=exhaustive)
        assert close(wilcoxon_signed_rank_exact(diffs).pvalue, ref.pvalue), diffs


# --------------------------------------------------------------------------- continuous summary


@pytest.mark.parametrize("attempts", range(MIN_ATTEMPTS_FOR_TEST), ids=lambda n: f"{n}-attempts")
def test_continuous_summary_is_exploratory_below_five_attempts(attempts: int) -> None:
    """Below five attempts a continuous measure gets no significance test, however large the gap."""
    summary = paired_continuous_summary([1000.0 * (i + 1) for i in range(attempts)])
    assert summary.exploratory is True
    assert summary.sign_pvalue is None and summary.wilcoxon_pvalue is None
    assert summary.attempts == attempts


def test_continuous_summary_tests_from_five_attempts() -> None:
    diffs = [3.0, -1.0, 0.0, 5.5, 2.0, 4.0]
    summary = paired_continuous_summary(diffs)
    assert summary.exploratory is False
    assert summary.sign_pvalue == sign_test(diffs).pvalue
    assert summary.wilcoxon_pvalue == wilcoxon_signed_rank_exact(diffs).pvalue
    assert (summary.attempts, summary.zeros, summary.median_difference) == (6, 1, 2.5)


# --------------------------------------------------------------------------- edge tables


PAIRED_EDGES: list[tuple[str, Callable[[], Any], dict[str, Any]]] = [
    ("mcnemar-no-discordant-pairs", lambda: mcnemar_exact(0, 0), {"n": 0, "pvalue_exact": Fraction(1)}),
    ("mcnemar-balanced", lambda: mcnemar_exact(4, 4), {"pvalue": 1.0}),
    ("mcnemar-one-sided-sweep", lambda: mcnemar_exact(0, 10), {"pvalue_exact": Fraction(2, 1024)}),
    ("sign-all-zero", lambda: sign_test([0, 0.0, 0]), {"n": 0, "zeros": 3, "pvalue": 1.0}),
    ("sign-empty", lambda: sign_test([]), {"n": 0, "zeros": 0, "pvalue": 1.0}),
    ("sign-single", lambda: sign_test([2.5]), {"positive": 1, "n": 1, "pvalue": 1.0}),
    (
        "wilcoxon-all-zero",
        lambda: wilcoxon_signed_rank_exact([0.0] * 5),
        {"n": 0, "zeros": 5, "statistic": 0.0, "pvalue": 1.0},
    ),
    ("wilcoxon-single", lambda: wilcoxon_signed_rank_exact([-3]), {"n": 1, "statistic": 0.0, "pvalue": 1.0}),
    (
        "wilcoxon-all-positive-six",
        lambda: wilcoxon_signed_rank_exact([1, 2, 3, 4, 5, 6]),
        {"statistic": 0.0, "w_plus": 21.0, "pvalue_exact": Fraction(2, 64)},
    ),
    (
        "wilcoxon-all-tied",
        lambda: wilcoxon_signed_rank_exact([2, 2, 2, -2]),
        {"statistic": 2.5, "w_plus": 7.5, "pvalue_exact": Fraction(10, 16)},
    ),
    ("summary-empty", lambda: paired_continuous_summary([]), {"exploratory": True, "median_difference": None}),
    (
        "summary-all-zero",
        lambda: paired_continuous_summary([0] * 6),
        {"exploratory": False, "zeros": 6, "sign_pvalue": 1.0, "wilcoxon_pvalue": 1.0},
    ),
]


@pytest.mark.parametrize(("call", "expected"), [e[1:] for e in PAIRED_EDGES], ids=[e[0] for e in PAIRED_EDGES])
def test_paired_edge_cases(call: Callable[[], Any], expected: dict[str, Any]) -> None:
    result = call()
    assert {field: getattr(result, field) for field in expected} == expected


ERRORS: list[tuple[str, Callable[[], Any], str]] = [
    ("negative-k", lambda: wilson(-1, 5), "k: must be >= 0, got -1"),
    ("k-above-n", lambda: clopper_pearson(6, 5), "k: successes cannot exceed trials, got k=6 > n=5"),
    ("zero-trials", lambda: wilson(0, 0), "n: an interval needs at least one trial"),
    ("negative-n", lambda: clopper_pearson(0, -2), "n: must be >= 0, got -2"),
    ("float-k", lambda: wilson(2.5, 5), "k: must be an integer count, got 2.5"),
    ("bool-n", lambda: wilson(1, True), "n: must be an integer count, got the bool True"),
    ("confidence-one", lambda: wilson(1, 5, 1.0), "confidence: must be strictly between 0 and 1, got 1.0"),
    ("confidence-zero", lambda: clopper_pearson(1, 5, 0), "confidence: must be strictly between 0 and 1, got 0"),
    ("confidence-nan", lambda: wilson(1, 5, math.nan), "confidence: must be strictly between 0 and 1, got nan"),
    ("confidence-percent", lambda: wilson(1, 5, 95), "confidence: must be strictly between 0 and 1, got 95"),
    ("confidence-text", lambda: clopper_pearson(1, 5, "0.95"), "confidence: must be a real number in (0, 1)"),
    ("mcnemar-negative", lambda: mcnemar_exact(-1, 3), "b: must be >= 0, got -1"),
    ("mcnemar-float", lambda: mcnemar_exact(1, 2.0), "c: must be an integer count, got 2.0"),
    ("sign-nan", lambda: sign_test([1.0, math.nan]), "diffs[1]: must be finite, got nan"),
    ("wilcoxon-inf", lambda: wilcoxon_signed_rank_exact([-math.inf]), "diffs[0]: must be finite, got -inf"),
    ("summary-text-item", lambda: paired_continuous_summary([1, "2"]), "diffs[1]: must be a real number, got '2'"),
    ("diffs-string", lambda: sign_test("123"), "diffs: must be a sequence of numbers, got str"),
    ("ppf-zero", lambda: normal_ppf(0.0), "p: must be a probability strictly between 0 and 1, got 0.0"),
    ("sign-flip-empty", lambda: sign_flip_test([]), "diffs: a sign-flip test needs at least one difference, got none"),
    ("sign-flip-nan", lambda: sign_flip_test([1, math.nan]), "diffs[1]: must be finite, got nan"),
    ("sign-flip-no-draws", lambda: sign_flip_test([1, 2, 3], exact_max=2, draws=0), "draws: 3 units exceed exact_max=2"),
    ("pass-at-k-zero-k", lambda: pass_at_k(3, 1, 0), "k: must be between 1 and the attempts n=3, got k=0"),
    ("pass-hat-k-above-n", lambda: pass_hat_k(3, 1, 4), "k: must be between 1 and the attempts n=3, got k=4"),
    ("pass-at-k-c-above-n", lambda: pass_at_k(2, 3, 1), "c: passes cannot exceed attempts, got c=3 > n=2"),
]


@pytest.mark.parametrize(("call", "message"), [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_invalid_input_names_the_argument_and_the_problem(call: Callable[[], Any], message: str) -> None:
    with pytest.raises(StatsError) as caught:
        call()
    assert message in str(caught.value)
    assert isinstance(caught.value, MemtrialError)


# --------------------------------------------------------------------------- sign flips over tasks


def scipy_sign_flip_p(rows: np.ndarray) -> np.ndarray:
    """SciPy's exact paired permutation test of mean(x - y) = 0, one row of differences per test."""
    result = sps.permutation_test((rows, np.zeros_like(rows)), lambda x, y, axis: np.mean(x - y, axis=axis),
                                  permutation_type="samples", vectorized=True, n_resamples=np.inf, axis=-1)
    return np.atleast_1d(result.pvalue)


def random_task_differences(rng: random.Random, n: int) -> list[Fraction]:
    """Per-task differences as a run makes them: of pass rates over 1-3 trials, or of mean tokens."""
    if rng.random() < 0.7:
        trials = rng.randint(1, 3)
        return [Fraction(rng.randint(0, trials) - rng.randint(0, trials), trials) for _ in range(n)]
    return [Fraction(rng.randint(-2000, 2000), rng.choice((1, 2, 3))) for _ in range(n)]


def test_sign_flip_test_and_interval_match_scipy_permutation_test_on_random_draws() -> None:
    """1,350 random draws of 2-10 tasks: our exact p equals SciPy's, and each interval bound is where
    SciPy's test of diffs - m stops rejecting (p > 0.05 at the bound, p <= 0.05 just outside)."""
    rng = random.Random(16)
    assert sign_flip_test([Fraction(-2, 3)]).pvalue == 1.0, "one task can never show an effect"
    for n in range(2, 11):
        draws = [random_task_differences(rng, n) for _ in range(150)]
        results = [sign_flip_test(d) for d in draws]
        rows = np.array([[float(v) for v in d] for d in draws])
        assert np.allclose([r.pvalue for r in results], scipy_sign_flip_p(rows), rtol=1e-12, atol=0)
        assert all(r.exact and r.assignments == 2**n and r.estimate_exact == sum(d) / n for r, d in zip(results, draws, strict=True))
        bounded = [i for i, r in enumerate(results) if r.lower_exact is not None]
        assert (len(bounded) == len(results)) if n >= 6 else not bounded, "at 95% only n >= 6 tasks can reject anything"
        if not bounded:
            assert all(r.lower == -math.inf and r.upper == math.inf for r in results)
            continue
        width = max(abs(float(v)) for d in draws for v in d) + 1
        eps = 1e-6 * width
        low = np.array([[float(results[i].lower_exact)] for i in bounded])
        high = np.array([[float(results[i].upper_exact)] for i in bounded])
        sub = rows[bounded]
        assert (scipy_sign_flip_p(sub - low) > 0.05).all() and (scipy_sign_flip_p(sub - high) > 0.05).all()
        assert (scipy_sign_flip_p(sub - (low - eps)) <= 0.05).all() and (scipy_sign_flip_p(sub - (high + eps)) <= 0.05).all()
        for i in bounded:
            r = results[i]
            assert r.lower <= r.lower_exact <= r.estimate_exact <= r.upper_exact <= r.upper, "floats round outward"
            assert (r.pvalue <= 0.05) == (not r.lower_exact <= 0 <= r.upper_exact), "the interval is the test, inverted"


MCNEMAR_TABLE = [(b, c, zeros) for b, c, zeros in [
    (0, 0, 4), (1, 0, 0), (5, 0, 8), (7, 0, 6), (6, 1, 6), (3, 3, 0), (2, 9, 2), (10, 0, 3), (4, 1, 15), (0, 12, 1)]]


@pytest.mark.parametrize(("b", "c", "zeros"), MCNEMAR_TABLE, ids=[f"b{b}-c{c}-ties{z}" for b, c, z in MCNEMAR_TABLE])
def test_sign_flip_with_one_trial_per_task_is_exact_mcnemar(b: int, c: int, zeros: int) -> None:
    """One trial per task makes each difference -1, 0 or 1: flipping tasks is then McNemar's exact test."""
    diffs = [1] * b + [-1] * c + [0] * zeros
    assert sign_flip_test(diffs).pvalue_exact == mcnemar_exact(b, c).pvalue_exact


def test_sign_flip_rejects_at_most_five_percent_of_coin_flip_runs() -> None:
    """An agent that ignores memory (both arms coin flips, 3 trials per task): the interval holds 0
    in at least 95% of runs, up to sampling error over the 1,000 runs drawn."""
    rng = random.Random(7)
    rejected = 0
    for _ in range(1000):
        diffs = [Fraction(sum(rng.random() < 0.5 for _ in range(3)) - sum(rng.random() < 0.5 for _ in range(3)), 3) for _ in range(9)]
        result = sign_flip_test(diffs)
        assert (result.pvalue <= 0.05) == (not result.lower_exact <= 0 <= result.upper_exact)
        rejected += result.pvalue <= 0.05
    assert rejected <= 50 + 3 * math.sqrt(1000 * 0.05 * 0.95)


def test_sign_flip_above_the_exact_limit_is_a_seeded_monte_carlo_that_says_so() -> None:
    n = SIGN_FLIP_EXACT_MAX + 10
    diffs = [1] * 20 + [-1] * 7 + [0] * (n - 27)
    result = sign_flip_test(diffs)
    assert (result.exact, result.assignments, result.seed) == (False, SIGN_FLIP_DRAWS + 1, 0)
    assert f"{SIGN_FLIP_DRAWS} seeded random sign assignments (seed 0)" in result.method
    exact_p = mcnemar_exact(20, 7).pvalue
    assert abs(result.pvalue - exact_p) < 4 * math.sqrt(exact_p * (1 - exact_p) / SIGN_FLIP_DRAWS) + 2 / SIGN_FLIP_DRAWS
    assert sign_flip_test(diffs) == result, "the same seed draws the same assignments"
    assert result.lower_exact is not None and 0 < result.lower_exact < result.estimate_exact < result.upper_exact


def test_sign_flip_interval_has_zero_width_when_every_task_moves_alike() -> None:
    """Documented, not hidden: the interval is the test's, and the test assumes symmetry about the mean."""
    result = sign_flip_test([1] * 13)
    assert (result.lower_exact, result.upper_exact, result.pvalue_exact) == (1, 1, Fraction(2, 2**13))


def brute_force_pass_k(n: int, c: int, k: int) -> tuple[Fraction, Fraction]:
    """(pass@k, pass^k) by listing every k-subset of n attempts of which the first c pass."""
    draws = [set(s) for s in combinations(range(n), k)]
    any_pass = sum(1 for s in draws if any(i < c for i in s))
    all_pass = sum(1 for s in draws if all(i < c for i in s))
    return Fraction(any_pass, len(draws)), Fraction(all_pass, len(draws))


def test_pass_at_k_and_pass_hat_k_are_exact_counts_over_every_draw_of_k_attempts() -> None:
    for n in range(1, 8):
        for c in range(n + 1):
            for k in range(1, n + 1):
                assert (pass_at_k(n, c, k), pass_hat_k(n, c, k)) == brute_force_pass_k(n, c, k), (n, c, k)
    assert pass_at_k(5, 2, 1) == pass_hat_k(5, 2, 1) == Fraction(2, 5), "k = 1 is the pass rate"


# --------------------------------------------------------------------------- determinism


SAMPLE = """[
    wilson(3, 17, 0.9),
    clopper_pearson(3, 17, 0.9),
    clopper_pearson(0, 40),
    mcnemar_exact(9, 2),
    sign_test([3.5, -1.0, 0.0, 2.0, 2.0, -2.0, 7.25, 1.0, 0.0, 4.0]),
    wilcoxon_signed_rank_exact([3.5, -1.0, 0.0, 2.0, 2.0, -2.0, 7.25, 1.0, 0.0, 4.0]),
    paired_continuous_summary([3.5, -1.0, 0.0, 2.0, 2.0, -2.0, 7.25, 1.0, 0.0, 4.0]),
    normal_ppf(0.975),
    sign_flip_test([Fraction(2, 3), -1, 0, 1, Fraction(1, 3), 1, 0.5, 2]),
    sign_flip_test([1] * 18 + [-1] * 4 + [0] * 3),
]"""


def test_same_inputs_give_identical_outputs_in_this_and_a_fresh_process() -> None:
    first = eval(SAMPLE)
    assert eval(SAMPLE) == first
    script = f"from fractions import Fraction\nfrom tasks_lib.analysis.stats import *\nprint(repr({SAMPLE}))"
    fresh = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={"PYTHONHASHSEED": "12345"},
        cwd=Path(__file__).resolve().parents[1],
    )
    assert fresh.stdout.strip() == repr(first)


def test_results_are_reproducible_from_integers_alone() -> None:
    """A receipt records counts and ranks; re-deriving from them must give the same exact values."""
    diffs = [0.25, -1.5, 0.0, 2.0, 2.0, -0.75, 3.0, 1.5]
    same_order = [Fraction(d).limit_denominator() * 1000 + (7 if d > 0 else -7 if d < 0 else 0) for d in diffs]
    as_result = wilcoxon_signed_rank_exact(diffs)
    assert wilcoxon_signed_rank_exact(same_order) == as_result  # only signs and ranks matter
    signs = sign_test(diffs)
    assert signs.pvalue_exact == mcnemar_exact(signs.positive, signs.negative).pvalue_exact
    assert clopper_pearson(np.int64(5), np.int64(12)) == clopper_pearson(5, 12)
    assert wilson(np.int64(5), np.int64(12)) == wilson(5, 12)
    assert (as_result.pvalue_exact * 2**as_result.n).denominator == 1  # a count of sign patterns
