"""Aggregation: the run's Parquet tables and summary.json, on a local folder and on S3 (moto on 127.0.0.1),
read back with pandas and DuckDB; admission exclusions; clear errors for unknown runs and bad tables."""

from __future__ import annotations

import json
import uuid
from fractions import Fraction
from pathlib import Path

import boto3
import duckdb
import pyarrow as pa
import pytest

from tasks_lib.analysis.admission import (
    ADMISSION_COLUMNS,
    AdmissionDecision,
    admissions_key,
    decisions_table,
)
from tasks_lib.analysis.aggregate import (
    ABLATIONS_TABLE,
    AUDIT_TABLE,
    GRADES_TABLE,
    SUMMARY_JSON,
    AggregateError,
    RunNotFound,
    aggregate_run,
)
from tasks_lib.analysis.grading import GradingSummary
from tasks_lib.analysis.stats import adjusted_mean_interval
from tasks_lib.artifacts import LocalStore, open_store, run_key
from tasks_lib.errors import ArtifactError, ContractError
from tasks_lib.run.layout import RECORDS_TABLE
from tasks_lib.run.records import RecordsDisagreeError, read_records
from tasks_lib.run.seal import TamperedRunError
from test_grading import scenario_records, store_scenario

RUN = "scenario-run"
TEXTS = {"alpha": ["Partial uploads exit with status 3 so the cron wrapper retries them."]}


def _local(tmp_path: Path) -> LocalStore:
    store = LocalStore(tmp_path / "artifacts")
    store_scenario(store, scenario_records(RUN))
    return store


def test_tables_are_written_and_readable_with_pandas_and_duckdb(tmp_path: Path) -> None:
    store = _local(tmp_path)
    result = aggregate_run(store, RUN, TEXTS)
    run_dir = tmp_path / "artifacts" / "runs" / RUN
    assert set(result.keys) == {GRADES_TABLE, ABLATIONS_TABLE, AUDIT_TABLE, SUMMARY_JSON}

    import pandas as pd

    grades = pd.read_parquet(run_dir / GRADES_TABLE)
    assert len(grades) == 40
    on = grades[grades["condition"] == "on"].set_index(["task_id", "trial"])
    assert on.loc[("alpha", 0), "mui_credit"] == "success-lift" and on.loc[("beta", 0), "mui_credit"] == "cost-saving"
    assert on["surface_echo"].tolist().count(True) == 2, "alpha's agent quoted its memory in both on attempts"

    con = duckdb.connect()
    credits = dict(con.execute(
        f"select mui_credit, count(*) from read_parquet('{run_dir / GRADES_TABLE}') where condition = 'on' group by 1").fetchall())
    assert credits == {"success-lift": 2, "cost-saving": 1, "none": 5}
    deltas = dict(con.execute(
        f"select lane, delta from read_parquet('{run_dir / ABLATIONS_TABLE}') where task_id = '*'").fetchall())
    assert {lane: Fraction(d) for lane, d in deltas.items()} == {"keyword": Fraction(5, 14), "semantic": Fraction(-1, 56), "all": Fraction(-3, 56)}
    audit = con.execute(f"select task_id, condition, trial, found, passed from read_parquet('{run_dir / AUDIT_TABLE}') where not found").fetchall()
    assert audit == [("delta", "off", 0, False, None)], "a lost receipt is shown as missing, never as passed"

    summary = store.get_json(run_key(RUN, SUMMARY_JSON), GradingSummary)
    assert summary == result.summary
    assert Fraction(next(t for t in summary.mui if t.task_id == "*").mui) == Fraction(3, 7)


def test_summary_json_carries_a_headline_of_plain_numbers(tmp_path: Path) -> None:
    """summary.json: a headline per compared pair, numbers as JSON numbers, raw counts, the method named."""
    store = _local(tmp_path)
    aggregate_run(store, RUN, TEXTS)
    data = json.loads((tmp_path / "artifacts" / "runs" / RUN / SUMMARY_JSON).read_text())
    first = data["headline"][0]
    assert (first["condition_a"], first["condition_b"], first["tasks"], first["gradable_a"], first["passes_a"]) == ("on", "off", 4, 7, 6)
    for name in ("success_difference", "token_difference"):
        assert {"estimate", "low", "high", "p_value", "method"} <= set(first[name])
    success = first["success_difference"]
    assert all(isinstance(success[k], float) for k in ("estimate", "low", "high", "p_value")), "numbers, never text"
    assert "sign-flip permutation test" in success["method"]
    mui = first["mui"]
    assert {k: mui[k] for k in ("success_lift", "cost_saving", "harm", "net", "low", "high")} == {
        "success_lift": 0.25, "cost_saving": 0.125, "harm": 0.125, "net": 0.25,
        "low": adjusted_mean_interval([1, 0.5, 0, -0.5], -1, 1).lower, "high": 1.0}, "per-task net: alpha 1, beta 1/2, delta 0, gamma -1/2"
    assert data["mcnemar"]["pvalue"] == "5/8", "the exact trial-level reference is kept"
    assert {(r["condition"], r["k"]) for r in data["pass_at_k"]} >= {("off", 1), ("on", 1), ("ablate:all", 2)}


