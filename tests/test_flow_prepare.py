"""Preparation in the paired flow (`flows.paired.prepare_tasks`): a real Prefect run, every task built,
redacted and certified from the corpus pack, a leaky one gated out, cached stages on rerun, S3."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import boto3
import pytest

from gitrepo import MakeRepo, git, write_files
from tasks_lib.artifacts import open_store
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
        "memories": [{"text": "The exporter's summary line starts with the ops team's marker.", "lane": "keyword", "kind": "convention"}],
    }
    base = f"corpora/tasks/{task_id}"
    files: dict[str, str | bytes] = {
        f"{base}/task.json": json.dumps(manifest),
        f"{base}/verifier.sh": VERIFIER,
        f"{base}/fixture/exporter.py": f"# {salt}\ndef export() -> str:\n    return ''\n",
        f"{base}/fixture/README.md": "# exporter\n",
        f"{base}/solution/exporter.py": f"def export() -> str:\n    return '{answer}'\n",
        f"{base}/hidden/test_exporter.py": "import unittest\n",
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


def run_flow(project: Path, artifact_root: str, trace: Path | None = None):  # type: ignore[no-untyped-def]
    """`prepare_tasks` of every task under the project's corpora/tasks, inside a flow; with `trace`,
    the stages that really ran are appended to it (`MEMTRIAL_STAGE_TRACE`)."""
    import os

    from prefect import flow

    from flows import stages
    from flows.paired import prepare_tasks
    from tasks_lib.run.config import RunConfig

    @flow(name="prepare-test")
    def prepare():  # type: ignore[no-untyped-def]
        return prepare_tasks(RunConfig(), str(project), artifact_root, stages.result_storage(artifact_root))

    if trace is not None:
        os.environ[stages.TRACE_ENV] = str(trace)
    try:
        return prepare()
    finally:
        os.environ.pop(stages.TRACE_ENV, None)


def prepared_again(trace: Path) -> list[str]:
    """Task folders whose preparation ran (not from cache), from the stage trace."""
    lines = [line.split("\t") for line in trace.read_text().splitlines()] if trace.exists() else []
    return sorted(label for stage, label in lines if stage == "prepare")


def test_flow_prepares_every_task_and_gates_the_leaky_one(prefect_harness: None, project: Path, tmp_path: Path) -> None:
    tasks = run_flow(project, str(tmp_path / "artifacts"))
    by_name = tasks.prepared
    assert sorted(by_name) == ["clean-task", "leaky-task", "redacted-task"]
    assert by_name["clean-task"].certification.verdict == "clean"
    assert [r.path for r in by_name["redacted-task"].redaction.removed] == ["CLAUDE.md"]
    assert by_name["redacted-task"].certification.verdict == "clean"
    leak = by_name["leaky-task"].certification
    assert leak.verdict == "findings" and [(f.kind, f.path) for f in leak.findings] == [("solution-leak", "docs/ops.md")]
    assert tasks.excluded["leaky-task"] == "certification: findings"
    assert "leaky-task" not in [t.task_id for t in tasks.runnable]


def test_rerun_reuses_unchanged_stages_from_cache(prefect_harness: None, project: Path, tmp_path: Path) -> None:
    root = str(tmp_path / "artifacts")
    first = run_flow(project, root, tmp_path / "first.tsv")
    assert prepared_again(tmp_path / "first.tsv") == ["clean-task", "leaky-task", "redacted-task"]
    second = run_flow(project, root, tmp_path / "second.tsv")
    assert prepared_again(tmp_path / "second.tsv") == []
    assert second.prepared == first.prepared
    write_files(project, {"corpora/tasks/clean-task/fixture/exporter.py": "def export() -> str:\n    return 'x'\n"})
    git(project, "commit", "-qam", "change one fixture")
    run_flow(project, root, tmp_path / "third.tsv")
    assert prepared_again(tmp_path / "third.tsv") == ["clean-task"]


def test_flow_writes_artifacts_to_s3(prefect_harness: None, project: Path, s3_env: str) -> None:
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket="flow-artifacts")
    tasks = run_flow(project, "s3://flow-artifacts/nightly")
    assert sorted(tasks.prepared) == ["clean-task", "leaky-task", "redacted-task"]
    from flows.runtime.cache import RESULTS_FOLDER
    from tasks_lib.corpus.packs import PACKS

    keys = open_store("s3://flow-artifacts/nightly").list_keys("")
    assert any(k.startswith(f"{PACKS}/") for k in keys), f"no corpus pack in the bucket: {keys}"
    assert any(k.startswith(f"{RESULTS_FOLDER}/") for k in keys), f"the prepared tasks are not cached in the bucket: {keys}"
