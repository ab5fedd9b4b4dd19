"""memtrial compare: pass rates with Wilson intervals and their difference, only when the keys match."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from admission_fixtures import (
    HEAD,
    REPO,
    TASK_A,
    TASK_B,
    make_prereg,
    matrix,
    run_id,
    s3_store,
    store_records,
    task,
)
from flows.cli.main import main
from tasks_lib.analysis.admission import AdmissionError, admit_run, load_records
from tasks_lib.analysis.compare import compare_runs
from tasks_lib.analysis.stats import wilson
from tasks_lib.arm.comparability import IncomparableError
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import ArtifactStore, LocalStore, new_run_id
from tasks_lib.memory import adapter_config as frozen

RUN_A, RUN_B = run_id(tag="aaaaaa"), run_id(stamp="20261202-120000", tag="bbbbbb")


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "artifacts")


def two_admitted_runs(store: ArtifactStore, **b_overrides: object) -> None:
    """Run A: on passes 2/2, off fails 2/2. Run B: on passes 1/2 (trial 1 fails), off passes 1/2."""
    prereg = make_prereg(store)
    store_records(store, matrix(RUN_A))
    records_b = matrix(RUN_B, **b_overrides)
    records_b = [r.model_copy(update={"outcome": "fail", "check_exit_code": 1}) if (r.condition, r.trial) == ("on", 1) else
                 r.model_copy(update={"outcome": "pass", "check_exit_code": 0}) if (r.condition, r.trial) == ("off", 0) else r
                 for r in records_b]
    store_records(store, records_b)
    admit_run(store, RUN_A, prereg)
    admit_run(store, RUN_B, prereg)


def test_rates_intervals_and_difference_per_task_and_condition(store: LocalStore) -> None:
    two_admitted_runs(store, build_under_test="memtrial-reference/0.2.0")
    result = compare_runs(store, RUN_A, RUN_B)
    cells = {(c.task_id, c.condition): c for c in result.cells}
    assert sorted(cells) == [(TASK_A, "off"), (TASK_A, "on"), (TASK_B, "off"), (TASK_B, "on")]
    on = cells[(TASK_A, "on")]
    assert (on.a.passes, on.a.graded, on.b.passes, on.b.graded) == (2, 2, 1, 2)
    assert (on.a.wilson_low, on.a.wilson_high) == (wilson(2, 2).lower, wilson(2, 2).upper)
    assert (on.b.wilson_low, on.b.wilson_high) == (wilson(1, 2).lower, wilson(1, 2).upper)
    assert on.difference == -0.5 and cells[(TASK_A, "off")].difference == 0.5
    assert on.a.builds == ("memtrial-reference/0.1.0",) and on.b.builds == ("memtrial-reference/0.2.0",)
    assert result.basis == "admitted" and [k.challenge for k in result.keys] == [TASK_A, TASK_B]


def test_excluded_records_do_not_count(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN_A))
    store_records(store, [r.model_copy(update={"outcome": "ungradable", "infra_failure": True}) if r.trial == 1 else r for r in matrix(RUN_B)])
    admit_run(store, RUN_A, prereg)
    admit_run(store, RUN_B, prereg)
    cell = next(c for c in compare_runs(store, RUN_A, RUN_B).cells if (c.task_id, c.condition) == (TASK_A, "on"))
    assert (cell.a.graded, cell.b.graded) == (2, 1)


@pytest.mark.parametrize(
    ("overrides", "field"),
    [
        ({"verifier_digest": "5" * 64}, "verifier_digest"),
        ({"model": "other-agent"}, "model"),
        ({"corpus_id": "d" * 64}, "fixture"),
        ({"source_commit": "6" * 40}, "source_commit"),
        ({"manifest_digest": "7" * 64}, "manifest_digest"),
        ({"memory_config_digest": "8" * 64}, "memory_config_digest"),
    ],
    ids=["verifier", "model", "fixture", "source-commit", "manifest", "memory-config"],
)
def test_different_keys_are_refused_naming_the_field_and_both_values(store: LocalStore, overrides: dict[str, str], field: str) -> None:
    store_records(store, matrix(RUN_A))
    store_records(store, matrix(RUN_B, **overrides))
    with pytest.raises(IncomparableError) as caught:
        compare_runs(store, RUN_A, RUN_B, "completed")
    message = str(caught.value)
    assert f"{RUN_A} {TASK_A}" in message and f"{RUN_B} {TASK_A}" in message
    assert f"{field}: " in message and next(iter(overrides.values())) in message


def test_different_conditions_are_refused(store: LocalStore) -> None:
    store_records(store, matrix(RUN_A))
    store_records(store, matrix(RUN_B, conditions=("off", "on", "ablate:all")))
    with pytest.raises(IncomparableError, match="conditions: off,on != ablate:all,off,on"):
        compare_runs(store, RUN_A, RUN_B, "completed")


def test_different_task_sets_are_refused(store: LocalStore) -> None:
    store_records(store, matrix(RUN_A))
    store_records(store, matrix(RUN_B, tasks=(TASK_A,)))
    with pytest.raises(IncomparableError, match=f"only in {RUN_A}: {TASK_B}; only in {RUN_B}: none"):
        compare_runs(store, RUN_A, RUN_B, "completed")


def test_admitted_basis_needs_decisions(store: LocalStore) -> None:
    store_records(store, matrix(RUN_A))
    store_records(store, matrix(RUN_B))
    with pytest.raises(AdmissionError, match=f"run {RUN_A} has no admission decisions"):
        compare_runs(store, RUN_A, RUN_B)


@pytest.mark.integration  # two real calibration runs
def test_two_real_calibration_runs_compare_on_completed_records_only(store: LocalStore) -> None:
    """The calibration agent's runs are never admitted, so they compare as completed records; same key, same result."""
    runs = []
    for _ in range(2):
        rid = new_run_id("paired")
        run_matrix(schedule([task(TASK_A)], ["off", "on"], 1), run_id=rid, repo_root=REPO, commit=HEAD,
                   tasks_subdir="corpora/tasks", agent_name="calibration", store=store)
        admit_run(store, rid, make_prereg(store, name=f"cal-{len(runs)}", model="calibration", tasks=[TASK_A], trials=1))
        runs.append(rid)
    with pytest.raises(IncomparableError, match="has no admitted records"):
        compare_runs(store, *runs)
    result = compare_runs(store, *runs, basis="completed")
    rates = {(c.condition, c.a.rate, c.b.rate, c.difference) for c in result.cells}
    assert rates == {("off", 0.0, 0.0, 0.0), ("on", 1.0, 1.0, 0.0)}


