"""Missing evidence never passes: a record's outcome is checked against the evidence stored beside it.

`evidence_problem` re-reads what a record claims: its transcript and audit receipt must exist and
parse, the receipt must agree with the record, and a pass needs a passed audit and a check that
exited 0. `with_evidence` grades a record that fails this `ungradable`, with the reason, so it is
counted neither as a pass nor as a fail. The run's files themselves are sealed by `tasks_lib.manifest`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks_lib.agents.base import Transcript
from tasks_lib.analysis.grading import MISSING_EVIDENCE
from tasks_lib.arm.audit import AuditReceipt
from tasks_lib.artifacts import ArtifactStore
from tasks_lib.contracts import RunRecord
from tasks_lib.errors import ArtifactError, ContractError


def evidence_problem(store: ArtifactStore, record: RunRecord) -> str | None:
    """Why `record`'s outcome is not backed by its stored evidence, or None when it is."""
    if record.outcome == "ungradable":
        return None
    if not record.transcript:
        return "the record names no transcript"
    try:
        store.get_json(record.transcript, Transcript)
    except (ArtifactError, ContractError):
        return f"transcript {record.transcript} is missing or unreadable"
    if not record.audit_receipt:
        return "the record names no mutation-audit receipt"
    try:
        receipt = store.get_json(record.audit_receipt, AuditReceipt)
    except (ArtifactError, ContractError):
        return f"audit receipt {record.audit_receipt} is missing or unreadable"
    if record.audit_passed is not None and receipt.passed != record.audit_passed:
        return f"audit receipt {record.audit_receipt} says passed={receipt.passed}, the record says {record.audit_passed}"
    if record.outcome == "pass":
        if not receipt.passed:
            return f"recorded as a pass, but audit receipt {record.audit_receipt} did not pass"
        if record.check_exit_code != 0:
            return f"recorded as a pass, but the check's exit code is {record.check_exit_code}"
    return None


def with_evidence(store: ArtifactStore, records: Sequence[RunRecord]) -> list[RunRecord]:
    """`records`, each one whose evidence does not back its outcome turned `ungradable` (with the reason)."""
    out = []
    for record in records:
        problem = evidence_problem(store, record)
        if problem is None:
            out.append(record)
        else:
            out.append(record.model_copy(update={
                "outcome": "ungradable", "infra_failure": True, "failure_reason": f"{MISSING_EVIDENCE}{problem}",
            }))
    return out