def test_a_summary_stored_before_the_headline_still_loads(tmp_path: Path) -> None:
    """Regression: summary.json files written before `headline` and `pass_at_k` existed must still parse."""
    store = _local(tmp_path)
    aggregate_run(store, RUN, TEXTS)
    path = tmp_path / "artifacts" / "runs" / RUN / SUMMARY_JSON
    old = {k: v for k, v in json.loads(path.read_text()).items() if k not in ("headline", "pass_at_k")}
    old["mui"] = [{k: v for k, v in t.items() if k not in ("harm", "harm_share", "net")} for t in old["mui"]]
    path.write_text(json.dumps(old))
    loaded = store.get_json(run_key(RUN, SUMMARY_JSON), GradingSummary)
    assert loaded.headline == () and loaded.mui[-1].harm is None, "harm never counted reads unknown, never 0"


def test_aggregation_on_s3(s3_env: str) -> None:
    bucket = f"agg-{uuid.uuid4().hex[:8]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    store = open_store(f"s3://{bucket}/team/nightly")
    store_scenario(store, scenario_records(RUN))
    aggregate_run(store, RUN, TEXTS)
    assert store.exists(run_key(RUN, SUMMARY_JSON))
    grades = store.get_table(run_key(RUN, GRADES_TABLE))
    assert grades.num_rows == 40 and grades.to_pandas()["mui_credit"].eq("success-lift").sum() == 2
    ablations = store.get_table(run_key(RUN, ABLATIONS_TABLE))
    flagged = duckdb.connect().execute("select count(*) from ablations where flagged").fetchone()
    assert ablations.num_rows > 0 and flagged == (0,)


def decision(task: str, condition: str, trial: int, verdict: str, reason: str, detail: str = "") -> AdmissionDecision:
    """An admission decision as `tasks_lib.analysis.admission` records it."""
    return AdmissionDecision(task_id=task, condition=condition, trial=trial, decision=verdict, reason_code=reason,  # type: ignore[arg-type]
                             detail=detail, prereg_digest="a" * 64, decided_at="2026-12-02T10:00:00Z")


def test_excluded_attempts_are_kept_out_of_every_figure(tmp_path: Path) -> None:
    store = _local(tmp_path)
    store.put_table(admissions_key(RUN), decisions_table([
        decision("alpha", "on", 1, "excluded", "protocol_deviation", "the operator restarted the agent mid-turn"),
        decision("alpha", "on", 0, "admitted", "preregistered"),
    ]))
    result = aggregate_run(store, RUN)
    assert result.admissions_recorded and [(e.task_id, e.trial, e.reason_code) for e in result.excluded] == [("alpha", 1, "protocol_deviation")]
    pooled = next(t for t in result.summary.mui if t.task_id == "*")
    assert (pooled.on_attempts, pooled.success_lift, Fraction(pooled.mui)) == (6, 1, Fraction(1, 3))
    assert result.summary.excluded == 1 and result.summary.attempts == 39
    records = store.get_table(run_key(RUN, RECORDS_TABLE))
    assert records.num_rows == 40, "excluded attempts are kept whole in the records"


def test_a_calibration_run_excluded_as_calibration_is_still_graded_as_calibration(tmp_path: Path) -> None:
    """The admission step excludes every calibration attempt from publication; grading them is how
    the apparatus is proven, so they stay graded (and labelled), unless excluded for another reason."""
    store = LocalStore(tmp_path / "artifacts")
    records = [r.model_copy(update={"calibration": True}) for r in scenario_records(RUN)]
    store_scenario(store, records)
    reasons = {("delta", "on", 1): "ungradable"}
    store.put_table(admissions_key(RUN), decisions_table([
        decision(r.task_id, r.condition, r.trial, "excluded", reasons.get((r.task_id, r.condition, r.trial), "calibration_agent"))
        for r in records]))
    result = aggregate_run(store, RUN)
    assert len(result.excluded) == 40 and result.summary.calibration
    assert (result.summary.attempts, result.summary.excluded) == (39, 1)
    assert Fraction(next(t for t in result.summary.mui if t.task_id == "*").mui) == Fraction(3, 7)


