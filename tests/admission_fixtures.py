"""Shared builders for the comparability, preregistration, admission, publish and compare tests.

Records are real RunRecords of real bundled tasks, their comparability fields computed from the
task folders exactly as the arms compute them, stored as `record.json` in a real artifact store
(a local folder, or the moto S3 server on 127.0.0.1) under the layout the arms use.
"""

from __future__ import annotations

import hashlib
import itertools
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3

from tasks_lib.analysis.prereg import Preregistration, create_prereg
from tasks_lib.arm.audit import AuditReceipt, Change, SnapshotEntry
from tasks_lib.arm.comparability import arm_memory_config_digest, record_fields
from tasks_lib.artifacts import ArtifactStore, S3Settings, open_store, run_key
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import LoadedTask, load_tasks
from tasks_lib.memory.delivery.witness import DeliveryReceipt, ServedRecall
from tasks_lib.run.seal import seal_run

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
        "corpus_id": "c" * 64, "outcome": "pass" if condition == "on" else "fail", "check_exit_code": 0 if condition == "on" else 1,
        "input_tokens": 1000,
        "output_tokens": 200, "cost_usd": 0.01, "wall_seconds": 3.0, "injection": "yes" if condition == "on" else "no",
        **({"planted_ids": ("m1",), "delivered_ids": ("m1",), "served_ids": ("m1",),
            "delivery_receipt": run_key(run, "attempts", task_id, condition, f"t{trial}", "delivery.json"),
            "delivery_nonce": hashlib.sha256(f"{run}/{task_id}/{trial}".encode()).hexdigest()[:32]} if condition == "on" else {}),
        "build_under_test": "memtrial-reference/0.1.0", "transcript": run_key(run, "attempts", task_id, condition, f"t{trial}", "transcript.json"),
        "audit_receipt": run_key(run, "attempts", task_id, condition, f"t{trial}", "audit.json"), "audit_passed": True,
        **record_fields(task(task_id), AGENT), "memory_config_digest": arm_memory_config_digest(condition, "hashed"),
    }
    fields.update(overrides)
    return RunRecord(**fields)


def matrix(run: str, tasks: Sequence[str] = (TASK_A, TASK_B), conditions: Sequence[str] = ("off", "on"), trials: int = 2,
           **overrides: Any) -> list[RunRecord]:
    return [record(t, c, i, run, **overrides) for t in tasks for c in conditions for i in range(trials)]


def record_key_of(r: RunRecord) -> str:
    return run_key(r.run_id, "attempts", r.task_id, r.condition.replace(":", "-"), f"t{r.trial}", "record.json")


def audit_receipt(*, passed: bool) -> AuditReceipt:
    """A receipt as the mutation audit writes it: clean, or with one file added outside the allowed paths."""
    added = Change(path="stray.txt", kind="added", before=None, after=SnapshotEntry(path="stray.txt", type="file", mode=0o644, size=1, sha256="e" * 64))
    return AuditReceipt(allowed_output_paths=("src",), before_digest="d" * 64, after_digest="d" * 64 if passed else "f" * 64,
                        entries_before=1, entries_after=1 if passed else 2, violations=() if passed else (added,),
                        allowed_changes=(), passed=passed)


def delivery_receipt(r: RunRecord) -> DeliveryReceipt:
    """The witness's receipt for a delivered record: its planted memory served, under the record's nonce."""
    return DeliveryReceipt(nonce=r.delivery_nonce or "", realm="project:0123456789abcdef", served_by="scripted",
                           planted_ids=r.planted_ids, recalls=(ServedRecall(realm="project:0123456789abcdef", lanes=("keyword",),
                                                                            ids=r.planted_ids, text_sha256=("a" * 64,) * len(r.planted_ids), at=1.0),))


def store_records(store: ArtifactStore, records: Sequence[RunRecord]) -> None:
    """Store records (with a small transcript and an audit receipt each) the way the arms do, then seal
    each run's evidence with its manifest as the flow's store-records stage does."""
    for r in records:
        store.put_json(record_key_of(r), r)
        if r.transcript:
            store.put_bytes(r.transcript, b'{"schema_version": 1, "agent": "scripted", "steps": []}\n')
        if r.audit_receipt:
            store.put_json(r.audit_receipt, audit_receipt(passed=r.audit_passed is not False))
        if r.delivery_receipt:
            store.put_json(r.delivery_receipt, delivery_receipt(r))
    for run in sorted({r.run_id for r in records}):
        seal_run(store, run)


def s3_store(endpoint: str) -> ArtifactStore:
    """A store on a fresh bucket of the S3 server at `endpoint` (credentials from the `s3_env` fixture)."""
    bucket = f"memtrial-admission-{next(_buckets)}"
    boto3.client("s3", endpoint_url=S3Settings.from_env().endpoint_url, region_name="us-east-1").create_bucket(Bucket=bucket)
    return open_store(f"s3://{bucket}/study")
