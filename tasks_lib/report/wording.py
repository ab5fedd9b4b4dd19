"""How the report, the Markdown digest and the CLI state a figure: one unit per kind, p-values with
their resolution, the MUI rule and the power figure, each said once.

- A difference of two rates (success difference, net MUI, a lane's delta, the harness gap, damage
  against off) is in percentage points, `pp`; a rate or share (pass rate, delivery, a MUI
  component) is in percent, `%`. Nothing mixes the two.
- Counts are raw: `38/44`, never the reduced `19/22`.
- A sign-flip p-value says how it was counted. `exact` only when every sign assignment was
  enumerated; above `stats.SIGN_FLIP_EXACT_MAX` tasks a seeded Monte Carlo sample was, and its
  smallest possible p (only the observed assignment as extreme: 2 / (draws + 1)) is a floor, not a
  measurement: it reads `p < 0.0001 (20,000 draws)`.
"""

from __future__ import annotations

import math
import re

from tasks_lib.analysis.grading import COST_SAVING_FACTOR
from tasks_lib.analysis.headline import Effect, MuiEffect
from tasks_lib.analysis.power import DetectableDifference

PP = "pp"
"""The unit of a difference of two rates: percentage points."""
EXACT_PATTERN = re.compile(r"all 2\^\d+ = (\d+) sign assignments")
"""How `stats.sign_flip_test` names an enumerated test in a `method` text (group: assignments counted)."""
DRAWS_PATTERN = re.compile(r"Monte Carlo sample of (\d+) seeded random sign assignments")
"""How `stats.sign_flip_test` names a sampled test in a `method` text (group: the draws)."""
SAVING_FACTOR = f"{float(COST_SAVING_FACTOR):g}x"
"""`grading.COST_SAVING_FACTOR` as the report writes it (`1.5x`)."""
MUI_RULE = (
    "Net MUI is, per task, (success lifts + cost savings - harms) / gradable on attempts, averaged over tasks. "
    "An on attempt is compared with the off attempt of the same task and trial, and counts only when its planted "
    "memory was confirmed delivered (an undelivered one stays in the denominator and counts as nothing): a success "
    "lift when on passed and off failed; a cost saving when both passed and off used at least "
    f"{SAVING_FACTOR} on's tokens; a harm when off passed and on failed, or both passed and on used at least "
    f"{SAVING_FACTOR} off's tokens. The {SAVING_FACTOR} token rule (grading.COST_SAVING_FACTOR) is the same "
    "both ways: a token difference under it is neither a saving nor a harm."
)
"""The rule behind net MUI, stated wherever the figure is."""


def points(value: float | None, digits: int = 1) -> str:
    """A difference of rates (a fraction, -1 to 1) in percentage points: `+12.5 pp`; `n/a` for None."""
    return "n/a" if value is None else f"{value * 100:+.{digits}f} {PP}"


def percent(value: float | None, digits: int = 1) -> str:
    """A rate or share (a fraction, 0 to 1) in percent: `12.5%`; `n/a` for None."""
    return "n/a" if value is None else f"{value * 100:.{digits}f}%"


def raw_rate(k: int, n: int) -> str:
    """Raw counts with their rate: `38/44 (86%)`, never reduced; `0/0 (n/a)` without attempts."""
    return f"{k}/{n} ({k / n:.0%})" if n else f"{k}/{n} (n/a)"


def _floor_bound(floor: float) -> str:
    """The smallest one-significant-digit decimal above `floor`, as text (`2/20001` -> `0.0001`)."""
    exponent = math.floor(math.log10(floor))
    mantissa = math.ceil(round(floor / 10**exponent, 9))
    if mantissa * 10**exponent <= floor:
        mantissa += 1
    if mantissa == 10:
        mantissa, exponent = 1, exponent + 1
    return f"{mantissa * 10**exponent:.{max(0, -exponent)}f}"


def p_text(p: float | None, exact: bool, assignments: int) -> str:
    """A sign-flip p-value for running text, with how it was counted.

    Enumerated: `p = 0.0039 (exact)`, `p < 0.001 (exact)`. Sampled (`assignments` = draws + the
    observed one): `p = 0.012 (Monte Carlo, 20,000 draws)`, or at the sample's floor
    `p < 0.0001 (20,000 draws)`. None or nothing counted: `p not tested`.
    """
    if p is None or assignments == 0:
        return "p not tested"
    if exact:
        return "p < 0.001 (exact)" if p < 0.001 else f"p = {p:.3g} (exact)"
    draws = assignments - 1
    floor = 2 / assignments
    if p <= floor * (1 + 1e-9):
        return f"p < {_floor_bound(floor)} ({draws:,} draws)"
    return f"p = {p:.2g} (Monte Carlo, {draws:,} draws)"


