"""Does the success-difference interval keep its promise? Coverage and type-I error by simulation with known truth.

    nice -n 10 .venv/bin/python benchmarks/sim_coverage.py [--replicates 2000] [--seed 31] [--check 5] [--mui-replicates 2000]

108 designs: 10/20/44 tasks x 1/3/5 trials x three baseline distributions x four effects. Each
simulated corpus draws its tasks' `off` success rates from the baseline distribution:

- `edge`: half the tasks near 0 (uniform on [0, 0.1]), half near 1 (uniform on [0.9, 1]);
- `uniform`: uniform on [0, 1];
- `middle`: uniform on [0.3, 0.7];

and sets each task's `on` rate to clip(off + d, 0, 1), with d = 0, +0.1, +0.3, or `mixed` (+0.3 on
a task with probability 0.6, else -0.3: memory helps some tasks and hurts others). Each task then
runs `trials` Bernoulli attempts per condition; the per-task difference of pass rates is what the
headline averages. The truth is the corpus's mean of clip(off + d) - off over its own tasks (what a
team claims about its corpus); coverage against the population mean is printed beside it.

Figures per design: coverage and mean width of memtrial's 95% interval
(`tasks_lib.analysis.stats.adjusted_mean_interval`, the one `headline.task_effect` gives a success
difference), the share of runs with fewer than five differing tasks (exploratory), and, in the 27
null designs, the rejection rate at 5% of the exact sign-flip test (`tasks_lib.analysis.power.sign_flip_pvalue`,
the p-value of `stats.sign_flip_test`). For 10-task designs the coverage of the interval that inverts
the sign-flip test (memtrial before issue #31) is shown too. The interval is computed by a vectorised
copy; `--check` rows per design are recomputed by memtrial's own functions and must agree (the
script exits 1 on any mismatch).

A second table: net MUI of an agent that ignores memory (on and off exchangeable) with delivery
confirmed on 90% of on attempts, as `tasks_lib.analysis.grading` counts lift, saving and harm
(all three need confirmed delivery) and as it counted them before (harm on every attempt): the
rejection rate of the sign-flip test of net at 5%, which must be at most 5% + Monte Carlo error.
One core, seeded; the same arguments give the same table.
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from fractions import Fraction

import numpy as np
from scipy.stats import t as student_t

from tasks_lib.analysis.power import sign_flip_pvalue
from tasks_lib.analysis.stats import (
    PSEUDO_TASKS,
    adjusted_mean_interval,
    sign_flip_test,
)

TASKS = (10, 20, 44)
TRIALS = (1, 3, 5)
BASELINES = ("edge", "uniform", "middle")
EFFECTS = ("0", "+0.1", "+0.3", "mixed")
ALPHA = 0.05
POPULATION_DRAWS = 400_000


def baseline_rates(kind: str, rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Off success rates of `shape` tasks drawn from the named baseline distribution."""
    if kind == "edge":
        return np.where(rng.random(shape) < 0.5, rng.uniform(0.0, 0.1, shape), rng.uniform(0.9, 1.0, shape))
    if kind == "uniform":
        return rng.uniform(0.0, 1.0, shape)
    return rng.uniform(0.3, 0.7, shape)


