"""The money fence: four checks before and during a paid pair, each decision a typed record.

1. key identity: the exported key's SHA-256 equals the configured fingerprint;
2. per-key budget: the provider says the key has an external ceiling (none fails);
3. shared headroom: the balance covers the production reserve plus the acknowledged pair cap;
4. observed drain: before each further arm, re-read the balance; stop if it dropped by more than the
   run declared (plus tolerance), or if the next arm could take the pair past its cap or the balance
   into the reserve.

Failure modes are asymmetric on purpose. A rejected key (401/403) fails closed everywhere: the key
changed under the run. An unreadable balance (transport error) between arms fails open and the
decision says `unobserved`, because a pair already paid for should not be abandoned over one flaky
GET; the cap is still enforced from the run's own declared spending. At preflight nothing has been
spent yet, so an unreadable balance does not start the pair.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime

from tasks_lib.budget.contracts import BalanceReading, BudgetConfig, GuardDecision, StepResult
from tasks_lib.budget.errors import BalanceUnavailable, BudgetError, KeyRejected
from tasks_lib.budget.sources import BalanceSource

EPSILON = 1e-6
"""Comparisons allow a millionth of a dollar of float noise, no more."""


def key_fingerprint(api_key: str) -> str:
    """SHA-256 (hex) of the key's UTF-8 bytes, as configured in `key_sha256`."""
    return hashlib.sha256(api_key.encode("utf-8")).hexdigest()


def _money(value: float) -> str:
    return f"${value:,.2f}"


def check_key_identity(config: BudgetConfig, api_key: str | None) -> StepResult:
    """Step 1: the exported key is the evaluation key the configuration fingerprints."""
    if not api_key:
        return StepResult(step="key-identity", status="fail", detail=f"${config.key_env} is not exported")
    actual = key_fingerprint(api_key)
    if actual != config.key_sha256:
        return StepResult(
            step="key-identity",
            status="fail",
            detail=f"${config.key_env} has fingerprint {actual[:12]}..., the configuration expects "
            f"{config.key_sha256[:12]}...; refusing to bill another key",
        )
    return StepResult(step="key-identity", status="pass", detail=f"${config.key_env} matches fingerprint {actual[:12]}...")


def _decision(
    config: BudgetConfig,
    source: BalanceSource,
    api_key: str | None,
    phase: str,
    steps: list[StepResult],
    reading: BalanceReading | None,
    now: datetime,
    **extra: object,
) -> GuardDecision:
    failed = next((s for s in steps if s.status == "fail"), None)
    unobserved = next((s for s in steps if s.status == "unobserved"), None)
    if failed is not None:
        allowed, outcome, reason = False, "fail", f"{failed.step}: {failed.detail}"
    elif unobserved is not None and phase == "preflight":
        allowed, outcome, reason = False, "fail", f"{unobserved.step}: {unobserved.detail}; nothing is spent yet, so the pair does not start"
    elif unobserved is not None:
        allowed, outcome, reason = True, "unobserved", f"{unobserved.step}: {unobserved.detail}; continuing (fail-open), the check did not run"
    else:
        allowed, outcome, reason = True, "pass", "every check passed"
    return GuardDecision(
        phase=phase,  # type: ignore[arg-type]
        allowed=allowed,
        outcome=outcome,  # type: ignore[arg-type]
        reason=reason,
        steps=tuple(steps),
        provider=config.provider,
        source=source.name,
        key_sha256_prefix=key_fingerprint(api_key)[:12] if api_key else "",
        balance_usd=reading.balance_usd if reading else None,
        key_ceiling_usd=reading.key_ceiling_usd if reading else None,
        production_reserve_usd=config.production_reserve_usd,
        pair_cap_usd=config.pair_cap_usd,
        checked_at=now.astimezone(UTC).isoformat(timespec="seconds"),
        **extra,  # type: ignore[arg-type]
    )


def _skipped(*names: str, why: str) -> list[StepResult]:
    return [StepResult(step=name, status="skipped", detail=why) for name in names]  # type: ignore[arg-type]


def preflight(config: BudgetConfig, source: BalanceSource, api_key: str | None, now: datetime | None = None) -> GuardDecision:
    """Steps 1-3 before a paid pair may start; the decision carries the starting balance."""
    now = now or datetime.now(UTC)
    identity = check_key_identity(config, api_key)
    if identity.status == "fail":
        steps = [identity, *_skipped("per-key-budget", "shared-headroom", why="key identity failed")]
        return _decision(config, source, api_key, "preflight", steps, None, now)
    try:
        reading = source.read()
    except KeyRejected as error:
        steps = [identity, StepResult(step="per-key-budget", status="fail", detail=f"{error} (fail-closed)"),
                 *_skipped("shared-headroom", why="the key was rejected")]
        return _decision(config, source, api_key, "preflight", steps, None, now)
    except BalanceUnavailable as error:
        steps = [identity, StepResult(step="per-key-budget", status="unobserved", detail=str(error)),
                 StepResult(step="shared-headroom", status="unobserved", detail="balance not read")]
        return _decision(config, source, api_key, "preflight", steps, None, now)
    ceiling = check_key_ceiling(reading)
    headroom = check_headroom(config, reading) if ceiling.status == "pass" else _skipped("shared-headroom", why="the key has no ceiling")[0]
    return _decision(config, source, api_key, "preflight", [identity, ceiling, headroom], reading, now)


