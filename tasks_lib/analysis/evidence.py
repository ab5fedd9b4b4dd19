"""Missing evidence never passes: a record's outcome is checked against the evidence stored beside it.

`evidence_problem` re-reads what a record claims: its transcript and audit receipt must exist and
parse, the receipt must agree with the record, a pass needs a passed audit and a check that exited
0, and a delivery (`injection == "yes"`) needs the delivery witness's receipt, carrying the record's
nonce and showing a planted memory served. `with_evidence` grades a record that fails this `ungradable`, with the reason, so it is
counted neither as a pass nor as a fail. The run's files themselves are sealed by `tasks_lib.run.seal`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from tasks_lib.agents.base import Transcript
from tasks_lib.analysis.grading import MISSING_EVIDENCE
from tasks_lib.arm.audit import AuditReceipt
from tasks_lib.artifacts import ArtifactStore, read_concurrently
from tasks_lib.contracts import Document, RunRecord
from tasks_lib.errors import ArtifactError, ContractError
from tasks_lib.memory.delivery.witness import DeliveryReceipt

D = TypeVar("D", bound=Document)

Cell = tuple[str, str, int]
"""(task, condition, trial): one attempt."""


@dataclass(frozen=True)
class Evidence:
    """What the artifact root holds for one attempt; None where the record names nothing or it is unreadable."""

    transcript: Transcript | None
    receipt: AuditReceipt | None
    delivery: DeliveryReceipt | None = None


def _read(store: ArtifactStore, key: str | None, model: type[D]) -> D | None:
    if not key:
        return None
    try:
        return store.get_json(key, model)
    except (ArtifactError, ContractError):
        return None


def load_evidence(store: ArtifactStore, records: Sequence[RunRecord]) -> dict[Cell, Evidence]:
    """Each record's stored transcript, audit receipt and delivery receipt, read once (records read
    concurrently), by (task, condition, trial)."""
    def one(r: RunRecord) -> Evidence:
        return Evidence(_read(store, r.transcript, Transcript), _read(store, r.audit_receipt, AuditReceipt),
                        _read(store, r.delivery_receipt, DeliveryReceipt))

    return {(r.task_id, r.condition, r.trial): found for r, found in zip(records, read_concurrently(one, records))}


def evidence_problem(record: RunRecord, evidence: Evidence) -> str | None:
    """Why `record`'s outcome is not backed by its stored `evidence`, or None when it is."""
    if record.outcome == "ungradable":
        return None
    if not record.transcript:
        return "the record names no transcript"
    if evidence.transcript is None:
        return f"transcript {record.transcript} is missing or unreadable"
    if not record.audit_receipt:
        return "the record names no mutation-audit receipt"
    receipt = evidence.receipt
    if receipt is None:
        return f"audit receipt {record.audit_receipt} is missing or unreadable"
    if record.audit_passed is not None and receipt.passed != record.audit_passed:
        return f"audit receipt {record.audit_receipt} says passed={receipt.passed}, the record says {record.audit_passed}"
    if record.delivery_receipt and evidence.delivery is None:
        return f"delivery receipt {record.delivery_receipt} is missing or unreadable"
    if record.injection == "yes":
        delivery = evidence.delivery
        if delivery is None:
            return "recorded as delivered, but the record names no delivery receipt"
        if delivery.nonce != record.delivery_nonce:
            return f"delivery receipt {record.delivery_receipt} carries another attempt's nonce"
        if not delivery.planted_served():
            return f"recorded as delivered, but delivery receipt {record.delivery_receipt} shows no planted memory served"
    if record.outcome == "pass":
        if not receipt.passed:
            return f"recorded as a pass, but audit receipt {record.audit_receipt} did not pass"
        if record.check_exit_code != 0:
            return f"recorded as a pass, but the check's exit code is {record.check_exit_code}"
    return None


def with_evidence(records: Sequence[RunRecord], evidence: Mapping[Cell, Evidence]) -> list[RunRecord]:
    """`records`, each one whose `evidence` (from `load_evidence`) does not back its outcome turned
    `ungradable` (with the reason)."""
    out = []
    for record in records:
        problem = evidence_problem(record, evidence[(record.task_id, record.condition, record.trial)])
        if problem is None:
            out.append(record)
        else:
            out.append(record.model_copy(update={
                "outcome": "ungradable", "infra_failure": True, "failure_reason": f"{MISSING_EVIDENCE}{problem}",
            }))
    return out
