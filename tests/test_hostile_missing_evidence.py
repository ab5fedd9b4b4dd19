"""Hostile class 10: missing evidence must never pass. On Dask workers that did not share the artifact
root, every audit receipt was missing and every arm graded pass. Here a real `memtrial paired` run
(Prefect flow, calibration agent) loses evidence the way such a worker loses it: the files never
reach the root, so the run seals what it has (simulated by removing them and sealing again)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.cli.main import main
from tasks_lib.artifacts import LocalStore
from tasks_lib.run.seal import seal_run

TASK = "logship-partial-exit"


def _paired(root: Path) -> tuple[str, Path]:
    assert main(["paired", "--embedder", "hashed", "--tasks", TASK, "--conditions", "off,on", "--trials", "2", "--artifacts", str(root)]) == 0
    (run_dir,) = (root / "runs").iterdir()
    return run_dir.name, run_dir


def _report(root: Path, run_id: str, capsys: pytest.CaptureFixture[str]) -> tuple[dict, str]:
    capsys.readouterr()
    assert main(["report", run_id, "--artifacts", str(root), "--json"]) == 0
    printed = capsys.readouterr()
    return json.loads(printed.out)["summary"], printed.err


def _on_rate(summary: dict) -> tuple[int, int, int]:
    (row,) = [p for p in summary["pass_rates"] if p["task_id"] == "*" and p["condition"] == "on"]
    return row["passes"], row["gradable"], row["ungradable"]


@pytest.mark.parametrize("lost", ["audit.json", "transcript.json"])
def test_an_attempt_whose_evidence_never_arrived_is_ungradable_not_a_pass(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                          lost: str) -> None:
    """Regression: the record said pass and nothing checked that its receipt or transcript existed."""
    root = tmp_path / "artifacts"
    run_id, run_dir = _paired(root)
    assert _on_rate(_report(root, run_id, capsys)[0]) == (2, 2, 0)
    (run_dir / "attempts" / TASK / "on" / "t1" / lost).unlink()
    seal_run(LocalStore(root), run_id)
    summary, err = _report(root, run_id, capsys)
    assert _on_rate(summary) == (1, 1, 1)
    assert f"{TASK}/on/t1: missing evidence: " in err and lost.split(".")[0] in err
    grades = pq.read_table(run_dir / "grades.parquet").to_pylist()
    lost_grade = next(g for g in grades if (g["condition"], g["trial"]) == ("on", 1))
    assert lost_grade["outcome"] == "ungradable" and lost_grade["mui_credit"] == "none"


def test_a_pass_whose_receipt_failed_or_check_did_not_exit_0_is_ungradable(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a record's outcome was trusted even when its own evidence contradicted it."""
    root = tmp_path / "artifacts"
    run_id, run_dir = _paired(root)
    table = pq.read_table(run_dir / "records.parquet")
    rows = table.to_pylist()
    for row in rows:
        if (row["condition"], row["trial"]) == ("on", 0):
            row["check_exit_code"] = None
    pq.write_table(pa.Table.from_pylist(rows, schema=table.schema), run_dir / "records.parquet")
    record = run_dir / "attempts" / TASK / "on" / "t0" / "record.json"  # the record's own copy says the same
    record.write_text(record.read_text().replace('"check_exit_code": 0', '"check_exit_code": null'))
    seal_run(LocalStore(root), run_id)
    summary, err = _report(root, run_id, capsys)
    assert _on_rate(summary) == (1, 1, 1)
    assert f"{TASK}/on/t0: missing evidence: recorded as a pass, but the check's exit code is None" in err
