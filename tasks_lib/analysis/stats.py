"""Exact small-sample statistics: intervals for a proportion and paired tests.

Agent benchmarks are expensive, so samples are small, and small samples are where textbook
approximations misbehave. Everything here is exact and deterministic, using only the standard
library: binomial tails, signed-rank and sign-flip null distributions are counted with integer
combinatorics, with no normal approximation to a tail. The one exception is a sign-flip test over
more than `SIGN_FLIP_EXACT_MAX` units, which counts a seeded Monte Carlo sample of sign
assignments and says so (the draws and the seed are in its result). The same inputs always give
the same numbers, so a receipt can be re-derived from the attempts it records.

Four choices are deliberate:

- **No Wald interval.** At 0/n and n/n the Wald interval has zero width and claims certainty
  from a handful of attempts. `wilson` and `clopper_pearson` keep a sensible width there.
- **Paired methods.** Both arms run the same tasks and a hard task is hard for both, so
  `mcnemar_exact`, `sign_test` and `wilcoxon_signed_rank_exact` test per-task differences.
  Two independent intervals compared side by side discard that pairing and report far more
  uncertainty than the data carries.
- **Exploratory below five attempts.** A continuous measure (tokens, wall time) over fewer than
  `MIN_ATTEMPTS_FOR_TEST` attempts is noise with a decimal point; `paired_continuous_summary`
  marks it exploratory and computes no p-value at all.
- **The task is the unit.** Trials of one task are not independent evidence (a deterministic
  agent repeats itself), so `sign_flip_test` takes one paired difference per task and flips the
  sign of whole tasks; with one trial per task and outcomes in {-1, 0, 1} it equals exact McNemar.
- **The interval of a bounded mean is not the test's inversion.** Inverting the sign-flip test
  treats a task whose observed difference is 0 as an exact zero: with one task at -1 and nine at
  0 it gives [-0.333, 0] and covers +0.1 in 78% of sparse runs. `adjusted_mean_interval` adds
  Agresti-Min pseudo-tasks at the range's ends and centre and takes a Student t interval over
  tasks: at least 95% coverage in every design of `benchmarks/sim_coverage.py`
  (docs/STATISTICS.md). The p-value stays the exact sign-flip one.

The t quantile comes from SciPy (a core dependency); everything else uses only the standard library.
"""

from __future__ import annotations

import math
import numbers
import operator
import random
import statistics
import struct
from collections.abc import Callable, Iterable
from fractions import Fraction
from typing import NamedTuple

from scipy.stats import t as student_t

from tasks_lib.errors import MemtrialError

__all__ = [
    "MIN_ATTEMPTS_FOR_TEST",
    "PSEUDO_TASKS",
    "SIGN_FLIP_DRAWS",
    "SIGN_FLIP_EXACT_MAX",
    "SIGN_FLIP_SEED",
    "Interval",
    "McNemarResult",
    "MeanInterval",
    "PairedContinuousSummary",
    "SignFlipResult",
    "SignTestResult",
    "StatsError",
    "WilcoxonResult",
    "adjusted_mean_interval",
    "clopper_pearson",
    "mcnemar_exact",
    "normal_ppf",
    "paired_continuous_summary",
    "pass_at_k",
    "pass_hat_k",
    "sign_flip_test",
    "sign_test",
    "wilcoxon_signed_rank_exact",
    "wilson",
]

MIN_ATTEMPTS_FOR_TEST = 5
"""Fewest paired attempts of a continuous measure for which a significance test is computed."""

SIGN_FLIP_EXACT_MAX = 20
"""Most units for which `sign_flip_test` counts all 2**n sign assignments (2**20 is about a million)."""
SIGN_FLIP_DRAWS = 20_000
"""Seeded random sign assignments `sign_flip_test` counts above `SIGN_FLIP_EXACT_MAX` units."""
SIGN_FLIP_SEED = 0
"""Seed of those draws, so a Monte Carlo result is as reproducible as an exact one."""

PSEUDO_TASKS = 2
"""Pseudo-tasks `adjusted_mean_interval` adds: Agresti-Min's half a pair in each cell of the paired 2x2 table."""

