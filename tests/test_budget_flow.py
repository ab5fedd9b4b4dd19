"""The guard as Prefect tasks and as `memtrial budget`: real Prefect runs, real ledger, records in the artifact store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli.main import main
from tasks_lib.artifacts import open_store
from tasks_lib.budget import (
    BudgetStop,
    GuardDecision,
    Ledger,
    append_ledger_entry,
    key_fingerprint,
    write_ledger,
)

KEY = "sk-eval-flow-0001"


@pytest.fixture
def budget_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    write_ledger(tmp_path / "ledger.json", Ledger(opening_balance_usd=100.0, key_ceiling_usd=40.0))
    path = tmp_path / "budget.yaml"
    path.write_text(
        f"provider: ledger\nkey_env: MEMTRIAL_TEST_EVAL_KEY\nkey_sha256: {key_fingerprint(KEY)}\n"
        "production_reserve_usd: 60\npair_cap_usd: 10\narm_ceiling_usd: 4\nledger_path: ledger.json\n"
    )
    monkeypatch.setenv("MEMTRIAL_TEST_EVAL_KEY", KEY)
    return path


def test_pair_guard_records_every_decision_and_stops_at_the_cap(prefect_harness: None, budget_file: Path, tmp_path: Path) -> None:
    from prefect import flow

    from flows.budget import PairGuard

    root = str(tmp_path / "artifacts")
    ledger = budget_file.parent / "ledger.json"

    @flow
    def paid_pair() -> tuple[int, str]:
        guard = PairGuard(budget_file, root, "run-guard", agent="openai-chat")
        spent, arms = 0.0, 0
        try:
            for _ in range(5):
                guard.before_arm(spent)
                append_ledger_entry(ledger, 3.5, f"arm {arms}")  # the arm spends
                spent += 3.5
                arms += 1
        except BudgetStop as stop:
            return arms, stop.decision.reason  # type: ignore[attr-defined]
        return arms, ""

    arms, reason = paid_pair()
    # 3.5 + 3.5 = 7.0 spent; a third arm of up to 4.0 would pass the 10.0 cap.
    assert arms == 2 and "pass the pair cap" in reason
    store = open_store(root)
    keys = store.list_keys("runs/run-guard/budget/")
    assert [k.rsplit("/", 1)[1] for k in keys] == [
        "0000-preflight-openai-chat.json",
        "0001-between-arms-openai-chat-arm0.json",
        "0002-between-arms-openai-chat-arm1.json",
        "0003-between-arms-openai-chat-arm2.json",
    ]
    last = store.get_json(keys[-1], GuardDecision)
    assert not last.allowed and last.declared_spent_usd == 7.0 and last.observed_drain_usd == pytest.approx(7.0)


def test_refused_preflight_is_recorded_then_raises(prefect_harness: None, budget_file: Path, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from prefect import flow

    from flows.budget import budget_preflight

    monkeypatch.setenv("MEMTRIAL_TEST_EVAL_KEY", "sk-production-key")
    root = str(tmp_path / "artifacts")

    @flow
    def preflight_only() -> None:
        budget_preflight(str(budget_file), root, "run-refused", "claude-code")

    with pytest.raises(BudgetStop, match="key-identity"):
        preflight_only()
    keys = open_store(root).list_keys("runs/run-refused/budget/")
    assert len(keys) == 1 and not open_store(root).get_json(keys[0], GuardDecision).allowed


def test_cli_budget_check_allowed_and_refused(budget_file: Path, capsys: pytest.CaptureFixture[str],
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    assert main(["budget", "check", "--config", str(budget_file), "--json"]) == 0
    decision = json.loads(capsys.readouterr().out)
    assert decision["allowed"] and [s["status"] for s in decision["steps"]] == ["pass", "pass", "pass"]

    write_ledger(budget_file.parent / "ledger.json", Ledger(opening_balance_usd=65.0, key_ceiling_usd=40.0))
    assert main(["budget", "check", "--config", str(budget_file)]) == 1
    text = capsys.readouterr().out
    assert "REFUSED: shared-headroom" in text and "short by $5.00" in text


def test_cli_budget_errors_are_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMTRIAL_BUDGET_CONFIG", raising=False)
    assert main(["budget", "check"]) == 2
    assert "--config: missing" in capsys.readouterr().err
    assert main(["budget", "check", "--config", str(tmp_path / "nope.yaml")]) == 2
    error = capsys.readouterr().err
    assert "does not exist" in error and "Traceback" not in error


def test_cli_fingerprint_matches_config(budget_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["budget", "fingerprint", "--env", "MEMTRIAL_TEST_EVAL_KEY"]) == 0
    assert capsys.readouterr().out.strip() == key_fingerprint(KEY)


def test_nightly_stops_a_paid_agent_at_its_pair_cap(prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end: the nightly flow runs the free calibration agent, then a paid `command` agent whose
    every arm reports $3.00; with a $10 pair cap and $4 arm ceiling the guard stops it before an arm
    could take the pair past the cap, and every decision is in the artifact store."""
    from flows.nightly import nightly

    write_ledger(tmp_path / "ledger.json", Ledger(opening_balance_usd=100.0, key_ceiling_usd=40.0))
    (tmp_path / "budget.yaml").write_text(
        f"provider: ledger\nkey_env: MEMTRIAL_TEST_EVAL_KEY\nkey_sha256: {key_fingerprint(KEY)}\n"
        "production_reserve_usd: 60\npair_cap_usd: 10\narm_ceiling_usd: 4\nledger_path: ledger.json\n"
    )
    usage = json.dumps({"kind": "usage", "input_tokens": 10, "output_tokens": 5, "cost_usd": 3.0})
    config = tmp_path / "run.yaml"
    config.write_text(
        "name: budget-test\ntasks: [rotlog-keep-count, tabmill-delimiter]\nconditions: ['off', 'on']\nsuites: []\n"
        f"artifact_root: {tmp_path / 'artifacts'}\nbudget: {{config: budget.yaml}}\nrunner: {{workers: 1}}\n"
        f"agents:\n  - name: command\n    options: {{argv: [sh, -c, {json.dumps('echo ' + chr(39) + usage + chr(39))}]}}\n"
    )
    monkeypatch.setenv("MEMTRIAL_TEST_EVAL_KEY", KEY)
    run_id = "nightly-budget-test"
    with pytest.raises(BudgetStop, match="pass the pair cap"):
        nightly(config_path=str(config), run_id=run_id)

    store = open_store(tmp_path / "artifacts")
    keys = store.list_keys(f"runs/{run_id}-command/budget/")
    decisions = [store.get_json(k, GuardDecision) for k in keys]
    assert decisions[0].phase == "preflight" and decisions[0].allowed
    drains = decisions[1:]
    assert all(d.allowed for d in drains[:-1]) and not drains[-1].allowed
    spent = [d.declared_spent_usd for d in drains]
    assert spent == sorted(spent) and spent[0] == 0.0
    assert all(s % 3.0 == 0 for s in spent if s is not None), spent  # whole arms of $3.00 each
    assert (spent[-2] or 0) + 4.0 <= 10.0 < (spent[-1] or 0) + 4.0  # the last allowed arm fit, the next would not
    assert not store.list_keys(f"runs/{run_id}-calibration/budget/"), "the free agent needs no guard"