def on_rates(effect: str, off: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """On success rates: clip(off + d, 0, 1) with the named effect d per task."""
    if effect == "mixed":
        d = np.where(rng.random(off.shape) < 0.6, 0.3, -0.3)
    else:
        d = np.full(off.shape, float(effect))
    return np.clip(off + d, 0.0, 1.0)


def vector_interval(d: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """`adjusted_mean_interval(row, -1, 1)` for every row of `d` at once (the copy `--check` compares)."""
    n = d.shape[1]
    end, middle = PSEUDO_TASKS / 4, PSEUDO_TASKS / 2
    weight = n + PSEUDO_TASKS
    center = d.sum(axis=1) / weight
    squares = ((d - center[:, None]) ** 2).sum(axis=1) + end * ((1 + center) ** 2 + (1 - center) ** 2) + middle * center**2
    half = student_t.ppf(0.975, n - 1) * np.sqrt(squares / (weight - 1) / weight)
    estimate = d.mean(axis=1)
    return np.maximum(-1.0, np.minimum(center - half, estimate)), np.minimum(1.0, np.maximum(center + half, estimate))


def population_truth(baseline: str, effect: str, seed: int) -> float:
    """The population mean of clip(off + d) - off for a design, by a large seeded draw."""
    rng = np.random.default_rng(seed)
    off = baseline_rates(baseline, rng, (POPULATION_DRAWS,))
    return float(np.mean(on_rates(effect, off, rng) - off))


def check_rows(d: np.ndarray, trials: int, low: np.ndarray, high: np.ndarray, rows: int) -> int:
    """Recompute `rows` rows with memtrial's own functions; return the mismatches (printed)."""
    bad = 0
    for i in range(min(rows, d.shape[0])):
        values = [Fraction(round(v * trials), trials) for v in d[i]]
        real = adjusted_mean_interval(values, -1, 1)
        if abs(real.lower - low[i]) > 1e-9 or abs(real.upper - high[i]) > 1e-9:
            bad += 1
            print(f"  interval mismatch row {i}: vectorised [{low[i]}, {high[i]}], memtrial [{real.lower}, {real.upper}]")
        if len(values) <= 20:
            counts = [round(v * trials) for v in d[i]]
            if sign_flip_test(values).pvalue_exact != sign_flip_pvalue(counts):
                bad += 1
                print(f"  p-value mismatch row {i}")
    return bad


def hartigan_coverage(d: np.ndarray, trials: int, truth: np.ndarray) -> float:
    """Coverage of the interval that inverts the sign-flip test (memtrial before #31), by memtrial's `sign_flip_test`."""
    hits = 0
    for row, target in zip(d, truth, strict=True):
        result = sign_flip_test([Fraction(round(v * trials), trials) for v in row])
        low = -1.0 if result.lower_exact is None else max(-1.0, float(result.lower_exact))
        high = 1.0 if result.upper_exact is None else min(1.0, float(result.upper_exact))
        hits += low - 1e-12 <= target <= high + 1e-12
    return hits / len(d)


def design_row(tasks: int, trials: int, baseline: str, effect: str, replicates: int, seed: int, check: int) -> tuple[dict[str, object], int]:
    """Simulate one design; its figures and the number of check mismatches."""
    rng = np.random.default_rng(seed)
    off = baseline_rates(baseline, rng, (replicates, tasks))
    on = on_rates(effect, off, rng)
    diff = (rng.binomial(trials, on) - rng.binomial(trials, off)) / trials
    truth = (on - off).mean(axis=1)
    low, high = vector_interval(diff)
    population = population_truth(baseline, effect, seed + 1)
    row: dict[str, object] = {
        "tasks": tasks, "trials": trials, "baseline": baseline, "effect": effect,
        "coverage": float(np.mean((low - 1e-12 <= truth) & (truth <= high + 1e-12))),
        "coverage_population": float(np.mean((low - 1e-12 <= population) & (population <= high + 1e-12))),
        "width": float(np.mean(high - low)),
        "exploratory": float(np.mean((diff != 0).sum(axis=1) < 5)),
        "hartigan": hartigan_coverage(diff, trials, truth) if tasks == 10 else None,
        "type_i": None,
    }
    if effect == "0":
        counts = np.rint(diff * trials).astype(np.int64)
        row["type_i"] = float(np.mean([sign_flip_pvalue(r) <= Fraction(ALPHA).limit_denominator() for r in counts]))
    return row, check_rows(diff, trials, low, high, check)


def null_mui_rejection(tasks: int, trials: int, delivery: float, replicates: int, seed: int) -> tuple[float, float]:
    """Rejection rate at 5% of the sign-flip test of net MUI for a memory-ignoring agent: (now, before #31)."""
    rng = np.random.default_rng(seed)
    rate = rng.uniform(0.0, 1.0, (replicates, tasks, 1))
    on_pass = rng.random((replicates, tasks, trials)) < rate
    off_pass = rng.random((replicates, tasks, trials)) < rate
    on_tokens = rng.lognormal(8.0, 0.5, (replicates, tasks, trials))
    off_tokens = rng.lognormal(8.0, 0.5, (replicates, tasks, trials))
    delivered = rng.random((replicates, tasks, trials)) < delivery
    credit = delivered & on_pass & (~off_pass | (off_tokens >= 1.5 * on_tokens))
    harm_any = off_pass & (~on_pass | (on_tokens >= 1.5 * off_tokens))
    rates = []
    for harm in (delivered & harm_any, harm_any):
        net = (credit.astype(np.int64) - harm.astype(np.int64)).sum(axis=2)
        rates.append(float(np.mean([sign_flip_pvalue(r) <= Fraction(1, 20) for r in net])))
    return rates[0], rates[1]


def _cell(value: object) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--replicates", type=int, default=2000, help="simulated corpora per design (default 2000)")
    parser.add_argument("--seed", type=int, default=31, help="seed of the first design; design i uses seed + 1000 i")
    parser.add_argument("--check", type=int, default=5, help="rows per design recomputed by memtrial's functions (default 5)")
    parser.add_argument("--mui-replicates", type=int, default=2000, help="simulated runs per null-MUI design (default 2000)")
    args = parser.parse_args(argv)
    started = time.monotonic()
    columns = ["tasks", "trials", "baseline", "effect", "coverage", "coverage_population", "width", "exploratory", "hartigan", "type_i"]
    print("| " + " | ".join(columns) + " |")
    print("|" + "---|" * len(columns))
    mismatches, rows = 0, []
    index = 0
    for tasks in TASKS:
        for trials in TRIALS:
            for baseline in BASELINES:
                for effect in EFFECTS:
                    row, bad = design_row(tasks, trials, baseline, effect, args.replicates, args.seed + 1000 * index, args.check)
                    index += 1
                    mismatches += bad
                    rows.append(row)
                    print("| " + " | ".join(_cell(row[c]) for c in columns) + " |", flush=True)
    coverage = [float(r["coverage"]) for r in rows]  # type: ignore[arg-type]
    type_i = [float(r["type_i"]) for r in rows if r["type_i"] is not None]  # type: ignore[arg-type]
    se = math.sqrt(0.95 * 0.05 / args.replicates)
    print(f"\nminimum coverage {min(coverage):.3f} (Monte Carlo SE {se:.4f}); maximum type-I error {max(type_i):.3f}; "
          f"{args.check} rows per design checked against memtrial's functions: {mismatches} mismatch(es)")
    print("\n| tasks | trials | delivery | net-MUI rejection now | before #31 |\n|---|---|---|---|---|")
    for tasks, trials in ((44, 5), (44, 10), (100, 5)):
        now, before = null_mui_rejection(tasks, trials, 0.9, args.mui_replicates, args.seed + tasks * trials)
        print(f"| {tasks} | {trials} | 0.9 | {now:.3f} | {before:.3f} |", flush=True)
    print(f"\n{time.monotonic() - started:.0f} s")
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