def test_no_admissions_table_means_every_attempt_is_graded(tmp_path: Path) -> None:
    result = aggregate_run(_local(tmp_path), RUN)
    assert not result.admissions_recorded and result.excluded == () and result.summary.attempts == 40


def test_unknown_run_names_the_root_and_the_known_runs(tmp_path: Path) -> None:
    store = _local(tmp_path)
    with pytest.raises(RunNotFound, match=rf"run 'nope': no records.parquet under .*runs/nope/; known runs: {RUN}"):
        aggregate_run(store, "nope")
    with pytest.raises(RunNotFound, match="holds no runs"):
        aggregate_run(LocalStore(tmp_path / "empty"), "nope")


def test_a_corrupt_records_table_is_a_clear_error(tmp_path: Path) -> None:
    """The records reader names the table and the row; grading refuses the unsealed run before parsing it."""
    store = LocalStore(tmp_path)
    store.put_bytes(run_key("bad", RECORDS_TABLE), b"not parquet")
    with pytest.raises(ArtifactError, match=r"records.parquet: not a readable Parquet table"):
        read_records(store, "bad")
    with pytest.raises(TamperedRunError, match=r"manifest.json: missing"):
        aggregate_run(store, "bad")
    rows = [r.model_dump(mode="json") for r in scenario_records("bad")[:2]]
    rows[1]["outcome"] = "maybe"
    store.put_table(run_key("bad", RECORDS_TABLE), pa.Table.from_pylist(rows))
    with pytest.raises(ContractError, match=r"records.parquet row 1: field 'outcome'"):
        read_records(store, "bad")
    twice = [r.model_dump(mode="json") for r in scenario_records("bad")[:1]] * 2
    store.put_table(run_key("bad", RECORDS_TABLE), pa.Table.from_pylist(twice))
    with pytest.raises(RecordsDisagreeError, match=r"records.parquet row 1: a second record for alpha/off/0"):
        read_records(store, "bad")
    assert not store.exists(run_key("bad", GRADES_TABLE)), "nothing half-written on bad input"


def test_a_bad_admissions_row_names_the_table_and_field(tmp_path: Path) -> None:
    store = _local(tmp_path)
    row = decision("alpha", "on", 0, "admitted", "preregistered").model_dump(mode="json") | {"decision": "perhaps"}
    store.put_table(admissions_key(RUN), pa.Table.from_pylist([{c: row[c] for c in ADMISSION_COLUMNS}]))
    with pytest.raises(AggregateError, match=r"admissions.parquet: field 'decision'"):
        aggregate_run(store, RUN)


def test_two_comparability_keys_for_one_task_are_refused(tmp_path: Path) -> None:
    """Records of one task run by two models would share a line of the report: refused, naming the field."""
    from tasks_lib.arm.comparability import IncomparableError, arm_memory_config_digest

    pinned = {"manifest_digest": "a" * 64, "verifier_digest": "b" * 64, "prompts_digest": "c" * 64, "source_commit": "d" * 40}
    records = [r.model_copy(update={**pinned, "corpus_id": "e" * 64, "model": f"scripted/{'m2' if (r.task_id, r.trial) == ('alpha', 1) else 'm1'}",
                                    "memory_config_digest": arm_memory_config_digest(r.condition, "hashed")})
               for r in scenario_records(RUN)]
    store = LocalStore(tmp_path / "artifacts")
    store_scenario(store, records)
    with pytest.raises(IncomparableError, match="model") as caught:
        aggregate_run(store, RUN, TEXTS)
    assert "scripted/m1" in str(caught.value) and "scripted/m2" in str(caught.value)
    assert not (tmp_path / "artifacts" / "runs" / RUN / GRADES_TABLE).exists(), "nothing is written for a refused run"
    same = [r.model_copy(update={"model": "scripted/m1"}) for r in records]
    store_scenario(store, same)
    assert aggregate_run(store, RUN, TEXTS).summary.run_id == RUN
    mixed = [r.model_copy(update={"memory_config_digest": "9" * 64}) if (r.task_id, r.condition, r.trial) == ("alpha", "on", 1) else r
             for r in same]
    store_scenario(store, mixed)
    with pytest.raises(IncomparableError, match=f"memory_config_digest: [0-9a-f]{{64}} != {'9' * 64}"):
        aggregate_run(store, RUN, TEXTS)
