"""Shared builders for the comparability, preregistration, admission, publish and compare tests.

Records are real RunRecords of real bundled tasks, their comparability fields computed from the
task folders exactly as the arms compute them, stored as `record.json` in a real artifact store
(a local folder, or the moto S3 server on 127.0.0.1) under the layout the arms use.
"""

from __future__ import annotations

import itertools
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from tasks_lib.artifacts import ArtifactStore, S3Settings, open_store, run_key
from tasks_lib.arm.comparability import record_fields
from tasks_lib.contracts import RunRecord
from tasks_lib.analysis.prereg import Preregistration, create_prereg
from tasks_lib.corpus.tasks import LoadedTask, load_tasks

REPO = Path(__file__).resolve().parents[1]
TASKS = {t.task_id: t for t in load_tasks(REPO / "corpora" / "tasks")}
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
TASK_A, TASK_B = "logship-partial-exit", "tabmill-delimiter"
AGENT = "scripted"
FROZEN_AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
"""When the test preregistrations are frozen; runs below start after it unless a test says otherwise."""
_buckets = itertools.count()


def task(task_id: str) -> LoadedTask:
    return TASKS[task_id]


def run_id(stamp: str = "20261202-100000", tag: str = "a1b2c3", prefix: str = "paired") -> str:
    """A run id in `new_run_id`'s format, with a chosen start time."""
    return f"{prefix}-{stamp}-{tag}"


def make_prereg(store: ArtifactStore, name: str = "study", tasks: Sequence[str] = (TASK_A, TASK_B), **overrides: Any) -> Preregistration:
    options: dict[str, Any] = {
        "model": AGENT, "budget_usd": 1.0, "conditions": ("off", "on"), "trials": 2,
        "primary": "pass rate on vs off per task, exact McNemar", "now": FROZEN_AT,
    }
    options.update(overrides)
    return create_prereg(store, name, [task(t) for t in tasks], **options)


def record(task_id: str, condition: str, trial: int, run: str, **overrides: Any) -> RunRecord:
    """A completed attempt of a bundled task with the comparability fields the arms would record."""
    fields: dict[str, Any] = {
        "run_id": run, "task_id": task_id, "condition": condition, "trial": trial, "agent": AGENT,
        "corpus_id": "c" * 64, "outcome": "pass" if condition == "on" else "fail", "input_tokens": 1000,
        "output_tokens": 200, "cost_usd": 0.01, "wall_seconds": 3.0, "injection": "yes" if condition == "on" else "no",
        "build_under_test": "memtrial-reference/0.1.0", "transcript": run_key(run, "attempts", task_id, condition, f"t{trial}", "transcript.json"),
        **record_fields(task(task_id), AGENT),
    }
    fields.update(overrides)
    return RunRecord(**fields)


def matrix(run: str, tasks: Sequence[str] = (TASK_A, TASK_B), conditions: Sequence[str] = ("off", "on"), trials: int = 2,
           **overrides: Any) -> list[RunRecord]:
    return [record(t, c, i, run, **overrides) for t in tasks for c in conditions for i in range(trials)]


def record_key_of(r: RunRecord) -> str:
    return run_key(r.run_id, "attempts", r.task_id, r.condition.replace(":", "-"), f"t{r.trial}", "record.json")


def store_records(store: ArtifactStore, records: Sequence[RunRecord]) -> None:
    """Store records (and a small transcript each) the way the arms do."""
    for r in records:
        store.put_json(record_key_of(r), r)
        if r.transcript:
            store.put_bytes(r.transcript, b'{"schema_version": 1, "agent": "scripted", "steps": []}\n')


def s3_store(endpoint: str) -> ArtifactStore:
    """A store on a fresh bucket of the S3 server at `endpoint` (credentials from the `s3_env` fixture)."""
    bucket = f"memtrial-admission-{next(_buckets)}"
    boto3.client("s3", endpoint_url=S3Settings.from_env().endpoint_url, region_name="us-east-1").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/study")