def test_two_real_runs_differing_only_in_adapter_config_are_refused(store: LocalStore, monkeypatch: pytest.MonkeyPatch,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: runs of one memory system under two adapter configs (here the reference store's settings
    edited between them) compared as the same question; now `memtrial compare` refuses, naming both configs."""
    runs = []
    for fusion in ("memtrial weighted fusion", "plain RRF"):
        monkeypatch.setitem(frozen.SETTINGS, "reference", {**frozen.SETTINGS["reference"], "fusion": fusion})
        rid = new_run_id("paired")
        run_matrix(schedule([task(TASK_A)], ["off", "on"], 1), run_id=rid, repo_root=REPO, commit=HEAD,
                   tasks_subdir="corpora/tasks", agent_name="calibration", store=store)
        runs.append(rid)
    configs = [next(r.memory_config_digest for r in load_records(store, rid) if r.condition == "on") for rid in runs]
    assert configs[0] and configs[1] and configs[0] != configs[1]
    with pytest.raises(IncomparableError) as caught:
        compare_runs(store, *runs, basis="completed")
    assert f"memory_config_digest: {configs[0]} != {configs[1]}" in str(caught.value)
    assert main(["compare", *runs, "--artifacts", str(store.root), "--completed"]) == 2
    err = capsys.readouterr().err
    assert "memory_config_digest" in err and len(err.splitlines()) == 1


def test_compare_on_s3(s3_env: str) -> None:
    store = s3_store(s3_env)
    two_admitted_runs(store)
    assert len(compare_runs(store, RUN_A, RUN_B).cells) == 4


def test_cli_compare_table_json_and_refusal(store: LocalStore, capsys: pytest.CaptureFixture[str]) -> None:
    two_admitted_runs(store)
    assert main(["compare", RUN_A, RUN_B, "--artifacts", str(store.root)]) == 0
    text = capsys.readouterr().out
    assert "2/2 1.00 [0.34, 1.00]" in text and "-0.50" in text and "builds under test" in text
    assert f"memory config (same in both runs): {matrix(RUN_A)[-1].memory_config_digest[:12]}" in text  # type: ignore[index]
    assert main(["compare", RUN_A, RUN_B, "--artifacts", str(store.root), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["basis"] == "admitted" and len(payload["cells"]) == 4
    other = run_id(stamp="20261202-130000", tag="cccccc")
    store_records(store, matrix(other, model="claude-code/x"))
    assert main(["compare", RUN_A, other, "--artifacts", str(store.root), "--completed"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtrial: error: ") and "model: scripted != claude-code/x" in err and len(err.splitlines()) == 1
