"""Power of the task-clustered success test: the smallest difference a corpus of T tasks x N trials detects.

The headline tests the mean over tasks of success-rate(on) - success-rate(off) by a two-sided
sign-flip test over tasks (`tasks_lib.analysis.stats.sign_flip_test`). Before a run is paid for,
and beside its headline after, the question is what that test could have seen: the smallest
additive success difference it detects with `target` power at level `alpha`.

The answer is simulated, seeded and stated with its Monte Carlo error:

- each task has an `off` success rate: a stated baseline for every task, or, from a stored run, a
  distribution fitted to its observed per-task `off` counts. Observed rates are not true rates (with
  one trial each is 0 or 1, and a task seen at 1 could not improve), so a beta-binomial is fitted by
  the method of moments and each simulated task draws its true rate from that Beta; where the
  counts show no spread beyond binomial noise (always so with one trial, which cannot tell tasks
  apart) every task sits at the observed mean. `baseline_model` says which was used;
- under a difference d the task's `on` rate is min(1, off + d) (so the realized mean difference is
  below d when a baseline is near 1; both are reported);
- each replicate draws N off and N on Bernoulli trials per task, takes per-task differences and
  runs the sign-flip test with its exact null distribution, counted by convolving the generating
  polynomial of each distinct difference (identical to `sign_flip_test` up to
  `SIGN_FLIP_EXACT_MAX` tasks; above, `sign_flip_test` samples that same distribution);
- the same uniform draws serve every d (common random numbers), so power is estimated on one
  footing across differences; d is searched on a 0.01 grid, and the power at the grid point below
  is reported too, so a reader sees the step.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from fractions import Fraction
from typing import Literal, Protocol

import numpy as np
from pydantic import Field

from tasks_lib.contracts import ContractModel
from tasks_lib.errors import MemtrialError

DEFAULT_ALPHA = 0.05
DEFAULT_TARGET = 0.8
DEFAULT_REPLICATES = 2000
DEFAULT_SEED = 20261204
GRID = 100
"""The difference is searched in steps of 1/GRID."""
EXACT_INT_MAX_TASKS = 61
"""Up to this many tasks the null counts fit in int64 (2**61 assignments); above, Python integers are used."""


class Attempted(Protocol):
    """What the power calculation reads of an attempt (a RunRecord or a graded attempt)."""

    @property
    def task_id(self) -> str: ...
    @property
    def condition(self) -> str: ...
    @property
    def outcome(self) -> str: ...


BaselineModel = Literal["stated", "observed-beta", "observed-mean", "observed-rates"]
"""How a detectable difference simulates off rates (see `DetectableDifference.baseline_model`)."""


class PowerError(MemtrialError):
    """A power calculation was asked with impossible arguments (no tasks, a rate outside [0, 1], ...)."""


class DetectableDifference(ContractModel):
    """The smallest success difference the task-clustered test detects with the target power, by simulation."""

    tasks: int = Field(ge=1)
    """Tasks per simulated corpus."""
    trials: int = Field(ge=1)
    """Trials per task and condition."""
    alpha: float = Field(gt=0, lt=1)
    """Two-sided level of the sign-flip test."""
    target_power: float = Field(gt=0, lt=1)
    """Power the difference must reach."""
    baseline: str
    """Where the off rates come from, in words."""
    baseline_mean: float = Field(ge=0, le=1)
    """Mean off success rate of the baseline tasks."""
    baseline_model: Literal["stated", "observed-beta", "observed-mean", "observed-rates"] = "stated"
    """How off rates were simulated: `stated` rates as given; from a run, `observed-beta` (true rates drawn from a
    beta-binomial fitted to the observed counts), `observed-mean` (every task at the observed mean: no spread
    beyond binomial noise) or `observed-rates` (observed rates as true ones, memtrial before issue #31)."""
    difference: float | None
    """Smallest additive difference (grid of 0.01) reaching the target power; None when even +1 does not."""
    realized_difference: float | None
    """Mean over tasks of min(1, off + difference) - off at that difference (capped rates lower it)."""
    power: float
    """Estimated power at `difference` (at +1 when none reaches the target)."""
    power_standard_error: float = Field(ge=0)
    """Monte Carlo standard error of `power`: sqrt(power (1 - power) / replicates)."""
    power_below: float | None
    """Estimated power one grid step below `difference`; None at difference 0 or when none reaches the target."""
    null_power: float
    """Estimated rejection rate at difference 0: the test's size under these baselines (at most alpha when exact)."""
    replicates: int = Field(ge=1)
    """Simulated corpora per difference."""
    seed: int
    """Seed of the simulation; the same arguments and seed give the same figures."""
    method: str
    """The simulation in words."""

    def sentence(self) -> str:
        """One line for a report: the difference, its power and Monte Carlo error, and the design."""
        design = f"{self.tasks} tasks x {self.trials} trial(s), off rates {self.baseline}"
        if self.difference is None:
            return (f"no success difference reaches {self.target_power:.0%} power at the {self.alpha:.0%} level with {design}: "
                    f"even +100 points gives power {self.power:.2f} (Monte Carlo SE {self.power_standard_error:.3f})")
        below = "" if self.power_below is None else f", {self.power_below:.3f} one point lower"
        return (f"smallest success difference detected with {self.target_power:.0%} power at the {self.alpha:.0%} level: "
                f"+{self.difference * 100:.0f} points (realized +{(self.realized_difference or 0) * 100:.1f}; power {self.power:.3f}, "
                f"Monte Carlo SE {self.power_standard_error:.3f}{below}; {self.replicates} simulated corpora, seed {self.seed}) with {design}")


def _null_counts(diffs: np.ndarray) -> tuple[list[int] | np.ndarray, int]:
    """Counts of subset sums of the integer `diffs`, indexed from the most negative sum, and that offset."""
    offset = int(-diffs[diffs < 0].sum())
    exact_ints = len(diffs) <= EXACT_INT_MAX_TASKS
    counts: np.ndarray = np.ones(1, dtype=np.int64 if exact_ints else object)
    for value, multiplicity in Counter(int(v) for v in diffs).items():
        if value == 0:
            counts = counts * (2**multiplicity)
            continue
        step = abs(value)
        poly = np.zeros(step * multiplicity + 1, dtype=counts.dtype)
        poly[::step] = [math.comb(multiplicity, k) for k in range(multiplicity + 1)]
        if value < 0:
            poly = poly[::-1]
        counts = np.convolve(counts, poly)
    return counts, offset


def sign_flip_pvalue(diffs: Sequence[int] | np.ndarray) -> Fraction:
    """Exact two-sided p of `sign_flip_test` for integer per-task differences, by the subset-sum distribution."""
    values = np.asarray(diffs, dtype=np.int64)
    if values.size == 0:
        raise PowerError("diffs: a sign-flip test needs at least one difference, got none")
    counts, offset = _null_counts(values)
    at_least = int(sum(counts[: offset + 1]))  # flipped sets with sum <= 0
    at_most = int(sum(counts[offset:]))  # flipped sets with sum >= 0
    return min(Fraction(1), Fraction(2 * min(at_least, at_most), 2 ** values.size))


def _check(tasks: int, trials: int, alpha: float, target: float, replicates: int, rates: Sequence[float]) -> None:
    problems = []
    if tasks < 1:
        problems.append(f"tasks: need at least 1, got {tasks}")
    if trials < 1:
        problems.append(f"trials: need at least 1, got {trials}")
    if not 0 < alpha < 1:
        problems.append(f"alpha: must lie strictly between 0 and 1, got {alpha}")
    if not 0 < target < 1:
        problems.append(f"power: must lie strictly between 0 and 1, got {target}")
    if replicates < 1:
        problems.append(f"replicates: need at least 1, got {replicates}")
    if not rates:
        problems.append("baseline: no off rate to simulate from (the run has no gradable off attempt)")
    bad = [r for r in rates if not 0 <= r <= 1 or math.isnan(r)]
    if bad:
        problems.append(f"baseline: success rates must lie in [0, 1], got {bad[:3]}")
    if problems:
        raise PowerError("; ".join(problems))


class _Simulation:
    """Simulated corpora with fixed draws: `power(step)` is the rejection rate at difference step/GRID."""

    def __init__(self, tasks: int, trials: int, rates: Sequence[float], resample: bool, alpha: float, replicates: int, seed: int,
                 beta: tuple[float, float] | None = None) -> None:
        rng = np.random.default_rng(seed)
        pool = np.asarray(rates, dtype=float)
        if beta is not None:
            self.base = rng.beta(beta[0], beta[1], size=(replicates, tasks))
        elif resample:
            self.base = pool[rng.integers(0, len(pool), size=(replicates, tasks))]
        else:
            self.base = np.broadcast_to(pool, (replicates, tasks)).copy()
        self.u_off = rng.random((replicates, tasks, trials))
        self.u_on = rng.random((replicates, tasks, trials))
        self.off = (self.u_off < self.base[..., None]).sum(axis=2)
        self.alpha = Fraction(alpha)
        self._cache: dict[int, float] = {}

    def on_rates(self, step: int) -> np.ndarray:
        return np.minimum(1.0, self.base + step / GRID)

    def power(self, step: int) -> float:
        if step not in self._cache:
            on = (self.u_on < self.on_rates(step)[..., None]).sum(axis=2)
            diffs = on - self.off
            self._cache[step] = float(np.mean([sign_flip_pvalue(row) <= self.alpha for row in diffs]))
        return self._cache[step]


def detectable_difference(
    tasks: int,
    trials: int,
    rates: Sequence[float],
    *,
    resample: bool,
    baseline: str,
    alpha: float = DEFAULT_ALPHA,
    target: float = DEFAULT_TARGET,
    replicates: int = DEFAULT_REPLICATES,
    seed: int = DEFAULT_SEED,
    beta: tuple[float, float] | None = None,
    baseline_model: BaselineModel = "stated",
) -> DetectableDifference:
    """The smallest difference (on a 0.01 grid) whose simulated power reaches `target`.

    `rates` are the off success rates: one per task used as given (`resample=False`, then there
    must be `tasks` of them) or a pool drawn from with replacement for each simulated corpus; with
    `beta` = (a, b) each simulated task's off rate is drawn from Beta(a, b) instead (`rates` then
    only give the mean shown). Raises PowerError on impossible arguments.
    """
    rates = list(rates)
    _check(tasks, trials, alpha, target, replicates, rates)
    if not resample and len(rates) != tasks:
        raise PowerError(f"baseline: {len(rates)} per-task rates given for {tasks} tasks; give one per task or resample")
    if beta is not None and not (beta[0] > 0 and beta[1] > 0):
        raise PowerError(f"beta: both shape parameters must be positive, got {beta}")
    sim = _Simulation(tasks, trials, rates, resample, alpha, replicates, seed, beta)
    low, high = 0, GRID
    if sim.power(high) < target:
        found = None
    else:
        while high - low > 1:  # power(high) >= target throughout; the search assumes power rises with d (power_below shows the step)
            middle = (low + high) // 2
            if sim.power(middle) >= target:
                high = middle
            else:
                low = middle
        found = 0 if sim.power(0) >= target else high
    step = GRID if found is None else found
    power = sim.power(step)
    realized = float(np.mean(sim.on_rates(step) - sim.base))
    source = ("drawn from Beta({:.3g}, {:.3g}) fitted to".format(*beta) if beta is not None
              else "drawn with replacement from" if resample and len(set(rates)) > 1 else "fixed at")
    method = (f"{replicates} simulated corpora of {tasks} tasks x {trials} trial(s) per condition, off rates {source} {baseline}, "
              f"on = min(1, off + d); two-sided exact sign-flip test over tasks at alpha {alpha}; d on a 0.01 grid, "
              f"common random numbers across d, seed {seed}")
    return DetectableDifference(
        tasks=tasks, trials=trials, alpha=alpha, target_power=target, baseline=baseline, baseline_mean=float(np.mean(rates)),
        baseline_model=baseline_model,
        difference=None if found is None else found / GRID, realized_difference=None if found is None else realized,
        power=power, power_standard_error=math.sqrt(power * (1 - power) / replicates),
        power_below=None if found in (None, 0) else sim.power(step - 1), null_power=sim.power(0),
        replicates=replicates, seed=seed, method=method,
    )


def observed_off_rates(attempts: Sequence[Attempted]) -> dict[str, float]:
    """Per-task success rate of the gradable `off` attempts."""
    return {task: passes / gradable for task, (passes, gradable) in observed_off_counts(attempts).items()}


def observed_off_counts(attempts: Sequence[Attempted]) -> dict[str, tuple[int, int]]:
    """Per-task (passes, gradable attempts) of the gradable `off` attempts."""
    counts: dict[str, list[int]] = {}
    for a in attempts:
        if a.condition == "off" and a.outcome != "ungradable":
            counts.setdefault(a.task_id, []).append(a.outcome == "pass")
    return {task: (sum(passed), len(passed)) for task, passed in sorted(counts.items())}


def fit_beta_binomial(counts: Sequence[tuple[int, int]]) -> tuple[float, float | None]:
    """(mean, intra-task correlation rho) of per-task (passes, attempts) by the method of moments.

    rho = 1 / (a + b + 1) of the Beta the tasks' true rates come from; None when the counts show
    no spread beyond binomial noise (or cannot: one attempt per task, or a mean of 0 or 1).
    """
    rates = np.array([k / n for k, n in counts], dtype=float)
    sizes = np.array([n for _, n in counts], dtype=float)
    mean = float(rates.mean())
    n = float(len(sizes) / np.sum(1.0 / sizes))  # harmonic mean of the attempts per task
    if len(rates) < 2 or n <= 1 or mean in (0.0, 1.0):
        return mean, None
    spread = float(rates.var(ddof=1))
    rho = (n * spread / (mean * (1 - mean)) - 1) / (n - 1)
    return mean, min(rho, 0.999) if rho > 0 else None


def run_detectable_difference(attempts: Sequence[Attempted], *, tasks: int | None = None, trials: int | None = None, run_label: str = "the run",
                              replicates: int = DEFAULT_REPLICATES, seed: int = DEFAULT_SEED, alpha: float = DEFAULT_ALPHA,
                              target: float = DEFAULT_TARGET) -> DetectableDifference:
    """`detectable_difference` with off rates fitted to the observed per-task off counts of a run's attempts.

    The true off rates are drawn from a beta-binomial fitted to the counts (`fit_beta_binomial`), or
    fixed at the observed mean when the counts show no spread beyond binomial noise: observed rates
    carry sampling noise, and taking them as true understates power (a task seen passing once cannot
    improve). `tasks` defaults to the run's tasks with a gradable off attempt, `trials` to the most
    gradable off attempts of one task. Raises PowerError when the run has no gradable off attempt.
    """
    counts = observed_off_counts(attempts)
    if not counts:
        raise PowerError(f"{run_label}: no gradable off attempt, so there is no observed baseline; state one with --baseline")
    mean, rho = fit_beta_binomial(list(counts.values()))
    observed = f"observed over {len(counts)} tasks of {run_label} (mean {mean:.2f}"
    if rho is None:
        model: BaselineModel = "observed-mean"
        beta = None
        baseline = f"{observed}; every task at that mean: no spread beyond binomial noise to fit)"
    else:
        model, scale = "observed-beta", 1 / rho - 1
        beta = (mean * scale, (1 - mean) * scale)
        baseline = f"{observed}; true rates drawn from a fitted beta-binomial, intra-task correlation {rho:.2f})"
    return detectable_difference(
        tasks or len(counts), trials or max(n for _, n in counts.values()), [mean], resample=True, baseline=baseline,
        alpha=alpha, target=target, replicates=replicates, seed=seed, beta=beta, baseline_model=model,
    )
