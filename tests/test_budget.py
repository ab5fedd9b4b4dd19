"""The money fence on a real ledger file: each of the four steps, fail-closed and fail-open paths."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tasks_lib.budget import (
    BudgetConfig,
    BudgetConfigError,
    BudgetError,
    Ledger,
    append_ledger_entry,
    check_drain,
    key_fingerprint,
    load_budget_config,
    load_ledger,
    open_source,
    preflight,
    write_ledger,
)
from tasks_lib.budget.errors import BalanceUnavailable
from tasks_lib.budget.sources import BalanceSource
from tasks_lib.errors import ContractError

KEY = "sk-eval-test-key-0001"
NOW = datetime(2026, 12, 2, 16, 0, tzinfo=UTC)


def make_config(tmp_path: Path, **overrides: object) -> BudgetConfig:
    settings: dict[str, object] = {
        "provider": "ledger",
        "key_env": "EVAL_KEY",
        "key_sha256": key_fingerprint(KEY),
        "production_reserve_usd": 50.0,
        "pair_cap_usd": 10.0, "arm_ceiling_usd": 5.0,
        "ledger_path": "ledger.json",
        **overrides,
    }
    return BudgetConfig.model_validate(settings)


def make_ledger(tmp_path: Path, balance: float = 100.0, ceiling: float | None = 20.0, status: str = "active") -> Path:
    path = tmp_path / "ledger.json"
    write_ledger(path, Ledger(opening_balance_usd=balance, key_ceiling_usd=ceiling, key_status=status))  # type: ignore[arg-type]
    return path


def guard_source(config: BudgetConfig, tmp_path: Path) -> BalanceSource:
    return open_source(config, tmp_path, {"EVAL_KEY": KEY}, NOW)


def preflight_on_ledger(tmp_path: Path, key: str = KEY, **ledger: object):
    """Preflight of the default configuration against a fresh ledger."""
    config = make_config(tmp_path)
    make_ledger(tmp_path, **ledger)  # type: ignore[arg-type]
    return preflight(config, guard_source(config, tmp_path), key, NOW)


def statuses(decision) -> dict[str, str]:
    return {s.step: s.status for s in decision.steps}


def test_preflight_passes_with_matching_key_ceiling_and_headroom(tmp_path: Path) -> None:
    decision = preflight_on_ledger(tmp_path)
    assert decision.allowed and decision.outcome == "pass"
    assert statuses(decision) == {"key-identity": "pass", "per-key-budget": "pass", "shared-headroom": "pass"}
    assert decision.balance_usd == 100.0 and decision.key_ceiling_usd == 20.0
    assert decision.key_sha256_prefix == key_fingerprint(KEY)[:12]
    assert KEY not in decision.model_dump_json()


@pytest.mark.parametrize("exported", ["sk-production-key", ""], ids=["other-key", "not-exported"])
def test_step1_key_identity_refuses_another_key(tmp_path: Path, exported: str) -> None:
    """A run cannot be billed to the production key by accident."""
    decision = preflight_on_ledger(tmp_path, exported)
    assert not decision.allowed and decision.outcome == "fail"
    assert statuses(decision) == {"key-identity": "fail", "per-key-budget": "skipped", "shared-headroom": "skipped"}
    assert decision.reason.startswith("key-identity")


def test_step2_key_without_external_ceiling_fails(tmp_path: Path) -> None:
    decision = preflight_on_ledger(tmp_path, ceiling=None)
    assert not decision.allowed
    assert statuses(decision) == {"key-identity": "pass", "per-key-budget": "fail", "shared-headroom": "skipped"}
    assert "no external ceiling" in decision.reason


def test_step3_balance_must_cover_reserve_plus_pair_cap(tmp_path: Path) -> None:
    """55 < reserve 50 + cap 10: a run under its own cap would still eat the production reserve."""
    decision = preflight_on_ledger(tmp_path, balance=55.0)
    assert not decision.allowed
    assert statuses(decision)["shared-headroom"] == "fail"
    assert "short by $5.00" in decision.reason


def test_exactly_enough_headroom_passes(tmp_path: Path) -> None:
    assert preflight_on_ledger(tmp_path, balance=60.0).allowed


def test_revoked_ledger_key_fails_closed(tmp_path: Path) -> None:
    decision = preflight_on_ledger(tmp_path, status="revoked")
    assert not decision.allowed and "fail-closed" in decision.reason


def test_step4_drain_matching_declared_spend_continues(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    ledger = make_ledger(tmp_path)
    source = guard_source(config, tmp_path)
    start = preflight(config, source, KEY, NOW)
    append_ledger_entry(ledger, 3.0, "arm off")
    decision = check_drain(config, source, KEY, start, declared_spent_usd=3.0, next_arm_ceiling_usd=5.0, now=NOW)
    assert decision.allowed and decision.outcome == "pass"
    assert decision.observed_drain_usd == pytest.approx(3.0)
    assert decision.phase == "between-arms"


def test_step4_stops_when_more_drained_than_declared(tmp_path: Path) -> None:
    """Someone else spent on the shared account: the fence over-attributes and stops."""
    config = make_config(tmp_path, drain_tolerance_usd=0.5)
    ledger = make_ledger(tmp_path)
    source = guard_source(config, tmp_path)
    start = preflight(config, source, KEY, NOW)
    append_ledger_entry(ledger, 3.0, "arm off")
    append_ledger_entry(ledger, 1.0, "production assistant")
    decision = check_drain(config, source, KEY, start, declared_spent_usd=3.0, next_arm_ceiling_usd=1.0, now=NOW)
    assert not decision.allowed
    assert statuses(decision)["observed-drain"] == "fail"
    assert "more drained than declared" in decision.reason
    assert decision.observed_drain_usd == pytest.approx(4.0)


def test_step4_stops_when_next_arm_could_pass_the_pair_cap(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    ledger = make_ledger(tmp_path)
    source = guard_source(config, tmp_path)
    start = preflight(config, source, KEY, NOW)
    append_ledger_entry(ledger, 7.0, "arm off")
    decision = check_drain(config, source, KEY, start, declared_spent_usd=7.0, next_arm_ceiling_usd=4.0, now=NOW)
    assert not decision.allowed and "pass the pair cap" in decision.reason


class FlakySource(BalanceSource):
    """A source whose transport fails (stands in for a dropped connection; HTTP cases are in test_budget_http)."""

    name = "flaky"

    def read(self):  # type: ignore[override]
        raise BalanceUnavailable("GET http://127.0.0.1:9/api/v1/key: connection refused")


def test_transport_error_between_arms_fails_open_and_says_unobserved(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    make_ledger(tmp_path)
    start = preflight(config, guard_source(config, tmp_path), KEY, NOW)
    decision = check_drain(config, FlakySource(), KEY, start, declared_spent_usd=2.0, next_arm_ceiling_usd=3.0, now=NOW)
    assert decision.allowed and decision.outcome == "unobserved"
    assert statuses(decision)["observed-drain"] == "unobserved"
    assert decision.balance_usd is None and "connection refused" in decision.reason


def test_transport_error_between_arms_still_enforces_the_cap(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    make_ledger(tmp_path)
    start = preflight(config, guard_source(config, tmp_path), KEY, NOW)
    decision = check_drain(config, FlakySource(), KEY, start, declared_spent_usd=8.0, next_arm_ceiling_usd=3.0, now=NOW)
    assert not decision.allowed and "pass the pair cap" in decision.reason


def test_transport_error_at_preflight_does_not_start_the_pair(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    decision = preflight(config, FlakySource(), KEY, NOW)
    assert not decision.allowed
    assert statuses(decision) == {"key-identity": "pass", "per-key-budget": "unobserved", "shared-headroom": "unobserved"}


def test_drain_check_needs_an_allowing_preflight(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    make_ledger(tmp_path, balance=1.0)
    source = guard_source(config, tmp_path)
    refused = preflight(config, source, KEY, NOW)
    with pytest.raises(BudgetError, match="run preflight first"):
        check_drain(config, source, KEY, refused, 0.0, 1.0)


def test_decision_round_trips_as_json(tmp_path: Path) -> None:
    decision = preflight_on_ledger(tmp_path)
    again = type(decision).model_validate_json(decision.model_dump_json())
    assert again == decision


def test_ledger_append_is_atomic_and_valid(tmp_path: Path) -> None:
    ledger = make_ledger(tmp_path)
    append_ledger_entry(ledger, 1.25, "arm on")
    assert load_ledger(ledger).balance_usd == pytest.approx(98.75)
    assert [p.name for p in tmp_path.iterdir()] == ["ledger.json"]


def test_bad_ledger_names_file_and_field(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    (tmp_path / "ledger.json").write_text(json.dumps({"schema_version": 1, "opening_balance_usd": "lots", "key_ceiling_usd": 5}))
    with pytest.raises(ContractError, match=r"ledger\.json: field 'opening_balance_usd'"):
        preflight(config, guard_source(config, tmp_path), KEY, NOW)


def test_missing_ledger_is_an_error_not_a_pass(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    with pytest.raises(ContractError, match="does not exist"):
        preflight(config, guard_source(config, tmp_path), KEY, NOW)


def test_config_from_run_config_section(tmp_path: Path) -> None:
    path = tmp_path / "run.yaml"
    path.write_text(
        "name: nightly\nbudget:\n  provider: openrouter\n  key_env: OPENROUTER_API_KEY\n"
        f"  key_sha256: {key_fingerprint(KEY)}\n  production_reserve_usd: 25\n  pair_cap_usd: 4\n  arm_ceiling_usd: 2\n"
    )
    config = load_budget_config(path)
    assert config.provider == "openrouter" and config.pair_cap_usd == 4


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("provider: ledger\nkey_env: K\nkey_sha256: abc\nproduction_reserve_usd: 1\npair_cap_usd: 1\narm_ceiling_usd: 1\nledger_path: l.json\n",
         "field 'key_sha256'"),
        (f"provider: ledger\nkey_env: K\nkey_sha256: {'a' * 64}\nproduction_reserve_usd: 1\npair_cap_usd: 1\narm_ceiling_usd: 1\n",
         "needs 'ledger_path'"),
        (f"provider: openai-admin\nkey_env: K\nkey_sha256: {'a' * 64}\nproduction_reserve_usd: 1\npair_cap_usd: 1\narm_ceiling_usd: 1\n",
         "needs 'admin_key_env'"),
        (f"provider: paypal\nkey_env: K\nkey_sha256: {'a' * 64}\nproduction_reserve_usd: 1\npair_cap_usd: 1\narm_ceiling_usd: 1\n",
         "field 'provider'"),
        ("- just\n- a list\n", "expected a mapping"),
        ("provider: [unclosed\n", "not valid YAML"),
    ],
    ids=["bad-fingerprint", "ledger-without-path", "admin-without-key", "unknown-provider", "not-a-mapping", "bad-yaml"],
)
def test_bad_config_names_file_and_field(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "budget.yaml"
    path.write_text(text)
    with pytest.raises((ContractError, BudgetConfigError), match=message) as caught:
        load_budget_config(path)
    assert str(path) in str(caught.value)


def test_http_provider_needs_the_key_exported(tmp_path: Path) -> None:
    config = make_config(tmp_path, provider="openrouter", ledger_path=None)
    with pytest.raises(BudgetConfigError, match=r"\$EVAL_KEY is not set"):
        open_source(config, tmp_path, {}, NOW)


def test_arm_ceiling_above_pair_cap_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="exceeds 'pair_cap_usd'"):
        make_config(tmp_path, arm_ceiling_usd=11.0)


def test_run_config_names_a_budget_file_and_ledger_resolves_beside_it(tmp_path: Path) -> None:
    """A run config's `budget: {config: ...}` points at a budget file; its ledger path is relative to that file."""
    (tmp_path / "configs" / "budgets").mkdir(parents=True)
    make_ledger(tmp_path / "configs" / "budgets")
    (tmp_path / "configs" / "budgets" / "eval.yaml").write_text(
        f"provider: ledger\nkey_env: EVAL_KEY\nkey_sha256: {key_fingerprint(KEY)}\n"
        "production_reserve_usd: 50\npair_cap_usd: 10\narm_ceiling_usd: 5\nledger_path: ledger.json\n"
    )
    (tmp_path / "configs" / "nightly.yaml").write_text("name: nightly\nbudget:\n  config: budgets/eval.yaml\n")
    config = load_budget_config(tmp_path / "configs" / "nightly.yaml")
    assert Path(config.ledger_path or "") == (tmp_path / "configs" / "budgets" / "ledger.json").resolve()
    source = open_source(config, Path("/nonexistent"), {}, NOW)
    assert preflight(config, source, KEY, NOW).allowed


def test_ceiling_removed_between_arms_stops_the_pair(tmp_path: Path) -> None:
    config = make_config(tmp_path)
    ledger = make_ledger(tmp_path)
    source = guard_source(config, tmp_path)
    start = preflight(config, source, KEY, NOW)
    write_ledger(ledger, Ledger(opening_balance_usd=100.0, key_ceiling_usd=None))
    decision = check_drain(config, source, KEY, start, declared_spent_usd=0.0, next_arm_ceiling_usd=1.0, now=NOW)
    assert not decision.allowed and "no external ceiling" in decision.reason


def test_budget_stop_survives_pickling(tmp_path: Path) -> None:
    """Prefect may persist a failed task's exception; the decision must come back with it."""
    import pickle

    from tasks_lib.budget import BudgetStop

    decision = preflight_on_ledger(tmp_path, balance=1.0)
    again = pickle.loads(pickle.dumps(BudgetStop(decision, "stopped")))
    assert again.decision == decision and str(again) == "stopped"
