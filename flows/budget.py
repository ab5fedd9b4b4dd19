"""The budget guard as Prefect tasks: run before every paid stage and between arms.

No retries and no cache: a guard decision is about this moment's balance, and a retried or cached
"allowed" could let an arm spend twice without a fresh check. Every decision, allowed or not, is
stored under `runs/<run_id>/budget/` before the task returns or raises `BudgetStop`.

Wiring in a flow (one paid agent's pair):

    guard = PairGuard(budget_config_path, artifact_root, run_id, agent="claude-code")
    for spec in arm_specs:
        guard.before_arm(declared_spent_usd=sum(r.cost_usd for r in done))   # raises BudgetStop
        done.extend(run_arm(spec))

(`flows.paired.paid_arms` runs several arms at once, each in flight reserving the arm ceiling.)
"""

from __future__ import annotations

import os
import re
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path

from flows.runtime.settings import configure_prefect

configure_prefect()

from prefect import task  # noqa: E402
from prefect.cache_policies import NO_CACHE  # noqa: E402

from tasks_lib.artifacts import open_store, run_key  # noqa: E402
from tasks_lib.budget import (  # noqa: E402
    BudgetConfig,
    BudgetStop,
    GuardDecision,
    check_drain,
    load_budget_config,
    open_source,
    preflight,
)
from tasks_lib.run.layout import BUDGET_FOLDER  # noqa: E402


def decision_key(run_id: str, sequence: int, decision: GuardDecision, label: str) -> str:
    """Artifact key of one decision: `runs/<run_id>/budget/<seq>-<phase>-<label>.json`."""
    safe = re.sub(r"[^A-Za-z0-9._-]+", "-", label).strip("-") or "pair"
    return run_key(run_id, BUDGET_FOLDER, f"{sequence:04d}-{decision.phase}-{safe}.json")


def record_decision(artifact_root: str, run_id: str, decision: GuardDecision, label: str) -> str:
    """Store the decision with the run's artifacts (next free sequence number); return its key."""
    store = open_store(artifact_root)
    sequence = len(store.list_keys(run_key(run_id, BUDGET_FOLDER) + "/"))
    key = decision_key(run_id, sequence, decision, label)
    store.put_json(key, decision)
    return key


def _load(budget_config: str) -> tuple[BudgetConfig, Path]:
    path = Path(budget_config)
    return load_budget_config(path), path.resolve().parent


def _enforce(decision: GuardDecision, label: str) -> GuardDecision:
    if not decision.allowed:
        raise BudgetStop(decision, f"budget guard stopped {label} ({decision.phase}): {decision.reason}")
    return decision


@task(name="budget-preflight", retries=0, cache_policy=NO_CACHE, persist_result=False)
def budget_preflight(budget_config: str, artifact_root: str, run_id: str, label: str) -> GuardDecision:
    """Steps 1-3 before a paid pair starts; stores the decision, raises BudgetStop when refused."""
    config, folder = _load(budget_config)
    now = datetime.now(UTC)
    decision = preflight(config, open_source(config, folder, os.environ, now), os.environ.get(config.key_env), now)
    record_decision(artifact_root, run_id, decision, label)
    return _enforce(decision, label)


@task(name="budget-between-arms", retries=0, cache_policy=NO_CACHE, persist_result=False)
def budget_between_arms(
    budget_config: str, artifact_root: str, run_id: str, label: str, start: GuardDecision, declared_spent_usd: float
) -> GuardDecision:
    """Step 4 (and step 1 again) before the next arm; stores the decision, raises BudgetStop when refused."""
    config, folder = _load(budget_config)
    now = datetime.now(UTC)
    source = open_source(config, folder, os.environ, now)
    decision = check_drain(config, source, os.environ.get(config.key_env), start, declared_spent_usd, config.arm_ceiling_usd, now)
    record_decision(artifact_root, run_id, decision, label)
    return _enforce(decision, label)


class PairGuard:
    """The guard for one paid agent's pair: preflight once, then a drain check before every arm.

    Arms may run concurrently: each arm in flight reserves the arm ceiling, and the spend declared to
    the drain check is what finished arms recorded plus those reservations, so the observed drain is
    still checked against the most the run can have spent, and the cap check against the most it can
    spend with the next arm. With one arm in flight at a time this is the sequential guard exactly."""

    def __init__(self, budget_config: str | Path, artifact_root: str, run_id: str, agent: str) -> None:
        self.budget_config = str(budget_config)
        self.artifact_root = artifact_root
        self.run_id = run_id
        self.agent = agent
        self.start: GuardDecision | None = None
        self.arms = 0

    def before_arm(self, declared_spent_usd: float) -> GuardDecision:
        """Pass the guard before the next arm (the first call runs the preflight first).

        `declared_spent_usd` is what this pair's finished arms recorded as spent. Raises BudgetStop."""
        if self.start is None:
            self.start = budget_preflight(self.budget_config, self.artifact_root, self.run_id, self.agent)
        label = f"{self.agent}-arm{self.arms}"
        decision = budget_between_arms(self.budget_config, self.artifact_root, self.run_id, label, self.start, declared_spent_usd)
        self.arms += 1
        return decision

    @cached_property
    def arm_ceiling_usd(self) -> float:
        """The budget's most one arm may spend (what an arm in flight reserves)."""
        return _load(self.budget_config)[0].arm_ceiling_usd

    @cached_property
    def pair_cap_usd(self) -> float:
        """The budget's most the pair may spend."""
        return _load(self.budget_config)[0].pair_cap_usd

    def fits_another(self, finished_spent_usd: float, in_flight: int) -> bool:
        """Whether one more arm's reservation fits the pair cap beside `in_flight` reserved arms; when
        it does not and arms are in flight, wait for one to finish before asking the guard."""
        return finished_spent_usd + (in_flight + 1) * self.arm_ceiling_usd <= self.pair_cap_usd + 1e-9
