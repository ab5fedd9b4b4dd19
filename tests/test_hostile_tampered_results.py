"""Hostile class 11: stored results edited after the run. A real `memtrial paired` run (a Prefect flow,
the calibration agent) seals its evidence; `report`, `compare` and `publish` must refuse the run
with one line naming the changed file, whatever was edited, added or removed."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from flows.cli.main import main
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import load_document
from tasks_lib.run.seal import MANIFEST_JSON, RunManifest, verify_run

TASK = "logship-partial-exit"
"""A convention task: the calibration agent fails it without memory and passes it with memory."""


@pytest.fixture(scope="module")
def sealed_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One real paired run (off and on, one trial), stored under a fresh artifact root."""
    root = tmp_path_factory.mktemp("sealed") / "artifacts"
    code = main(["paired", "--embedder", "hashed", "--tasks", TASK, "--conditions", "off,on", "--artifacts", str(root), "--json"])
    assert code == 0
    (run_dir,) = (root / "runs").iterdir()
    outcomes = {r["condition"]: r["outcome"] for r in pq.read_table(run_dir / "records.parquet").to_pylist()}
    assert outcomes == {"off": "fail", "on": "pass"}
    return root, run_dir.name


def _copy(sealed_run: tuple[Path, str], tmp_path: Path) -> tuple[Path, str, Path]:
    root, run_id = sealed_run
    copy = tmp_path / "artifacts"
    shutil.copytree(root, copy)
    return copy, run_id, copy / "runs" / run_id


def _report(root: Path, run_id: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    capsys.readouterr()
    code = main(["report", run_id, "--artifacts", str(root)])
    return code, capsys.readouterr().err


def test_the_run_seals_its_records_transcripts_and_receipts(sealed_run: tuple[Path, str]) -> None:
    """A run whose manifest omitted its evidence would make every later check vacuous."""
    root, run_id = sealed_run
    manifest = load_document(root / "runs" / run_id / MANIFEST_JSON, RunManifest)
    names = sorted({f.key.rsplit("/", 1)[-1] for f in manifest.files})
    assert names == ["audit.json", "check.txt", "delivery.json", "record.json", "records.parquet", "transcript.json"]
    assert len(manifest.files) == 1 + 2 * 4 + 1, "the table, four files per attempt, and the on attempt's delivery receipt"
    assert verify_run(LocalStore(root), run_id) == manifest


def test_an_edited_records_table_is_refused_by_report(sealed_run: tuple[Path, str], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: a `records.parquet` rewritten to turn the off arm's failures into passes was graded."""
    root, run_id, run_dir = _copy(sealed_run, tmp_path)
    rows = pq.read_table(run_dir / "records.parquet").to_pylist()
    for row in rows:
        row["outcome"], row["check_exit_code"] = "pass", 0
    assert rows != pq.read_table(run_dir / "records.parquet").to_pylist()
    pq.write_table(pa.Table.from_pylist(rows), run_dir / "records.parquet")
    graded_before = (run_dir / "grades.parquet").read_bytes()  # `memtrial paired` grades its run as it ends
    code, err = _report(root, run_id, capsys)
    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert f"runs/{run_id}/records.parquet changed after the run" in err and MANIFEST_JSON in err
    assert (run_dir / "grades.parquet").read_bytes() == graded_before, "nothing is graded from tampered evidence"
    assert not (run_dir / "report.html").exists(), "no report is rendered from tampered evidence"


@pytest.mark.parametrize("attack", ["edited-receipt", "removed-transcript", "added-record", "removed-manifest", "forged-manifest"])
def test_any_change_to_sealed_evidence_is_refused(sealed_run: tuple[Path, str], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str], attack: str) -> None:
    """Regression: only the records table was ever read back, so a receipt, transcript or a whole
    attempt could be swapped in unnoticed."""
    root, run_id, run_dir = _copy(sealed_run, tmp_path)
    attempt = run_dir / "attempts" / TASK / "off" / "t0"
    if attack == "edited-receipt":
        receipt = json.loads((attempt / "audit.json").read_text())
        receipt["entries_after"] += 1
        (attempt / "audit.json").write_text(json.dumps(receipt))
        expected = "audit.json changed after the run"
    elif attack == "removed-transcript":
        (attempt / "transcript.json").unlink()
        expected = "transcript.json is sealed but missing"
    elif attack == "added-record":
        shutil.copytree(attempt, run_dir / "attempts" / TASK / "off" / "t1")
        expected = "/off/t1/audit.json was added after the run was sealed"
    elif attack == "removed-manifest":
        (run_dir / MANIFEST_JSON).unlink()
        expected = "manifest.json: missing"
    else:
        manifest = json.loads((run_dir / MANIFEST_JSON).read_text())
        manifest["run_id"] = "paired-20200101-000000-aaaaaa"
        (run_dir / MANIFEST_JSON).write_text(json.dumps(manifest))
        expected = "field 'run_id'"
    code, err = _report(root, run_id, capsys)
    assert code == 2 and expected in err and err.count("\n") == 1, err


def test_compare_and_publish_refuse_a_tampered_run(sealed_run: tuple[Path, str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `compare` and `publish` read stored records without checking them."""
    root, run_id, run_dir = _copy(sealed_run, tmp_path)
    record = run_dir / "attempts" / TASK / "off" / "t0" / "record.json"
    record.write_bytes(record.read_bytes().replace(b'"injection": "no"', b'"injection": "yes"'))
    capsys.readouterr()
    assert main(["compare", run_id, run_id, "--completed", "--artifacts", str(root)]) == 2
    err = capsys.readouterr().err
    assert "record.json changed after the run" in err and err.count("\n") == 1, err
    release = tmp_path / "release"
    assert main(["publish", run_id, "--out", str(release), "--artifacts", str(root)]) != 0
    printed = capsys.readouterr()
    assert "record.json changed after the run" in printed.out and "nothing written" in printed.err
    assert not release.exists()
