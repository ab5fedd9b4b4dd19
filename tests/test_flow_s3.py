"""A whole small nightly flow with both stage results and artifacts on an S3-compatible server
(moto's server mode on 127.0.0.1); the Parquet tables are read back with pandas."""

from __future__ import annotations

import io
import uuid
from collections import Counter
from pathlib import Path

import boto3
import pandas as pd
import pytest

from flows.stages import TRACE_ENV
from tasks_lib.artifacts import new_run_id

TASK = "rotlog-keep-count"


def s3_client(endpoint: str):  # type: ignore[no-untyped-def]
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing")


def read_parquet(client, bucket: str, key: str) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    return pd.read_parquet(io.BytesIO(client.get_object(Bucket=bucket, Key=key)["Body"].read()))


def test_nightly_on_s3_results_and_artifacts_then_rerun_from_s3_cache(
        prefect_harness: None, s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from flows.nightly import nightly

    bucket = f"memtrial-{uuid.uuid4().hex[:10]}"
    client = s3_client(s3_env)
    client.create_bucket(Bucket=bucket)
    config = tmp_path / "s3.yaml"
    config.write_text(f"tasks: [{TASK}]\nconditions: ['off', 'on']\nsuites: []\nartifact_root: s3://{bucket}/nightly\n", encoding="utf-8")
    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    run_id = new_run_id("s3")

    result = nightly(config_path=str(config), run_id=run_id)

    assert result.artifact_root == f"s3://{bucket}/nightly"
    (agent,) = result.agents
    assert agent.report == f"s3://{bucket}/nightly/runs/{run_id}-calibration/report.html"
    records = read_parquet(client, bucket, f"nightly/runs/{run_id}-calibration/records.parquet")
    assert sorted(records["condition"]) == ["off", "on"]
    assert set(records["task_id"]) == {TASK} and set(records["outcome"]) <= {"pass", "fail"}
    assert records.set_index("condition").loc["on", "injection"] == "yes"
    assert records.set_index("condition").loc["off", "injection"] != "yes"
    grades = read_parquet(client, bucket, f"nightly/runs/{run_id}-calibration/grades.parquet")
    assert len(grades) == 2
    listed = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix="nightly/")
              for o in page.get("Contents", [])]
    assert any(k.endswith(f"{run_id}-calibration/attempts/{TASK}/on/t0/audit.json") for k in listed)
    results = [k for k in listed if k.startswith("nightly/prefect-results/")]
    # prepare, invariants, two arms, the sealed matrix, the records table, aggregate and report.
    assert len(results) == 8
    assert not (tmp_path / "artifacts").exists()

    first = len(trace.read_text().splitlines())
    again = nightly(config_path=str(config), run_id=run_id)
    rerun = Counter(line.split("\t")[0] for line in trace.read_text().splitlines()[first:])
    assert rerun == Counter(), f"a rerun of a completed run executed {dict(rerun)}"
    assert again.agents[0].arms_cached == 2


def test_a_run_on_s3_logs_no_connection_pool_is_full_warning(
        prefect_harness: None, s3_env: str, tmp_path: Path) -> None:
    """The failure prevented: every S3 run printing 22-24 urllib3 "Connection pool is full, discarding
    connection" warnings, because boto3's pool (10 connections by default) was smaller than the reads
    and writes memtrial keeps in flight (the grading and report stages read the evidence of the smoke
matrix's four arms on 16 threads). A nightly run of four arms on moto's server must log none."""
    import logging

    from flows.nightly import nightly

    bucket = f"pool-{uuid.uuid4().hex[:10]}"
    s3_client(s3_env).create_bucket(Bucket=bucket)
    config = tmp_path / "pool.yaml"
    config.write_text(f"tasks: [{TASK}]\nconditions: ['off', 'on']\ntrials: 2\nsuites: []\nartifact_root: s3://{bucket}/pool\n", encoding="utf-8")
    seen: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = seen.append  # type: ignore[method-assign]  # on urllib3's own logger: Prefect reconfigures the root's handlers
    pool_log = logging.getLogger("urllib3.connectionpool")
    pool_log.addHandler(handler)
    try:
        result = nightly(config_path=str(config), run_id=new_run_id("pool"))
    finally:
        pool_log.removeHandler(handler)
    assert result.agents[0].attempts == 4
    full = [r.getMessage() for r in seen if "Connection pool is full" in r.getMessage()]
    assert full == [], f"{len(full)} warning(s), e.g. {full[0]}"
