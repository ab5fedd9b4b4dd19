"""Property: with random arm costs and random foreign spending, the fence never lets a pair's
recorded spending pass its cap, and never stops a pair that stays inside every limit.

Each example runs the real guard over a real ledger file: preflight, then `check_drain` before each
arm; an allowed arm records its cost (at most its declared ceiling, which the agent enforces) in the
ledger, and other users of the shared account may spend too.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tasks_lib.budget import (
    BudgetConfig,
    Ledger,
    append_ledger_entry,
    check_drain,
    key_fingerprint,
    open_source,
    preflight,
    write_ledger,
)

KEY = "sk-eval-property"
NOW = datetime(2026, 12, 2, tzinfo=UTC)
money = st.floats(min_value=0.0, max_value=5.0, allow_nan=False).map(lambda x: round(x, 2))


@st.composite
def pairs(draw: st.DrawFn) -> tuple[float, float, float, list[tuple[float, float, float]]]:
    """(pair cap, tolerance, balance headroom above reserve+cap, arms as (ceiling, cost, foreign spend))."""
    cap = draw(st.floats(min_value=0.5, max_value=20.0).map(lambda x: round(x, 2)))
    tolerance = draw(st.sampled_from([0.0, 0.1, 1.0]))
    extra = draw(st.floats(min_value=0.0, max_value=50.0).map(lambda x: round(x, 2)))
    arms = []
    for _ in range(draw(st.integers(min_value=1, max_value=10))):
        ceiling = draw(money)
        cost = round(draw(st.floats(min_value=0.0, max_value=1.0)) * ceiling, 2)
        foreign = draw(st.one_of(st.just(0.0), money))
        arms.append((ceiling, cost, foreign))
    return cap, tolerance, extra, arms


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pairs())
def test_recorded_spending_never_passes_the_cap(example: tuple[float, float, float, list[tuple[float, float, float]]]) -> None:
    cap, tolerance, extra, arms = example
    reserve = 30.0
    with tempfile.TemporaryDirectory() as folder:
        ledger = Path(folder) / "ledger.json"
        write_ledger(ledger, Ledger(opening_balance_usd=reserve + cap + extra, key_ceiling_usd=cap))
        config = BudgetConfig(provider="ledger", key_env="K", key_sha256=key_fingerprint(KEY), production_reserve_usd=reserve,
                              pair_cap_usd=cap, arm_ceiling_usd=cap, drain_tolerance_usd=tolerance, ledger_path=str(ledger))
        source = open_source(config, Path(folder), {}, NOW)
        start = preflight(config, source, KEY, NOW)
        assert start.allowed
        recorded = 0.0
        ran = 0
        for ceiling, cost, foreign in arms:
            decision = check_drain(config, source, KEY, start, recorded, ceiling, NOW)
            if not decision.allowed:
                break
            append_ledger_entry(ledger, cost, "arm")
            recorded = round(recorded + cost, 2)
            ran += 1
            if foreign:
                append_ledger_entry(ledger, foreign, "someone else on the account")
            assert recorded <= cap + 1e-6, f"recorded {recorded} passed the cap {cap}"
        # Never too strict: a pair whose ceilings, plus what others spent (the fence over-attributes
        # the account's drain to the pair), fit the cap, with foreign spending within the tolerance,
        # runs every arm.
        fits = sum(c for c, _, _ in arms) + sum(f for _, _, f in arms) <= cap - 0.01
        if fits and sum(f for _, _, f in arms) <= tolerance - 0.01:
            assert ran == len(arms), f"stopped after {ran} of {len(arms)} arms although every limit held"
