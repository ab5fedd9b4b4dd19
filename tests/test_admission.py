"""Admission: a recorded decision per completed attempt, with a reason code; excluded runs kept whole."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pytest

from admission_fixtures import (
    HEAD,
    REPO,
    TASK_A,
    TASK_B,
    make_prereg,
    matrix,
    record_key_of,
    run_id,
    s3_store,
    store_records,
    task,
)
from flows.cli.main import main
from tasks_lib.analysis.admission import (
    ADMISSION_COLUMNS,
    REASON_CODES,
    AdmissionError,
    admissions_key,
    admit_run,
    apply_correction,
    load_decisions,
    parse_exclusion,
    run_started_at,
)
from tasks_lib.analysis.prereg import PreregError, Preregistration, prereg_digest
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import ArtifactStore, LocalStore, new_run_id

RUN = run_id()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "artifacts")


def decided(store: ArtifactStore, run: str = RUN) -> dict[tuple[str, str, int], tuple[str, str, str]]:
    return {(d.task_id, d.condition, d.trial): (d.decision, d.reason_code, d.detail) for d in load_decisions(store, run)}


def decided_after(store: ArtifactStore, prereg: Preregistration, run: str = RUN, **kwargs: Any) -> dict[tuple[str, str, int], tuple[str, str, str]]:
    admit_run(store, run, prereg, **kwargs)
    return decided(store, run)


def test_matching_records_are_admitted_and_the_table_has_exactly_the_agreed_columns(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN))
    decisions = admit_run(store, RUN, prereg)
    assert len(decisions) == 8 and all(d.decision == "admitted" and d.reason_code == "preregistered" for d in decisions)
    assert {d.prereg_digest for d in decisions} == {prereg_digest(prereg)}
    frame = pd.read_parquet(store.root / admissions_key(RUN))
    assert tuple(frame.columns) == ADMISSION_COLUMNS
    assert str(frame["trial"].dtype) == "int64"
    via_duckdb = duckdb.sql(f"select decision, count(*) from '{store.root / admissions_key(RUN)}' group by decision").fetchall()
    assert via_duckdb == [("admitted", 8)]


def test_calibration_records_are_never_admitted_even_when_they_match(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN, calibration=True))
    assert {v[:2] for v in decided_after(store, prereg).values()} == {("excluded", "calibration_agent")}


def test_a_record_whose_verifier_differs_is_excluded_naming_the_verifier(store: LocalStore) -> None:
    prereg = make_prereg(store)
    records = matrix(RUN)
    records[0] = records[0].model_copy(update={"verifier_digest": "9" * 64})
    store_records(store, records)
    result = decided_after(store, prereg)
    cell = (records[0].task_id, records[0].condition, records[0].trial)
    assert result[cell][:2] == ("excluded", "prereg_mismatch")
    assert result[cell][2].startswith("verifier: ran 999999999999, preregistered ")
    assert sum(v[0] == "admitted" for v in result.values()) == 7


def test_an_arm_with_memory_that_did_not_record_its_memory_config_is_excluded(store: LocalStore) -> None:
    """Fail closed: an `on` record without its memory config could have measured any adapter config, and no
    comparison could hold it; the `off` arm measured no memory system and is admitted without one."""
    prereg = make_prereg(store)
    records = [r.model_copy(update={"memory_config_digest": None}) if r.condition == "on" and r.trial == 0 else r for r in matrix(RUN)]
    store_records(store, records)
    result = decided_after(store, prereg)
    excluded = {cell: v for cell, v in result.items() if v[0] == "excluded"}
    assert sorted(excluded) == sorted((t, "on", 0) for t in (TASK_A, TASK_B))
    assert all(v[1] == "prereg_mismatch" and v[2].startswith("memory config: unrecorded") for v in excluded.values())
    assert all(result[(t, "off", i)][0] == "admitted" for t in (TASK_A, TASK_B) for i in (0, 1))


def test_a_run_that_started_before_its_preregistration_is_excluded(store: LocalStore) -> None:
    prereg = make_prereg(store)
    early = run_id(stamp="20261201-085959")
    store_records(store, matrix(early))
    result = decided_after(store, prereg, early)
    assert {v[:2] for v in result.values()} == {("excluded", "prereg_mismatch")}
    assert all("before the preregistration was frozen at 2026-12-01T09:00:00Z" in v[2] for v in result.values())


def test_a_run_id_without_a_start_time_cannot_show_the_preregistration_came_first(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix("test-run"))
    result = decided_after(store, prereg, "test-run")
    assert {v[1] for v in result.values()} == {"prereg_mismatch"}
    assert "carries no start time" in next(iter(result.values()))[2]
    assert run_started_at(RUN) is not None and run_started_at("test-run") is None


def test_a_run_over_its_preregistered_budget_is_excluded(store: LocalStore) -> None:
    prereg = make_prereg(store, budget_usd=0.05)
    store_records(store, matrix(RUN))
    result = decided_after(store, prereg)
    assert {v[1] for v in result.values()} == {"prereg_mismatch"}
    assert "budget: spent $0.0800, preregistered $0.0500" in next(iter(result.values()))[2]


def test_infrastructure_failures_and_ungradable_attempts_are_excluded(store: LocalStore) -> None:
    prereg = make_prereg(store)
    records = matrix(RUN)
    records[0] = records[0].model_copy(update={"outcome": "ungradable", "infra_failure": True, "failure_reason": "agent infrastructure: endpoint down"})
    records[1] = records[1].model_copy(update={"outcome": "ungradable", "failure_reason": "the check command could not run"})
    store_records(store, records)
    result = decided_after(store, prereg)
    assert result[(TASK_A, "off", 0)] == ("excluded", "infra_failure", "agent infrastructure: endpoint down")
    assert result[(TASK_A, "off", 1)] == ("excluded", "ungradable", "the check command could not run")


def test_a_failed_audit_is_a_failure_that_counts_unless_an_operator_excludes_it_with_a_reason(store: LocalStore) -> None:
    """Excluding every audit failure automatically would let an agent that edits the tests vanish from the data."""
    prereg = make_prereg(store)
    records = matrix(RUN)
    records[2] = records[2].model_copy(update={"outcome": "fail", "audit_passed": False})
    records[3] = records[3].model_copy(update={"outcome": "fail", "audit_passed": False})
    store_records(store, records)
    cell, reason, detail = parse_exclusion(f"{TASK_A}/on/1=audit_failed:cargo wrote Cargo.lock, not the agent")
    result = decided_after(store, prereg, exclusions={cell: (reason, detail)})
    assert result[(TASK_A, "on", 0)][:2] == ("admitted", "preregistered")
    assert result[(TASK_A, "on", 1)] == ("excluded", "audit_failed", "cargo wrote Cargo.lock, not the agent")


def test_an_operator_exclusion_pre_empted_by_a_rule_is_kept_in_the_detail(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN, calibration=True))
    result = decided_after(store, prereg, exclusions={(TASK_A, "on", 0): ("protocol_deviation", "prompt sent twice")})
    assert result[(TASK_A, "on", 0)] == (
        "excluded", "calibration_agent", "calibration records are never admitted (the operator also gave protocol_deviation: prompt sent twice)"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (f"{TASK_A}/on/0=preregistered:looks good", "is not one an operator may give"),
        (f"{TASK_A}/on/0=apparatus_correction:x", "is not one an operator may give"),
        (f"{TASK_A}/on/0=protocol_deviation", "needs a detail"),
        (f"{TASK_A}/on=protocol_deviation:x", "write TASK/CONDITION/TRIAL=REASON:DETAIL"),
    ],
    ids=["admit-by-hand", "fake-correction", "no-detail", "no-trial"],
)
def test_bad_operator_exclusions_are_refused(text: str, message: str) -> None:
    with pytest.raises(AdmissionError, match=message):
        parse_exclusion(text)


def test_an_exclusion_of_a_record_that_does_not_exist_is_refused(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN))
    with pytest.raises(AdmissionError, match=f"exclusion names no record of run {RUN}: {TASK_A}/on/7"):
        admit_run(store, RUN, prereg, exclusions={(TASK_A, "on", 7): ("protocol_deviation", "x")})
    assert not store.exists(admissions_key(RUN))


def test_decisions_are_made_once(store: LocalStore) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(RUN))
    admit_run(store, RUN, prereg)
    with pytest.raises(AdmissionError, match="was decided already"):
        admit_run(store, RUN, prereg)


def test_a_run_with_no_records_cannot_be_admitted(store: LocalStore) -> None:
    with pytest.raises(AdmissionError, match="has no stored records"):
        admit_run(store, RUN, make_prereg(store))


def test_admission_against_a_superseded_version_is_refused(store: LocalStore) -> None:
    first = make_prereg(store)
    make_prereg(store, correction="the verifier timed out on a loaded machine")
    store_records(store, matrix(RUN))
    with pytest.raises(PreregError, match="study v1 was superseded by v2"):
        admit_run(store, RUN, first)


def test_apparatus_correction_excludes_old_admissions_and_keeps_every_record_whole(store: LocalStore) -> None:
    first = make_prereg(store)
    records = matrix(RUN)
    records[0] = records[0].model_copy(update={"outcome": "ungradable", "infra_failure": True, "failure_reason": "agent infrastructure: x"})
    store_records(store, records)
    before = {record_key_of(r): store.get_bytes(record_key_of(r)) for r in records}
    admit_run(store, RUN, first)
    second = make_prereg(store, correction="allowlist the lockfile the toolchain writes")
    assert apply_correction(store, first, second) == [RUN]
    result = decided(store)
    assert result[(TASK_A, "off", 0)][:2] == ("excluded", "infra_failure"), "an earlier exclusion keeps its own reason"
    others = [v for k, v in result.items() if k != (TASK_A, "off", 0)]
    assert {v[:2] for v in others} == {("excluded", "apparatus_correction")}
    assert all(v[2].startswith(f"superseded by study v2 ({prereg_digest(second)[:12]}): allowlist") for v in others)
    assert {d.prereg_digest for d in load_decisions(store, RUN)} == {prereg_digest(first)}
    assert {k: store.get_bytes(k) for k in before} == before, "records are never repaired or rewritten"
    later = run_id(stamp="20261202-110000", tag="d4e5f6")
    store_records(store, matrix(later))
    assert {v[:2] for v in decided_after(store, second, later).values()} == {("admitted", "preregistered")}


def test_reason_vocabulary_is_fixed_and_documented() -> None:
    doc = (REPO / "docs" / "ADMISSION.md").read_text()
    for code in REASON_CODES:
        assert f"`{code}`" in doc, f"docs/ADMISSION.md does not document {code}"


@pytest.mark.integration  # a real calibration run
def test_real_calibration_run_is_completed_but_not_admitted(store: LocalStore) -> None:
    """End to end with the real arms: the calibration agent's records are stored, then decided, never admitted."""
    prereg = make_prereg(store, model="calibration", tasks=[TASK_A], trials=1)
    rid = new_run_id("paired")
    run_matrix(schedule([task(TASK_A)], ["off", "on"], 1), run_id=rid, repo_root=REPO, commit=HEAD,
               tasks_subdir="corpora/tasks", agent_name="calibration", store=store)
    assert {v[:2] for v in decided_after(store, prereg, rid).values()} == {("excluded", "calibration_agent")}