Real = int | float | Fraction


class StatsError(MemtrialError):
    """An argument of a statistics function is outside its domain."""


# --------------------------------------------------------------------------- results


class Interval(NamedTuple):
    """A two-sided confidence interval for a binomial proportion k/n."""

    method: str
    """`wilson` or `clopper-pearson`."""
    k: int
    """Successes."""
    n: int
    """Trials."""
    confidence: float
    """Nominal two-sided coverage, in (0, 1)."""
    estimate: float
    """The point estimate k/n."""
    lower: float
    """Lower bound; exactly 0.0 when k == 0."""
    upper: float
    """Upper bound; exactly 1.0 when k == n."""


class McNemarResult(NamedTuple):
    """Exact McNemar test on the discordant pairs of a paired binary outcome."""

    b: int
    """Pairs where only the first arm succeeded."""
    c: int
    """Pairs where only the second arm succeeded."""
    n: int
    """Discordant pairs, b + c."""
    pvalue: float
    """Two-sided p-value as a float."""
    pvalue_exact: Fraction
    """The same p-value as an exact fraction with a power-of-two denominator."""


class SignTestResult(NamedTuple):
    """Exact two-sided sign test on paired differences."""

    positive: int
    """Differences above zero."""
    negative: int
    """Differences below zero."""
    zeros: int
    """Zero differences, dropped before testing."""
    n: int
    """Differences tested, positive + negative."""
    pvalue: float
    """Two-sided p-value as a float."""
    pvalue_exact: Fraction
    """The same p-value as an exact fraction."""


class WilcoxonResult(NamedTuple):
    """Exact two-sided Wilcoxon signed-rank test on paired differences."""

    statistic: float
    """min(W+, W-), as SciPy reports for a two-sided test."""
    w_plus: float
    """Sum of the (average) ranks of |d| over positive differences."""
    w_minus: float
    """Sum of the (average) ranks of |d| over negative differences."""
    n: int
    """Non-zero differences ranked and tested."""
    zeros: int
    """Zero differences, dropped before ranking (Wilcoxon's own zero method)."""
    pvalue: float
    """Two-sided p-value as a float."""
    pvalue_exact: Fraction
    """The same p-value as an exact fraction with denominator 2**n."""


class PairedContinuousSummary(NamedTuple):
    """Summary of a continuous paired measure; p-values only at five attempts or more."""

    attempts: int
    """Paired differences given, zeros included."""
    zeros: int
    """Differences exactly zero."""
    median_difference: float | None
    """Median of all differences; None when there are none."""
    exploratory: bool
    """True below `MIN_ATTEMPTS_FOR_TEST` attempts: describe, do not test."""
    sign_pvalue: float | None
    """Exact sign-test p-value; None when exploratory."""
    wilcoxon_pvalue: float | None
    """Exact signed-rank p-value; None when exploratory."""


class SignFlipResult(NamedTuple):
    """Sign-flip (paired permutation) test of a mean paired difference, with the interval it inverts to."""

    n: int
    """Paired units (tasks), zeros included: every unit's sign is flipped."""
    nonzero: int
    """Units whose difference is not zero."""
    estimate: float
    """The mean difference."""
    estimate_exact: Fraction
    """The same mean as an exact fraction."""
    pvalue: float
    """Two-sided p-value: twice the smaller one-sided share of assignments, at most 1 (as SciPy)."""
    pvalue_exact: Fraction
    """The same p-value as an exact fraction."""
    confidence: float
    """Nominal two-sided coverage of the interval."""
    lower: float
    """Lower bound, rounded down to a float; -inf when the test rejects no value below the mean."""
    upper: float
    """Upper bound, rounded up to a float; inf when the test rejects no value above the mean."""
    lower_exact: Fraction | None
    """The lower bound exactly (a mean of a subset of the differences); None when unbounded."""
    upper_exact: Fraction | None
    """The upper bound exactly; None when unbounded."""
    exact: bool
    """True when all 2**n assignments were counted; False for a seeded Monte Carlo sample."""
    assignments: int
    """Sign assignments counted: 2**n when exact, else the draws plus the observed one."""
    seed: int | None
    """Seed of the Monte Carlo draws; None when exact."""
    method: str
    """The test and the interval in words, with the assignments counted."""