def paid_run(tmp_path: Path, pair_cap: float, run_id: str) -> Path:
    """A nightly config whose paid `command` agent sleeps 2 s per arm and reports $1.00 (arm ceiling $4),
    four arms on two workers; returns the config path."""
    write_ledger(tmp_path / "ledger.json", Ledger(opening_balance_usd=100.0, key_ceiling_usd=40.0))
    (tmp_path / "budget.yaml").write_text(
        f"provider: ledger\nkey_env: MEMTRIAL_TEST_EVAL_KEY\nkey_sha256: {key_fingerprint(KEY)}\n"
        f"production_reserve_usd: 50\npair_cap_usd: {pair_cap}\narm_ceiling_usd: 4\nledger_path: ledger.json\n"
    )
    usage = json.dumps({"kind": "usage", "input_tokens": 10, "output_tokens": 5, "cost_usd": 1.0})
    script = ("s=$(date +%s.%N); sleep 2; e=$(date +%s.%N); "
              "echo '{\"kind\": \"message\", \"text\": \"span '$s' '$e'\"}'; echo " + chr(39) + usage + chr(39))
    config = tmp_path / f"{run_id}.yaml"
    config.write_text(
        "name: budget-test\ntasks: [rotlog-keep-count, tabmill-delimiter]\nconditions: ['off', 'on']\nsuites: []\n"
        f"artifact_root: {tmp_path / 'artifacts'}\nbudget: {{config: budget.yaml}}\nrunner: {{workers: 2}}\n"
        f"agents:\n  - name: command\n    options: {{argv: [sh, -c, {json.dumps(script)}]}}\n"
    )
    return config