def test_admission_on_s3(s3_env: str) -> None:
    store = s3_store(s3_env)
    prereg = make_prereg(store)
    records = matrix(RUN)
    records[5] = records[5].model_copy(update={"model": "claude-code/other"})
    store_records(store, records)
    admit_run(store, RUN, prereg)
    result = decided(store)
    assert sum(v[0] == "admitted" for v in result.values()) == 7
    assert result[(records[5].task_id, records[5].condition, records[5].trial)][1] == "prereg_mismatch"


def test_cli_admit_prints_each_decision_and_refuses_a_second_time(store: LocalStore, capsys: pytest.CaptureFixture[str]) -> None:
    make_prereg(store)
    store_records(store, matrix(RUN, tasks=[TASK_B], trials=1))
    args = ["admit", RUN, "--prereg", "study@v1", "--artifacts", str(store.root),
            "--exclude", f"{TASK_B}/on/0=protocol_deviation:prompt sent twice"]
    assert main([*args, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["admitted"] == 1 and payload["excluded"] == 1
    assert main(args) == 2
    assert "was decided already" in capsys.readouterr().err
    assert main(["admit", RUN, "--prereg", "nope", "--artifacts", str(store.root)]) == 2
    assert "no preregistration named 'nope'" in capsys.readouterr().err


def test_the_report_reads_the_decisions_as_written(store: LocalStore) -> None:
    """The agreed columns are the contract with the report (tasks_lib.analysis.aggregate reads admissions.parquet)."""
    from tasks_lib.analysis.aggregate import load_admissions

    prereg = make_prereg(store)
    records = matrix(RUN)
    records[0] = records[0].model_copy(update={"outcome": "ungradable", "infra_failure": True, "failure_reason": "agent infrastructure: x"})
    store_records(store, records)
    written = admit_run(store, RUN, prereg)
    read = load_admissions(store, RUN)
    assert read is not None
    assert [(a.task_id, a.condition, a.trial, a.decision, a.reason_code, a.detail) for a in read] == [
        (d.task_id, d.condition, d.trial, d.decision, d.reason_code, d.detail) for d in written
    ]