class MeanInterval(NamedTuple):
    """A two-sided interval for the mean of bounded per-task figures (`adjusted_mean_interval`)."""

    method: str
    """The construction in words, with its pseudo-observations and degrees of freedom."""
    n: int
    """Tasks (real units; the pseudo-observations are not counted)."""
    confidence: float
    """Nominal two-sided coverage, in (0, 1)."""
    estimate: float
    """The plain mean of the values (what a report prints)."""
    center: float
    """The mean with the pseudo-observations, the interval's centre (pulled toward the range's centre)."""
    lower: float
    """Lower bound, within the range and at most `estimate`."""
    upper: float
    """Upper bound, within the range and at least `estimate`."""


# --------------------------------------------------------------------------- validation


def _check_count(name: str, value: object) -> int:
    """Return `value` as a non-negative int, or raise StatsError naming `name`."""
    if isinstance(value, bool):
        raise StatsError(f"{name}: must be an integer count, got the bool {value!r}")
    try:
        count = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        raise StatsError(f"{name}: must be an integer count, got {value!r}") from None
    if count < 0:
        raise StatsError(f"{name}: must be >= 0, got {count}")
    return count


def _check_proportion_args(k: object, n: object) -> tuple[int, int]:
    """Validate the successes and trials of an interval."""
    k_int, n_int = _check_count("k", k), _check_count("n", n)
    if n_int == 0:
        raise StatsError("n: an interval needs at least one trial, got n=0")
    if k_int > n_int:
        raise StatsError(f"k: successes cannot exceed trials, got k={k_int} > n={n_int}")
    return k_int, n_int


def _check_confidence(confidence: object) -> float:
    """Return `confidence` as a float strictly between 0 and 1, or raise StatsError."""
    if isinstance(confidence, bool) or not isinstance(confidence, numbers.Real):
        raise StatsError(f"confidence: must be a real number in (0, 1), got {confidence!r}")
    value = float(confidence)
    if not 0.0 < value < 1.0:  # also rejects NaN
        raise StatsError(f"confidence: must be strictly between 0 and 1, got {confidence!r}")
    return value


def _check_diffs(diffs: Iterable[Real]) -> tuple[Real, ...]:
    """Return `diffs` as a tuple of finite real numbers, or raise StatsError naming the item."""
    if isinstance(diffs, str | bytes) or not isinstance(diffs, Iterable):
        raise StatsError(f"diffs: must be a sequence of numbers, got {type(diffs).__name__}")
    values = tuple(diffs)
    for i, value in enumerate(values):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise StatsError(f"diffs[{i}]: must be a real number, got {value!r}")
        if not isinstance(value, numbers.Rational) and not math.isfinite(value):
            raise StatsError(f"diffs[{i}]: must be finite, got {value!r}")
    return values


# --------------------------------------------------------------------------- normal quantile

_A = (-3.969683028665376e01, 2.209460984245205e02, -2.759285104469687e02,
      1.383577518672690e02, -3.066479806614716e01, 2.506628277459239e00)
_B = (-5.447609879822406e01, 1.615858368580409e02, -1.556989798598866e02,
      6.680131188771972e01, -1.328068155288572e01)
_C = (-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e00,
      -2.549732539343734e00, 4.374664141464968e00, 2.938163982698783e00)
_D = (7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e00,
      3.754408661907416e00)
_P_LOW = 0.02425
_SQRT2 = math.sqrt(2.0)
_SQRT2PI = math.sqrt(2.0 * math.pi)


def _acklam(p: float) -> float:
    """Acklam's rational approximation of the normal quantile for 0 < p <= 0.5 (rel. err 1e-9)."""
    if p < _P_LOW:
        q = math.sqrt(-2.0 * math.log(p))
        num = ((((_C[0] * q + _C[1]) * q + _C[2]) * q + _C[3]) * q + _C[4]) * q + _C[5]
        return num / ((((_D[0] * q + _D[1]) * q + _D[2]) * q + _D[3]) * q + 1.0)
    q = p - 0.5
    r = q * q
    num = (((((_A[0] * r + _A[1]) * r + _A[2]) * r + _A[3]) * r + _A[4]) * r + _A[5]) * q
    return num / (((((_B[0] * r + _B[1]) * r + _B[2]) * r + _B[3]) * r + _B[4]) * r + 1.0)


