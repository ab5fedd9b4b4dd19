"""Power of the task-clustered success test (tasks_lib.analysis.power), against answers known in closed form.

With one trial per task, a zero off rate and on rate d, a task's difference is 1 with probability
d and 0 otherwise; with k tasks at 1 the exact sign-flip p is 2^(1-k), so the test rejects at 5%
exactly when k >= 6, and its power is P(Binomial(T, d) >= 6). The simulation must recover that
curve, a huge effect must be detected with power 1, and no effect must be rejected at most at
alpha: a power figure that flatters a small corpus is the failure these tests prevent.
"""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import NamedTuple

import pytest

from flows.cli.main import main
from tasks_lib.analysis.power import (
    PowerError,
    detectable_difference,
    run_detectable_difference,
    sign_flip_pvalue,
)
from tasks_lib.analysis.stats import sign_flip_test


def binomial_tail(n: int, p: float, k: int) -> float:
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


@pytest.mark.parametrize("seed", range(40))
def test_pvalue_equals_the_headline_sign_flip_test(seed: int) -> None:
    """The fast null count must be the headline's test exactly, or the power is of another test."""
    rng = random.Random(seed)
    trials = rng.choice([1, 2, 3, 5])
    diffs = [rng.randint(-trials, trials) for _ in range(rng.randint(1, 14))]
    assert sign_flip_pvalue(diffs) == sign_flip_test([Fraction(d, trials) for d in diffs]).pvalue_exact


def test_pvalue_is_exact_beyond_int64_counts() -> None:
    """70 tasks: 2^70 assignments overflow int64; the count must still be exact."""
    diffs = [1] * 10 + [0] * 60
    assert sign_flip_pvalue(diffs) == 2 * 2**60 / 2**70


def test_power_follows_the_closed_form_with_one_trial_and_zero_baseline() -> None:
    tasks = 13
    result = detectable_difference(tasks, 1, [0.0], resample=True, baseline="stated 0.00", replicates=4000)
    exact = {d: binomial_tail(tasks, d / 100, 6) for d in range(101)}
    smallest = min(d for d, p in exact.items() if p >= 0.8)
    assert result.difference is not None
    assert abs(result.difference * 100 - smallest) <= 2, (result.difference, smallest)
    at = round(result.difference * 100)
    assert abs(result.power - exact[at]) <= 4 * result.power_standard_error + 1e-9
    assert result.null_power == 0.0, "with no effect and a zero baseline every difference is 0: p = 1, never a rejection"


def test_a_huge_effect_is_detected_with_power_one() -> None:
    result = detectable_difference(20, 3, [0.0], resample=True, baseline="stated 0.00", replicates=500)
    assert result.difference is not None and result.difference <= 0.3
    full = detectable_difference(20, 3, [0.0], resample=True, baseline="stated 0.00", replicates=500, target=0.99)
    assert full.difference is not None and full.power >= 0.99


def test_no_effect_is_rejected_at_most_at_alpha() -> None:
    """The test's size: at d = 0 the rejection rate is within Monte Carlo error of at most alpha."""
    result = detectable_difference(40, 3, [0.5], resample=True, baseline="stated 0.50", replicates=3000)
    se = math.sqrt(0.05 * 0.95 / 3000)
    assert result.null_power <= 0.05 + 3 * se
    assert result.null_power > 0.0, "a test that never rejects has no power to report"


def test_more_tasks_detect_smaller_differences() -> None:
    small = detectable_difference(13, 3, [0.3], resample=True, baseline="stated 0.30", replicates=800)
    large = detectable_difference(40, 3, [0.3], resample=True, baseline="stated 0.30", replicates=800)
    assert small.difference is not None and large.difference is not None
    assert large.difference < small.difference
    assert small.difference > 0.10, "13 tasks cannot see a 10-point difference with 80% power"


def test_unreachable_target_says_so_instead_of_a_number() -> None:
    """Two tasks cannot reach p <= 0.05 (smallest p is 2/4): no difference is detectable."""
    result = detectable_difference(2, 5, [0.0], resample=True, baseline="stated 0.00", replicates=200)
    assert result.difference is None and result.power == 0.0
    assert "no success difference reaches" in result.sentence()


def test_same_seed_same_figures_and_a_capped_baseline_reports_the_realized_difference() -> None:
    one = detectable_difference(30, 2, [0.9, 0.7], resample=True, baseline="x", replicates=300, seed=7)
    assert one == detectable_difference(30, 2, [0.9, 0.7], resample=True, baseline="x", replicates=300, seed=7)
    assert one.difference is not None and one.realized_difference is not None
    assert one.realized_difference <= one.difference


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tasks": 0}, "tasks: need at least 1"),
        ({"trials": 0}, "trials: need at least 1"),
        ({"rates": [1.5]}, "success rates must lie in [0, 1]"),
        ({"rates": []}, "no off rate"),
        ({"alpha": 1.0}, "alpha"),
    ],
    ids=["no-tasks", "no-trials", "rate-above-one", "no-rates", "alpha-one"],
)
def test_impossible_arguments_are_refused(kwargs: dict, message: str) -> None:
    args = {"tasks": 10, "trials": 1, "rates": [0.3], **kwargs}
    with pytest.raises(PowerError, match=message.replace("[", r"\[").replace("]", r"\]")):
        detectable_difference(args.pop("tasks"), args.pop("trials"), args.pop("rates"), resample=True, baseline="b", **args)


