"""The preparation flow: a real Prefect run, receipts and Parquet in the store, cached stages on rerun."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pandas as pd
import pytest

from gitrepo import MakeRepo, git, write_files
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import PreparedCorpus
from tasks_lib.trees import sha256_bytes

VERIFIER = b"#!/bin/sh\npython3 -m unittest -q\n"


def task_files(task_id: str, extra: dict[str, str], answer: str, salt: str) -> dict[str, str | bytes]:
    manifest = {
        "schema_version": 1,
        "task_id": task_id,
        "kind": "convention",
        "instruction": "Make the exporter write the summary line the ops team expects.",
        "check_command": ["sh", "{verifier}"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": sha256_bytes(VERIFIER)}},
        "answer_terms": [answer],
        "allowed_output_paths": ["exporter.py"],
    }
    base = f"corpora/tasks/{task_id}"
    files: dict[str, str | bytes] = {
        f"{base}/task.json": json.dumps(manifest),
        f"{base}/verifier.sh": VERIFIER,
        f"{base}/fixture/exporter.py": f"# {salt}\ndef export() -> str:\n    return ''\n",
        f"{base}/fixture/README.md": "# exporter\n",
    }
    files.update({f"{base}/fixture/{k}": v for k, v in extra.items()})
    return files


@pytest.fixture
def project(make_repo: MakeRepo) -> Path:
    salt = uuid.uuid4().hex  # unique trees, so no other test's cache entry applies
    files = {
        **task_files("clean-task", {}, "SUMMARY-V2", salt),
        **task_files("redacted-task", {"CLAUDE.md": "Always print SUMMARY-V2."}, "SUMMARY-V2", salt),
        **task_files("leaky-task", {"docs/ops.md": "The line must start with SUMMARY-V2."}, "SUMMARY-V2", salt),
    }
    repo, _ = make_repo(files)
    return repo


def run_flow(project: Path, artifact_root: str):  # type: ignore[no-untyped-def]
    from flows.prepare import prepare_flow
    from tasks_lib.artifacts import new_run_id

    return prepare_flow(
        tasks_root=str(project / "corpora/tasks"), repo_root=str(project), artifact_root=artifact_root, run_id=new_run_id("test")
    )


def test_flow_prepares_every_task_and_stores_receipts(prefect_harness: None, project: Path, tmp_path: Path) -> None:
    summary = run_flow(project, str(tmp_path / "artifacts"))
    by_name = {p.name: p for p in summary.prepared}
    assert sorted(by_name) == ["clean-task", "leaky-task", "redacted-task"]
    assert by_name["clean-task"].certification.verdict == "clean"
    assert [r.path for r in by_name["redacted-task"].redaction.removed] == ["CLAUDE.md"]
    assert by_name["redacted-task"].certification.verdict == "clean"
    leak = by_name["leaky-task"].certification
    assert leak.verdict == "findings" and [(f.kind, f.path) for f in leak.findings] == [("solution-leak", "docs/ops.md")]
    assert not summary.clean

    store = open_store(str(tmp_path / "artifacts"))
    table = store.get_table(summary.table_key).to_pandas().set_index("name")
    assert table.loc["redacted-task", "removed"] == 1
    assert table.loc["leaky-task", "verdict"] == "findings"
    stored = store.get_json(f"runs/{summary.run_id}/prepare/clean-task/prepared.json", PreparedCorpus)
    assert stored == by_name["clean-task"]


def test_rerun_reuses_unchanged_stages_from_cache(prefect_harness: None, project: Path, tmp_path: Path) -> None:
    first = run_flow(project, str(tmp_path / "a"))
    assert first.cached == [False, False, False]
    second = run_flow(project, str(tmp_path / "b"))
    assert second.cached == [True, True, True]
    assert second.prepared == first.prepared
    write_files(project, {"corpora/tasks/clean-task/fixture/exporter.py": "def export() -> str:\n    return 'x'\n"})
    git(project, "commit", "-qam", "change one fixture")
    third = run_flow(project, str(tmp_path / "c"))
    assert dict(zip([p.name for p in third.prepared], third.cached)) == {"clean-task": False, "leaky-task": True, "redacted-task": True}


def test_flow_writes_artifacts_to_s3(prefect_harness: None, project: Path, s3_env: str) -> None:
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket="flow-artifacts")
    summary = run_flow(project, "s3://flow-artifacts/nightly")
    frame = open_store("s3://flow-artifacts/nightly").get_table(summary.table_key).to_pandas()
    assert isinstance(frame, pd.DataFrame)
    assert sorted(frame["name"]) == ["clean-task", "leaky-task", "redacted-task"]