def _lower_ppf(p: float) -> float:
    """Normal quantile for 0 < p <= 0.5: Acklam's estimate refined by one Halley step."""
    x = _acklam(p)
    if x * x / 2.0 > 700.0:  # deep subnormal tail: exp() would overflow; keep the estimate
        return x
    if p >= 0.25:  # near the centre, cancel exactly: Phi(x) - p = erf(x/sqrt2)/2 - (p - 1/2)
        err = 0.5 * math.erf(x / _SQRT2) - (p - 0.5)
    else:
        err = 0.5 * math.erfc(-x / _SQRT2) - p
    u = err * _SQRT2PI * math.exp(x * x / 2.0)
    return x - u / (1.0 + x * u / 2.0)


def normal_ppf(p: float) -> float:
    """Return the standard normal quantile Phi^-1(p) for 0 < p < 1, to about 1e-15 relative.

    Raises StatsError when p is not strictly between 0 and 1.
    """
    if isinstance(p, bool) or not isinstance(p, numbers.Real) or not 0.0 < float(p) < 1.0:
        raise StatsError(f"p: must be a probability strictly between 0 and 1, got {p!r}")
    p = float(p)
    if p > 0.5:
        return -_lower_ppf(1.0 - p)  # 1 - p is exact for p in [0.5, 1]
    return _lower_ppf(p)


# --------------------------------------------------------------------------- intervals