def effect_p(effect: Effect) -> str:
    """`p_text` of a headline effect."""
    return p_text(effect.p_value, effect.exact, effect.assignments)


def method_counting(method: str) -> tuple[bool, int] | None:
    """(exact, assignments counted) as a sign-flip `method` text states them; None when it names neither."""
    enumerated = EXACT_PATTERN.search(method)
    if enumerated:
        return True, int(enumerated.group(1))
    sampled = DRAWS_PATTERN.search(method)
    if sampled:
        return False, int(sampled.group(1)) + 1
    return None


def mui_p(mui: MuiEffect) -> str:
    """`p_text` of net MUI, read from its `method` (a MuiEffect records no counting fields)."""
    counting = method_counting(mui.method)
    if counting is None:
        return f"p = {mui.p_value:.3g}"
    return p_text(mui.p_value, *counting)


def effect_figure(effect: Effect, unit: str = PP, scale: float = 100, digits: int = 1) -> str:
    """An effect with its 95% interval in one unit: `+12.5 pp, 95% CI [+2.0, +23.0]`; or why it has none."""
    if effect.estimate is None:
        return "n/a (no task graded under both conditions)"
    text = f"{effect.estimate * scale:+,.{digits}f} {unit}"
    if effect.low is None and effect.high is None and effect.exploratory:
        return text
    low = "unbounded" if effect.low is None else f"{effect.low * scale:+,.{digits}f}"
    high = "unbounded" if effect.high is None else f"{effect.high * scale:+,.{digits}f}"
    return f"{text}, 95% CI [{low}, {high}]"


def share_figure(effect: Effect, of: str) -> str:
    """A share (a rate, 0 to 1) with its 95% interval, in percent, unsigned: `12.5% of pairs, 95% CI [3.0%, 40.0%]`."""
    if effect.estimate is None:
        return "n/a (no task graded under both conditions)"
    text = f"{percent(effect.estimate)} of {of}"
    if effect.low is None or effect.high is None:
        return text
    return f"{text}, 95% CI [{percent(effect.low)}, {percent(effect.high)}]"


def mui_figure(mui: MuiEffect) -> str:
    """Net MUI in pp with its interval and p, then its three components in % of on attempts, each with its 95%
    interval, and the raw counts."""
    return (f"net MUI {mui.net * 100:+.1f} {PP}, 95% CI [{mui.low * 100:+.1f}, {mui.high * 100:+.1f}], {mui_p(mui)}, "
            f"over {mui.tasks} tasks = success lift {percent(mui.success_lift)} "
            f"[{percent(mui.success_lift_low)}, {percent(mui.success_lift_high)}] + cost saving {percent(mui.cost_saving)} "
            f"[{percent(mui.cost_saving_low)}, {percent(mui.cost_saving_high)}] - harm {percent(mui.harm)} "
            f"[{percent(mui.harm_low)}, {percent(mui.harm_high)}] of on attempts "
            f"({mui.success_lifts} lift(s), {mui.cost_savings} saving(s), {mui.harms} harm(s) in {mui.on_attempts} gradable on attempts)")


def power_result(power: DetectableDifference, *, design: bool = True) -> str:
    """What the test can see: the smallest detectable success difference in pp, its power and Monte Carlo error;
    with `design`, the tasks and trials too (leave them out where `power.method`, which names them, follows)."""
    level = f"{power.target_power:.0%} power at the {power.alpha:.0%} level"
    where = f" with {power.tasks} tasks x {power.trials} trial(s)" if design else ""
    if power.difference is None:
        return (f"no success difference reaches {level}{where}: even +100 {PP} "
                f"gives power {power.power:.3f} (Monte Carlo SE {power.power_standard_error:.3f})")
    below = "" if power.power_below is None else f"; {power.power_below:.3f} at {power.difference * 100 - 1:+.0f} {PP}"
    return (f"smallest success difference detected with {level}: {power.difference * 100:+.0f} {PP}{where} "
            f"(power {power.power:.3f}, Monte Carlo SE {power.power_standard_error:.3f}{below})")


def power_capped(power: DetectableDifference) -> str | None:
    """Why the difference simulated is smaller than the one named (on rates capped at 100%); None when it is not."""
    if power.difference is None or power.realized_difference is None:
        return None
    if power.difference - power.realized_difference < 0.0005:
        return None
    return (f"a task's on rate is off + d capped at 100%, so at d = {power.difference * 100:+.0f} {PP} the mean difference "
            f"actually simulated is {power.realized_difference * 100:+.1f} {PP}")