def check_key_ceiling(reading: BalanceReading) -> StepResult:
    """Step 2: the provider reports an external ceiling for the key."""
    if reading.key_ceiling_usd is None:
        return StepResult(step="per-key-budget", status="fail",
                          detail=f"{reading.source} reports no external ceiling for this key; set a limit on the key first")
    return StepResult(step="per-key-budget", status="pass", detail=f"key ceiling {_money(reading.key_ceiling_usd)}")


def check_headroom(config: BudgetConfig, reading: BalanceReading) -> StepResult:
    """Step 3: balance >= production reserve + acknowledged pair cap."""
    needed = config.production_reserve_usd + config.pair_cap_usd
    figures = (f"balance {_money(reading.balance_usd)}, reserve {_money(config.production_reserve_usd)} "
               f"+ pair cap {_money(config.pair_cap_usd)} = {_money(needed)}")
    if reading.balance_usd + EPSILON < needed:
        return StepResult(step="shared-headroom", status="fail", detail=f"{figures}: short by {_money(needed - reading.balance_usd)}")
    return StepResult(step="shared-headroom", status="pass", detail=figures)


def check_drain(
    config: BudgetConfig,
    source: BalanceSource,
    api_key: str | None,
    start: GuardDecision,
    declared_spent_usd: float,
    next_arm_ceiling_usd: float,
    now: datetime | None = None,
) -> GuardDecision:
    """Step 4 (with step 1 again) before each arm of a pair that passed `preflight`.

    `declared_spent_usd` is what the run itself recorded as spent so far; `next_arm_ceiling_usd` is
    the most the next arm may spend (the agent enforces it)."""
    if start.phase != "preflight" or not start.allowed or start.balance_usd is None:
        raise BudgetError("check_drain needs the allowing preflight decision of this pair (with its balance); run preflight first")
    if declared_spent_usd < 0 or next_arm_ceiling_usd < 0:
        raise BudgetError(f"declared spend ({declared_spent_usd}) and next arm ceiling ({next_arm_ceiling_usd}) must be >= 0")
    now = now or datetime.now(UTC)
    extra = {"start_balance_usd": start.balance_usd, "declared_spent_usd": declared_spent_usd,
             "next_arm_ceiling_usd": next_arm_ceiling_usd}
    identity = check_key_identity(config, api_key)
    if identity.status == "fail":
        steps = [identity, *_skipped("observed-drain", why="key identity failed")]
        return _decision(config, source, api_key, "between-arms", steps, None, now, **extra)
    try:
        reading = source.read()
    except KeyRejected as error:
        steps = [identity, StepResult(step="observed-drain", status="fail", detail=f"{error} (fail-closed: the key changed under the run)")]
        return _decision(config, source, api_key, "between-arms", steps, None, now, **extra)
    except BalanceUnavailable as error:
        over = _over_cap(config, declared_spent_usd, next_arm_ceiling_usd)
        status = "fail" if over else "unobserved"
        detail = over or f"balance unobserved ({error}); declared {_money(declared_spent_usd)} + next arm {_money(next_arm_ceiling_usd)} fits the cap"
        steps = [identity, StepResult(step="observed-drain", status=status, detail=detail)]  # type: ignore[arg-type]
        return _decision(config, source, api_key, "between-arms", steps, None, now, **extra)
    drain = start.balance_usd - reading.balance_usd
    steps = [identity, _drain_step(config, reading, drain, declared_spent_usd, next_arm_ceiling_usd)]
    return _decision(config, source, api_key, "between-arms", steps, reading, now, observed_drain_usd=drain, **extra)


def _over_cap(config: BudgetConfig, spent: float, next_arm: float) -> str | None:
    if spent + next_arm > config.pair_cap_usd + EPSILON:
        return (f"spent {_money(spent)} + next arm up to {_money(next_arm)} would pass the pair cap "
                f"{_money(config.pair_cap_usd)}")
    return None


def _drain_step(config: BudgetConfig, reading: BalanceReading, drain: float, declared: float, next_arm: float) -> StepResult:
    if reading.key_ceiling_usd is None:
        return StepResult(step="observed-drain", status="fail",
                          detail=f"{reading.source} now reports no external ceiling for the key; it changed under the run")
    figures = f"observed drain {_money(drain)}, declared {_money(declared)}"
    if drain > declared + config.drain_tolerance_usd + EPSILON:
        return StepResult(step="observed-drain", status="fail",
                          detail=f"{figures} (tolerance {_money(config.drain_tolerance_usd)}): more drained than declared; stopping")
    over = _over_cap(config, max(drain, declared), next_arm)
    if over:
        return StepResult(step="observed-drain", status="fail", detail=f"{figures}; {over}")
    if reading.balance_usd - next_arm + EPSILON < config.production_reserve_usd:
        return StepResult(step="observed-drain", status="fail",
                          detail=f"{figures}; balance {_money(reading.balance_usd)} minus next arm {_money(next_arm)} "
                          f"would reach the reserve {_money(config.production_reserve_usd)}")
    return StepResult(step="observed-drain", status="pass", detail=f"{figures}; next arm up to {_money(next_arm)} fits")