def wilson(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Wilson score interval for k successes in n trials (Newcombe 1998, no continuity correction).

    Raises StatsError on a negative count, k > n, n == 0 or confidence outside (0, 1).
    """
    k, n = _check_proportion_args(k, n)
    confidence = _check_confidence(confidence)
    z = -normal_ppf((1.0 - confidence) / 2.0)
    z2 = z * z
    denom = 2.0 * (n + z2)
    center = (2.0 * k + z2) / denom
    delta = z * math.sqrt(z2 + 4.0 * k * (n - k) / n) / denom
    lower = 0.0 if k == 0 else max(0.0, center - delta)
    upper = 1.0 if k == n else min(1.0, center + delta)
    return Interval("wilson", k, n, confidence, k / n, lower, upper)


def _cdf_numerator(k: int, n: int, a: int, b: int) -> int:
    """Return S with P(X <= k) = S / (a + b)**n for X ~ Binomial(n, a / (a + b)), exactly."""
    if k < 0:
        return 0
    if k >= n:
        return (a + b) ** n
    if 2 * k > n:  # fewer terms through the complement: P(X <= k) = 1 - P(n - X <= n - k - 1)
        return (a + b) ** n - _cdf_numerator(n - k - 1, n, b, a)
    total, a_pow, coef = 0, 1, 1
    for j in range(k + 1):  # homogeneous Horner: total = sum_{i<=j} C(n,i) a^i b^(j-i)
        total = total * b + coef * a_pow
        a_pow *= a
        coef = coef * (n - j) // (j + 1)
    return total * b ** (n - k)


def _cdf_exceeds(k: int, n: int, level: Fraction) -> Callable[[int, int], bool]:
    """Predicate on p = num/den: whether P(X <= k) > level for X ~ Binomial(n, p), exactly."""

    def exceeds(num: int, den: int) -> bool:
        return _cdf_numerator(k, n, num, den - num) * level.denominator > level.numerator * den**n

    return exceeds


_MANTISSA = 2**53
_FINEST = 2**1075  # 1/_FINEST is below half the smallest subnormal float


def _float_bits(x: float) -> int:
    """The IEEE-754 bit pattern of a float as an int; ordered like the floats for x >= 0."""
    return int(struct.unpack("<q", struct.pack("<d", x))[0])


def _bits_float(bits: int) -> float:
    """The float whose IEEE-754 bit pattern is `bits`."""
    return float(struct.unpack("<d", struct.pack("<q", bits))[0])


def _float_down(x: Fraction) -> float:
    """The largest float not above x."""
    f = float(x)
    return math.nextafter(f, -math.inf) if Fraction(f) > x else f


def _float_up(x: Fraction) -> float:
    """The smallest float not below x."""
    f = float(x)
    return math.nextafter(f, math.inf) if Fraction(f) < x else f


def _boundary(holds: Callable[[int, int], bool]) -> tuple[float, float]:
    """Locate where a monotone predicate on [0, 1], true at 0 and false at 1, turns false.

    Returns (last float where it holds, first float where it does not). Bisects first over
    dyadic fractions, whose small denominators keep the exact evaluation cheap, until the bracket
    is narrower than an ulp of its lower end; then over the IEEE-754 bit patterns between the
    bracketing floats, which are ordered like the non-negative floats.
    """
    lo, hi, den = 0, 1, 1
    while lo < _MANTISSA and den < _FINEST:
        lo, hi, den = 2 * lo, 2 * hi, 2 * den
        if holds(lo + 1, den):
            lo += 1
        else:
            hi -= 1
    lo_bits = _float_bits(_float_down(Fraction(lo, den)))
    hi_bits = _float_bits(_float_up(Fraction(hi, den)))
    while hi_bits - lo_bits > 1:
        mid = (lo_bits + hi_bits) // 2
        if holds(*_bits_float(mid).as_integer_ratio()):
            lo_bits = mid
        else:
            hi_bits = mid
    return _bits_float(lo_bits), _bits_float(hi_bits)


def clopper_pearson(k: int, n: int, confidence: float = 0.95) -> Interval:
    """Exact (Clopper-Pearson) interval for k successes in n trials.

    Each bound solves a binomial tail equation with the tail summed in integers at an exact
    rational parameter. Bisection returns the adjacent float on the conservative side, so the
    interval contains the exact one and each bound is within one ulp of it. Each bound takes some
    60 exact tail sums of up to min(k, n - k) terms: milliseconds at n = 100, about a second at
    n = 1000. Raises StatsError like `wilson`.
    """
    k, n = _check_proportion_args(k, n)
    confidence = _check_confidence(confidence)
    tail = (1 - Fraction(confidence)) / 2
    lower = 0.0
    if k > 0:  # largest p with P(X >= k; p) < tail, i.e. P(X <= k - 1; p) > 1 - tail
        lower, _ = _boundary(_cdf_exceeds(k - 1, n, 1 - tail))
    upper = 1.0
    if k < n:  # smallest p with P(X <= k; p) <= tail
        _, upper = _boundary(_cdf_exceeds(k, n, tail))
    return Interval("clopper-pearson", k, n, confidence, k / n, lower, upper)


# --------------------------------------------------------------------------- paired tests


def _binomial_half_two_sided(k: int, n: int) -> Fraction:
    """Exact two-sided binomial p-value of k in n at p = 1/2: min(1, 2 * smaller tail)."""
    smaller = min(k, n - k)
    tail = sum(math.comb(n, i) for i in range(smaller + 1))
    return min(Fraction(1), Fraction(2 * tail, 2**n))


def mcnemar_exact(b: int, c: int) -> McNemarResult:
    """Exact two-sided McNemar test from the discordant counts b and c.

    A binomial test of b successes in b + c trials at p = 1/2; no discordant pairs gives p = 1.
    Raises StatsError on a negative or non-integer count.
    """
    b, c = _check_count("b", b), _check_count("c", c)
    p = _binomial_half_two_sided(b, b + c)
    return McNemarResult(b, c, b + c, float(p), p)


def sign_test(diffs: Iterable[Real]) -> SignTestResult:
    """Exact two-sided sign test on paired differences; zeros are dropped and counted.

    With no non-zero difference p = 1. Raises StatsError on a non-finite or non-real item.
    """
    values = _check_diffs(diffs)
    positive = sum(1 for d in values if d > 0)
    negative = sum(1 for d in values if d < 0)
    n = positive + negative
    p = _binomial_half_two_sided(positive, n)
    return SignTestResult(positive, negative, len(values) - n, n, float(p), p)


def _doubled_ranks(magnitudes: list[Real]) -> list[int]:
    """Twice the average rank of each magnitude (ties share the mean rank), as exact ints."""
    order = sorted(range(len(magnitudes)), key=lambda i: magnitudes[i])
    ranks = [0] * len(magnitudes)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and magnitudes[order[end + 1]] == magnitudes[order[start]]:
            end += 1
        for pos in range(start, end + 1):  # positions start..end hold ranks start+1..end+1
            ranks[order[pos]] = (start + 1) + (end + 1)
        start = end + 1
    return ranks


def _count_sums_at_most(weights: list[int], limit: int) -> int:
    """Count the subsets of `weights` whose sum is at most `limit` (0/1 knapsack DP)."""
    counts = [1] + [0] * limit
    for w in weights:
        if w <= limit:
            counts[w:] = [x + y for x, y in zip(counts[w:], counts[: limit + 1 - w], strict=True)]
    return sum(counts)


def wilcoxon_signed_rank_exact(diffs: Iterable[Real]) -> WilcoxonResult:
    """Exact two-sided Wilcoxon signed-rank test on paired differences.

    Zeros are dropped (Wilcoxon's method) and tied |d| share their average rank. The null
    distribution of W+ is counted over all 2**n sign assignments of the ranks actually observed
    (doubled to integers, so ties stay exact); p = min(1, 2 * smaller tail). With no non-zero
    difference p = 1. Raises StatsError on a non-finite or non-real item.
    """
    values = _check_diffs(diffs)
    nonzero = [d for d in values if d != 0]
    n = len(nonzero)
    magnitudes: list[Real] = [-d if d < 0 else d for d in nonzero]  # abs, which mypy types as object here
    ranks2 = _doubled_ranks(magnitudes)
    w_plus2 = sum(r for r, d in zip(ranks2, nonzero, strict=True) if d > 0)
    w_minus2 = n * (n + 1) - w_plus2
    smaller = min(w_plus2, w_minus2)
    # W+ is symmetric about its mean, so both tails beyond the observed value are equally large.
    tail = _count_sums_at_most(ranks2, smaller)
    p = min(Fraction(1), Fraction(2 * tail, 2**n))
    return WilcoxonResult(smaller / 2, w_plus2 / 2, w_minus2 / 2, n, len(values) - n, float(p), p)


def paired_continuous_summary(diffs: Iterable[Real]) -> PairedContinuousSummary:
    """Summarise a continuous paired measure (tokens, seconds) for the two arms.

    Below `MIN_ATTEMPTS_FOR_TEST` attempts the summary is exploratory and both p-values are None;
    otherwise it carries the exact sign-test and signed-rank p-values. Raises StatsError on a
    non-finite or non-real item.
    """
    values = _check_diffs(diffs)
    zeros = sum(1 for d in values if d == 0)
    median = float(statistics.median(values)) if values else None  # type: ignore[type-var]  # mixed int/float/Fraction works; the stub is constrained
    if len(values) < MIN_ATTEMPTS_FOR_TEST:
        return PairedContinuousSummary(len(values), zeros, median, True, None, None)
    sign_p = sign_test(values).pvalue
    wilcoxon_p = wilcoxon_signed_rank_exact(values).pvalue
    return PairedContinuousSummary(len(values), zeros, median, False, sign_p, wilcoxon_p)


# --------------------------------------------------------------------------- sign flips over tasks


def _scaled(values: tuple[Real, ...]) -> tuple[list[int], int]:
    """The values as integers over one common denominator: (numerators, denominator), exactly."""
    fractions = [Fraction(v) for v in values]
    denominator = math.lcm(*(f.denominator for f in fractions)) if fractions else 1
    return [int(f * denominator) for f in fractions], denominator


def _all_flips(values: list[int]) -> tuple[list[int], list[int]]:
    """Sum and size of the flipped set for every one of the 2**n sign assignments."""
    sums, sizes = [0], [0]
    for v in values:
        sums += [s + v for s in sums]
        sizes += [k + 1 for k in sizes]
    return sums, sizes


def _drawn_flips(values: list[int], draws: int, seed: int) -> tuple[list[int], list[int]]:
    """Sum and size of the flipped set for the observed assignment and `draws` seeded random ones."""
    rng = random.Random(seed)
    sums, sizes = [0], [0]
    for _ in range(draws):
        mask = rng.getrandbits(len(values))
        flipped = [v for i, v in enumerate(values) if mask >> i & 1]
        sums.append(sum(flipped))
        sizes.append(len(flipped))
    return sums, sizes


def sign_flip_test(
    diffs: Iterable[Real],
    confidence: float = 0.95,
    *,
    exact_max: int = SIGN_FLIP_EXACT_MAX,
    draws: int = SIGN_FLIP_DRAWS,
    seed: int = SIGN_FLIP_SEED,
) -> SignFlipResult:
    """Two-sided sign-flip test of mean(diffs) = 0, one difference per unit, and its inverted interval.

    Under "no effect" each unit's difference is as likely negated, so the null distribution of
    the mean is that of its 2**n sign assignments (SciPy's `permutation_test` with
    `permutation_type="samples"` on the pairs). p = min(1, 2 x the smaller one-sided share of
    assignments whose mean is at least as extreme as the observed one). Up to `exact_max` units
    every assignment is counted; above, the observed one and `draws` seeded random ones are.

    The interval holds every m the same test does not reject when applied to diffs - m (p > 1 -
    confidence). Flipping a set A of units moves the statistic past the observed one exactly when
    m passes the mean of the differences in A, so the bounds are order statistics of those subset
    means (Hartigan 1969), computed exactly. It assumes each difference is symmetric about m; it
    is unbounded on a side where no m can be rejected (n <= 5 at 95%), and has zero width when
    every unit shows the same difference. Raises StatsError on no differences or a bad item.
    """
    values = _check_diffs(diffs)
    confidence = _check_confidence(confidence)
    if not values:
        raise StatsError("diffs: a sign-flip test needs at least one difference, got none")
    exact_max, draws = _check_count("exact_max", exact_max), _check_count("draws", draws)
    scaled, denominator = _scaled(values)
    n = len(scaled)
    exact = n <= exact_max
    if not exact and draws == 0:
        raise StatsError(f"draws: {n} units exceed exact_max={exact_max}, so at least one draw is needed, got 0")
    sums, sizes = _all_flips(scaled) if exact else _drawn_flips(scaled, draws, seed)
    total = len(sums)
    # flipping A lowers the statistic by 2 * sum(A): it stays >= the observed one iff sum(A) <= 0
    at_least = sum(1 for s in sums if s <= 0)
    at_most = sum(1 for s in sums if s >= 0)
    p = min(Fraction(1), Fraction(2 * min(at_least, at_most), total))
    empty = sizes.count(0)
    rank = math.floor((1 - Fraction(confidence)) / 2 * total) - empty + 1
    lower = upper = None
    if rank > 0:  # the rank-th smallest and largest subset mean; S/k is ordered as S * (lcm / k)
        common = math.lcm(*range(1, n + 1))
        keys = sorted(s * (common // k) for s, k in zip(sums, sizes, strict=True) if k)
        lower, upper = Fraction(keys[rank - 1], common * denominator), Fraction(keys[-rank], common * denominator)
    mean = Fraction(sum(scaled), n * denominator)
    counted = f"all 2^{n} = {total} sign assignments" if exact else (
        f"a Monte Carlo sample of {draws} seeded random sign assignments (seed {seed}) plus the observed one")
    method = (f"sign-flip permutation test over {n} tasks, {counted}; {confidence:.0%} interval by inverting "
              "the test (Hartigan subset means)")
    return SignFlipResult(
        n=n, nonzero=sum(1 for v in scaled if v), estimate=float(mean), estimate_exact=mean, pvalue=float(p),
        pvalue_exact=p, confidence=confidence, lower=-math.inf if lower is None else _float_down(lower),
        upper=math.inf if upper is None else _float_up(upper), lower_exact=lower, upper_exact=upper,
        exact=exact, assignments=total, seed=None if exact else seed, method=method,
    )


# --------------------------------------------------------------------------- bounded means


def adjusted_mean_interval(values: Iterable[Real], low: Real, high: Real, confidence: float = 0.95) -> MeanInterval:
    """Interval for the mean of per-task figures that lie in [low, high] (a success difference: [-1, 1]).

    Agresti and Min (2005) add half a pair to each cell of a paired 2x2 table; here that is done
    over tasks: `PSEUDO_TASKS` pseudo-tasks, a quarter of them at `low`, a quarter at `high` and
    half at the centre of the range. The interval is the Student t interval (n - 1 degrees of
    freedom, n the real tasks) of the weighted mean of the values and the pseudo-tasks, clipped
    to [low, high] and widened to hold the plain mean. A task whose observed figure is 0 then
    counts as uncertain, not as an exact zero: with no task differing the interval still has
    width. The pseudo-tasks do not shrink with trials, since trials of one task are not
    independent evidence (a deterministic agent repeats itself). One task gives the whole range.
    Raises StatsError on no values, a value outside [low, high] or a bad confidence.
    """
    values_ = _check_diffs(values)
    confidence = _check_confidence(confidence)
    if not values_:
        raise StatsError("values: an interval for a mean needs at least one value, got none")
    lo, hi = float(low), float(high)
    if not lo < hi:
        raise StatsError(f"low, high: the range must be non-empty, got [{low}, {high}]")
    xs = [float(v) for v in values_]
    if outside := [v for v in xs if not lo <= v <= hi]:
        raise StatsError(f"values: must lie in [{low}, {high}], got {outside[:3]}")
    n = len(xs)
    estimate = float(sum(Fraction(v) for v in values_) / n)
    end, middle, centre_value = PSEUDO_TASKS / 4, PSEUDO_TASKS / 2, (lo + hi) / 2
    weight = n + PSEUDO_TASKS
    center = (sum(xs) + end * (lo + hi) + middle * centre_value) / weight
    method = (f"Student t interval over {n} tasks ({n - 1} df) of the mean with Agresti-Min pseudo-tasks "
              f"({end:g} at {low}, {end:g} at {high}, {middle:g} at {centre_value:g}), {confidence:.0%}")
    if n < 2:
        return MeanInterval(method + "; one task: the whole range", n, confidence, estimate, center, lo, hi)
    squares = sum((v - center) ** 2 for v in xs) + end * ((lo - center) ** 2 + (hi - center) ** 2) + middle * (centre_value - center) ** 2
    half = float(student_t.ppf(0.5 + confidence / 2, n - 1)) * math.sqrt(squares / (weight - 1) / weight)
    lower = max(lo, min(center - half, estimate))
    upper = min(hi, max(center + half, estimate))
    return MeanInterval(method, n, confidence, estimate, center, lower, upper)


# --------------------------------------------------------------------------- pass@k


def _check_pass_args(n: object, c: object, k: object) -> tuple[int, int, int]:
    n_int, c_int, k_int = _check_count("n", n), _check_count("c", c), _check_count("k", k)
    if c_int > n_int:
        raise StatsError(f"c: passes cannot exceed attempts, got c={c_int} > n={n_int}")
    if not 1 <= k_int <= n_int:
        raise StatsError(f"k: must be between 1 and the attempts n={n_int}, got k={k_int}")
    return n_int, c_int, k_int


def pass_at_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass@k from c passes in n attempts: 1 - C(n - c, k) / C(n, k) (Chen et al. 2021).

    The chance that at least one of k attempts drawn without replacement passes. Raises
    StatsError unless 0 <= c <= n and 1 <= k <= n.
    """
    n, c, k = _check_pass_args(n, c, k)
    return 1 - Fraction(math.comb(n - c, k), math.comb(n, k))


def pass_hat_k(n: int, c: int, k: int) -> Fraction:
    """Unbiased pass^k from c passes in n attempts: C(c, k) / C(n, k) (Yao et al. 2024, tau-bench).

    The chance that all of k attempts drawn without replacement pass: reliability, not luck.
    Raises StatsError like `pass_at_k`.
    """
    n, c, k = _check_pass_args(n, c, k)
    return Fraction(math.comb(c, k), math.comb(n, k))
