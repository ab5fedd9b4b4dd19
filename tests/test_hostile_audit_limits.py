"""Hostile class 9: an unbounded audit. A few huge sparse files, or a flood of tiny ones, in an allowed
output path made the mutation audit read for minutes. Through the real paired flow with a hostile
`command` agent, the audit stops at its limit and the attempt fails with the limit named."""

from __future__ import annotations

from pathlib import Path

import pytest

from hostile_flow import run_hostile
from tasks_lib.arm.audit import AuditLimits, AuditReceipt, audit, snapshot_tree
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord

HOSTILE = """
import os
if os.path.isdir("logship"):  # logship-partial-exit: a few huge sparse files in an allowed path
    for i in range(3):
        with open(f"logship/blob{i}.bin", "wb") as f:
            f.truncate(3 << 30)
    print("left three sparse 3 GiB files")
else:  # tabmill-delimiter: a flood of empty files in an allowed path
    os.makedirs("tabmill/flood", exist_ok=True)
    for i in range(110_000):
        open(f"tabmill/flood/{i}", "wb").close()
    print("left 110000 files")
"""
LIMIT_OF = {"logship-partial-exit": "bytes", "tabmill-delimiter": "entries"}


@pytest.fixture(scope="module")
def hostile_records(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    tmp_path = tmp_path_factory.mktemp("audit-limits")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return tmp_path, run_hostile(tmp_path, monkeypatch, HOSTILE, sorted(LIMIT_OF), conditions=["off"])


@pytest.mark.parametrize("task_id", sorted(LIMIT_OF), ids=["sparse-files", "file-flood"])
def test_a_tree_past_the_audit_limits_fails_by_name_instead_of_stalling(hostile_records: tuple[Path, list[RunRecord]], task_id: str) -> None:
    """Regression: the audit hashed every byte of whatever the agent left, with no bound."""
    tmp_path, records = hostile_records
    (record,) = [r for r in records if r.task_id == task_id]
    limit = LIMIT_OF[task_id]
    assert record.outcome == "fail" and record.audit_passed is False
    assert record.failure_reason and f"exceeds the audit limit on {limit}" in record.failure_reason
    receipt = open_store(tmp_path / "artifacts").get_json(record.audit_receipt or "", AuditReceipt)
    assert receipt.limit_breach is not None and receipt.limit_breach.limit == limit and not receipt.passed


def test_the_time_limit_stops_a_slow_audit(tmp_path: Path) -> None:
    """Regression: nothing bounded the audit's wall time; a tree too slow to read must fail, not hang."""
    root = tmp_path / "tree"
    root.mkdir()
    before = snapshot_tree(root)
    (root / "big.bin").write_bytes(b"x" * (64 << 20))
    receipt = audit(before, root, ["big.bin"], AuditLimits(max_seconds=1e-6))
    assert receipt.limit_breach is not None and receipt.limit_breach.limit == "seconds" and not receipt.passed


def test_within_the_limits_the_receipt_is_unchanged(tmp_path: Path) -> None:
    """The limits must not change a normal audit: same receipt, no breach, pass."""
    root = tmp_path / "tree"
    (root / "src").mkdir(parents=True)
    before = snapshot_tree(root)
    (root / "src" / "a.py").write_text("x = 1\n")
    receipt = audit(before, root, ["src"])
    assert receipt.passed and receipt.limit_breach is None and len(receipt.allowed_changes) == 1