def test_power_command_from_a_stored_run_and_from_a_stated_baseline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tasks_lib.artifacts import LocalStore
    from test_grading import scenario_records, store_scenario

    root = tmp_path / "artifacts"
    store_scenario(LocalStore(root), scenario_records("scenario-run"))
    assert main(["power", "--run", "scenario-run", "--artifacts", str(root), "--json", "--replicates", "300"]) == 0
    own = json.loads(capsys.readouterr().out)
    assert (own["tasks"], own["trials"], own["difference"]) == (4, 2, None), "the run's own 4 tasks cannot detect anything"
    assert "observed over 4 tasks of run scenario-run" in own["baseline"]
    assert main(["power", "--run", "scenario-run", "--artifacts", str(root), "--tasks", "40", "--replicates", "300"]) == 0
    text = capsys.readouterr().out
    assert "smallest success difference detected with 80% power at the 5% level: +" in text and "Monte Carlo SE" in text
    assert main(["power", "--tasks", "13", "--trials", "3", "--baseline", "0.3", "--json", "--replicates", "300"]) == 0
    stated = json.loads(capsys.readouterr().out)
    assert stated["difference"] > 0.10 and stated["seed"] == 20261204 and stated["power_standard_error"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["power", "--tasks", "13", "--trials", "3"], "give exactly one baseline"),
        (["power", "--tasks", "13", "--trials", "3", "--baseline", "0.3", "--run", "x"], "give exactly one baseline"),
        (["power", "--baseline", "0.3"], "--tasks and --trials are required"),
        (["power", "--tasks", "13", "--trials", "3", "--baseline", "1.5"], "success rates must lie in [0, 1]"),
        (["power", "--run", "no-such-run"], "no-such-run"),
    ],
    ids=["no-baseline", "two-baselines", "no-design", "rate-above-one", "unknown-run"],
)
def test_bad_power_requests_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    assert main([*args, "--artifacts", str(tmp_path)] if "--run" in args else args) == 2
    captured = capsys.readouterr()
    assert message in captured.err and "Traceback" not in captured.err


class _Off(NamedTuple):
    """An off attempt as `run_detectable_difference` reads it."""

    task_id: str
    condition: str
    outcome: str


def _observed_run(true_rates: list[float], trials: int, seed: int) -> list[_Off]:
    rng = random.Random(seed)
    return [_Off(f"t{t}", "off", "pass" if rng.random() < rate else "fail") for t, rate in enumerate(true_rates) for _ in range(trials)]


@pytest.mark.parametrize("seed", range(3))
def test_one_trial_observed_baseline_agrees_with_the_stated_one(seed: int) -> None:
    """Prevents treating observed off rates as true ones: with one trial every observed rate is 0 or 1, a task
    seen at 1 cannot improve, and 20 tasks x 1 trial at a true 0.5 printed +57 to +92 points (truth about +45)."""
    stated = detectable_difference(20, 1, [0.5], resample=True, baseline="stated 0.50", replicates=300)
    observed = run_detectable_difference(_observed_run([0.5] * 20, 1, seed), replicates=300)
    assert observed.baseline_model == "observed-mean" and "every task at that mean" in observed.baseline
    assert stated.difference is not None and observed.difference is not None
    assert abs(observed.difference - stated.difference) <= 0.08, (observed.difference, stated.difference)


@pytest.mark.parametrize("seed", range(2))
def test_observed_baseline_of_spread_tasks_agrees_with_their_true_rates(seed: int) -> None:
    """Prevents the observed-baseline figure drifting from the truth when tasks differ in difficulty: a
    beta-binomial fitted to 20 tasks x 5 trials gives the figure their true rates give, within Monte Carlo error."""
    rng = random.Random(100 + seed)
    truth = [rng.betavariate(0.5, 0.8) for _ in range(20)]
    stated = detectable_difference(20, 5, truth, resample=False, baseline="the true rates", replicates=300)
    observed = run_detectable_difference(_observed_run(truth, 5, seed), replicates=300)
    assert observed.baseline_model == "observed-beta" and "fitted beta-binomial" in observed.baseline
    assert stated.difference is not None and observed.difference is not None
    assert abs(observed.difference - stated.difference) <= 0.05, (observed.difference, stated.difference)