def arm_overlap(artifacts: Path, run_id: str) -> int:
    """Most arms of `run_id` whose agent was running at the same moment, from the spans each arm's
    agent printed into its stored transcript."""
    spans = []
    for transcript in (artifacts / "runs" / run_id / "attempts").rglob("transcript.json"):
        (line,) = [s["text"] for s in json.loads(transcript.read_text())["steps"] if s["text"].startswith("span ")]
        spans.append(tuple(float(x) for x in line.split()[1:]))
    assert len(spans) >= 2, spans
    return max(sum(1 for s, e in spans if s <= start < e) for start, _ in spans)


def test_paid_arms_run_concurrently_while_every_reservation_fits_the_pair_cap(
        prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure prevented: paid agents running one arm at a time whatever the cluster size. With a
    $10 cap and a $4 ceiling two arms fit in flight; every allowed decision declared the finished spend
    plus the in-flight reservations, and the next arm still fit the cap."""
    from flows.nightly import nightly

    monkeypatch.setenv("MEMTRIAL_TEST_EVAL_KEY", KEY)
    result = nightly(config_path=str(paid_run(tmp_path, 10.0, "paid-wide")), run_id="paid-wide")

    command = next(a for a in result.agents if a.agent == "command")
    assert command.attempts == 4
    assert arm_overlap(tmp_path / "artifacts", "paid-wide-command") == 2, "two paid arms fit the cap but never ran together"
    store = open_store(tmp_path / "artifacts")
    decisions = [store.get_json(k, GuardDecision) for k in store.list_keys("runs/paid-wide-command/budget/")]
    drains = [d for d in decisions if d.phase == "between-arms"]
    assert len(drains) == 4 and all(d.allowed for d in drains)
    assert all((d.declared_spent_usd or 0) + 4.0 <= 10.0 for d in drains)
    # finished arms alone never declare more than $3 before the fourth arm: $4 or more is a reservation
    assert any((d.declared_spent_usd or 0) >= 4.0 for d in drains), "no decision counted an arm in flight"


def test_paid_arms_stay_one_at_a_time_when_two_reservations_would_pass_the_cap(
        prefect_harness: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure prevented: concurrency that lets two arms' ceilings together pass the pair cap.
    With a $6 cap and a $4 ceiling no two arms may be in flight, whatever the worker count, and the
    guard still stops the pair at the cap."""
    from flows.nightly import nightly

    monkeypatch.setenv("MEMTRIAL_TEST_EVAL_KEY", KEY)
    with pytest.raises(BudgetStop, match="pass the pair cap"):
        nightly(config_path=str(paid_run(tmp_path, 6.0, "paid-narrow")), run_id="paid-narrow")
    assert arm_overlap(tmp_path / "artifacts", "paid-narrow-command") == 1
