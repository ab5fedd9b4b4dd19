"""Admission: whether a completed attempt may count, as a separate recorded decision.

A finished attempt is `completed` (its durable `record.json`, read with the records table by
`tasks_lib.run.records`). Admission decides, once, against a
preregistration, whether each record is `admitted` or `excluded`, with a reason code from the fixed
vocabulary `REASON_CODES`, and stores every decision in `runs/<run_id>/admissions.parquet`
(columns `ADMISSION_COLUMNS`). Excluded records are kept whole: admission never touches a record,
a transcript or a receipt. Decisions are not re-made: the only change ever applied to a stored
decision is an apparatus correction, which turns `admitted` into `excluded` (`apparatus_correction`)
when a new preregistered version supersedes the one the run was admitted against.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

import pyarrow as pa
from pydantic import Field

from tasks_lib.analysis.prereg import (
    PreregError,
    Preregistration,
    prereg_digest,
    record_mismatches,
    versions,
)
from tasks_lib.artifacts import RUNS, ArtifactStore, run_key
from tasks_lib.contracts import Condition, ContractModel, Identifier, RunRecord, Sha256
from tasks_lib.errors import MemtrialError
from tasks_lib.run.layout import ADMISSIONS_TABLE, ATTEMPTS, RECORD_JSON
from tasks_lib.run.records import cell_of, read_records

ADMISSION_COLUMNS = ("task_id", "condition", "trial", "decision", "reason_code", "detail", "prereg_digest", "decided_at")
"""Columns of `runs/<run_id>/admissions.parquet`, in order (all strings except `trial`, an int64)."""

ReasonCode = Literal[
    "preregistered", "calibration_agent", "infra_failure", "ungradable", "prereg_mismatch",
    "audit_failed", "protocol_deviation", "apparatus_correction",
]
REASON_CODES: dict[str, str] = {
    "preregistered": "admitted: completed and gradable, every input matches the preregistration",
    "calibration_agent": "excluded: run by the calibration agent, an instrument of the runner, never admissible",
    "infra_failure": "excluded: the apparatus, not the agent, failed (automatic, or an operator's call with detail)",
    "ungradable": "excluded: no verdict could be reached (missing evidence is never a pass or a fail)",
    "prereg_mismatch": "excluded: an input differs from the preregistration, or the run started before it",
    "audit_failed": "excluded by an operator: the mutation audit flagged the toolchain, not the agent (detail required)",
    "protocol_deviation": "excluded by an operator: the run did not follow the protocol (detail required)",
    "apparatus_correction": "excluded: a later preregistered version corrected the apparatus this run used",
}
"""The fixed vocabulary of reason codes and what each means."""
OPERATOR_REASONS = frozenset({"audit_failed", "infra_failure", "protocol_deviation"})
"""Reasons an operator may give to exclude a record by hand (always with a detail)."""
_RUN_STAMP = re.compile(r"-(\d{8}-\d{6})-[0-9a-f]{6}$")


class AdmissionError(MemtrialError):
    """A run cannot be admitted (no records, decided already, bad exclusion, ...)."""


class AdmissionDecision(ContractModel):
    """One recorded admission decision about one completed attempt."""

    task_id: Identifier
    """The task."""
    condition: Condition
    """The memory condition."""
    trial: int = Field(ge=0)
    """Trial number."""
    decision: Literal["admitted", "excluded"]
    """Whether the record may contribute to a published number."""
    reason_code: ReasonCode
    """Why, from `REASON_CODES`."""
    detail: str
    """The specifics in one line (which input differs, the operator's words, ...)."""
    prereg_digest: Sha256
    """Digest of the preregistration the decision was made against."""
    decided_at: str
    """When, as ISO 8601 UTC (`YYYY-MM-DDTHH:MM:SSZ`)."""


def utc_stamp(moment: datetime) -> str:
    """ISO 8601 UTC to the second, e.g. `2026-12-02T16:05:00Z`."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def run_started_at(run_id: str) -> datetime | None:
    """The start time a run id made by `new_run_id` carries, or None."""
    match = _RUN_STAMP.search(run_id)
    if not match:
        return None
    return datetime.strptime(match.group(1), "%Y%m%d-%H%M%S").replace(tzinfo=UTC)


def load_records(store: ArtifactStore, run_id: str) -> list[RunRecord]:
    """Every record of a run (`tasks_lib.run.records`: the table and the per-attempt records reconciled),
    sorted by task, condition, trial; AdmissionError when it has none."""
    records = read_records(store, run_id)
    if not records:
        raise AdmissionError(f"{store.uri}: run {run_id} has no stored records (runs/{run_id}/{ATTEMPTS}/**/{RECORD_JSON})")
    return sorted(records, key=cell_of)


def parse_exclusion(text: str) -> tuple[tuple[str, str, int], str, str]:
    """`TASK/CONDITION/TRIAL=REASON:DETAIL` -> ((task, condition, trial), reason, detail)."""
    cell, sep, rest = text.partition("=")
    reason, _, detail = rest.partition(":")
    parts = cell.split("/")
    if not sep or len(parts) != 3 or not parts[2].isdigit():
        raise AdmissionError(f"exclusion {text!r}: write TASK/CONDITION/TRIAL=REASON:DETAIL, e.g. t1/on/0=audit_failed:cargo wrote Cargo.lock")
    if reason not in OPERATOR_REASONS:
        raise AdmissionError(f"exclusion {text!r}: reason {reason!r} is not one an operator may give; use {', '.join(sorted(OPERATOR_REASONS))}")
    if not detail.strip():
        raise AdmissionError(f"exclusion {text!r}: an operator's exclusion needs a detail after the reason (REASON:DETAIL)")
    return (parts[0], parts[1], int(parts[2])), reason, detail.strip()


def decide(
    record: RunRecord, prereg: Preregistration, *, late: str | None, over_budget: str | None,
    operator: tuple[str, str] | None,
) -> tuple[str, str, str]:
    """(decision, reason_code, detail) for one record; the first rule that applies wins, and an
    operator's exclusion that an earlier rule pre-empts is kept in the detail."""
    automatic = _automatic_exclusion(record, prereg, late=late, over_budget=over_budget)
    if automatic is None:
        if operator:
            return "excluded", operator[0], operator[1]
        return "admitted", "preregistered", f"{record.outcome}; matches {prereg.name} v{prereg.version}"
    reason, detail = automatic
    if operator:
        detail += f" (the operator also gave {operator[0]}: {operator[1]})"
    return "excluded", reason, detail


def _automatic_exclusion(
    record: RunRecord, prereg: Preregistration, *, late: str | None, over_budget: str | None
) -> tuple[str, str] | None:
    if record.calibration or record.agent == "calibration":
        return "calibration_agent", "calibration records are never admitted"
    problems = ([late] if late else []) + record_mismatches(prereg, record) + ([over_budget] if over_budget else [])
    if problems:
        return "prereg_mismatch", "; ".join(problems)
    if record.infra_failure:
        return "infra_failure", record.failure_reason or "the apparatus failed"
    if record.outcome == "ungradable":
        return "ungradable", record.failure_reason or "no verdict"
    return None


def admissions_key(run_id: str) -> str:
    """Where a run's admission decisions are stored."""
    return run_key(run_id, ADMISSIONS_TABLE)


def decisions_table(decisions: Sequence[AdmissionDecision]) -> pa.Table:
    """The decisions as a table with exactly `ADMISSION_COLUMNS`."""
    rows = [d.model_dump(mode="json") for d in decisions]
    schema = pa.schema([(c, pa.int64() if c == "trial" else pa.string()) for c in ADMISSION_COLUMNS])
    return pa.Table.from_pylist(rows, schema=schema)


def load_decisions(store: ArtifactStore, run_id: str) -> list[AdmissionDecision]:
    """The stored decisions of a run; AdmissionError when there are none."""
    key = admissions_key(run_id)
    if not store.exists(key):
        raise AdmissionError(f"{store.uri}: run {run_id} has no admission decisions; run 'memtrial admit {run_id} --prereg NAME'")
    table = store.get_table(key)
    if tuple(table.column_names) != ADMISSION_COLUMNS:
        raise AdmissionError(f"{store.uri}/{key}: columns {table.column_names} are not {list(ADMISSION_COLUMNS)}")
    return [AdmissionDecision(**row) for row in table.to_pylist()]


def admit_run(
    store: ArtifactStore,
    run_id: str,
    prereg: Preregistration,
    *,
    exclusions: Mapping[tuple[str, str, int], tuple[str, str]] | None = None,
    now: datetime | None = None,
) -> list[AdmissionDecision]:
    """Decide, once, for every record of `run_id` against `prereg`; store and return the decisions.

    Refuses a run that was decided already, a preregistration that a later version superseded,
    and an operator exclusion naming a record that does not exist.
    """
    key = admissions_key(run_id)
    if store.exists(key):
        raise AdmissionError(
            f"{store.uri}/{key}: run {run_id} was decided already; decisions are durable and only an "
            "apparatus correction (a new preregistered version) changes them"
        )
    known = versions(store, prereg.name)
    if known and known[-1] > prereg.version:
        raise PreregError(f"{prereg.name} v{prereg.version} was superseded by v{known[-1]}; admit against the current version")
    records = load_records(store, run_id)
    exclusions = dict(exclusions or {})
    cells = {(r.task_id, r.condition, r.trial) for r in records}
    unknown = sorted(set(exclusions) - cells)
    if unknown:
        raise AdmissionError(f"exclusion names no record of run {run_id}: {', '.join('/'.join(map(str, c)) for c in unknown)}")
    started = run_started_at(run_id)
    if started is None:
        late: str | None = f"run id {run_id!r} carries no start time, so nothing shows the preregistration came first"
    elif prereg.created_at.replace(microsecond=0) > started:
        late = f"run started {utc_stamp(started)}, before the preregistration was frozen at {utc_stamp(prereg.created_at)}"
    else:
        late = None
    spent = sum(r.cost_usd for r in records)
    over_budget = f"budget: spent ${spent:.4f}, preregistered ${prereg.budget_usd:.4f}" if spent > prereg.budget_usd else None
    digest, stamp = prereg_digest(prereg), utc_stamp(now or datetime.now(UTC))
    decisions = []
    for record in records:
        decision, reason, detail = decide(
            record, prereg, late=late, over_budget=over_budget, operator=exclusions.get((record.task_id, record.condition, record.trial)),
        )
        decisions.append(AdmissionDecision(
            task_id=record.task_id, condition=record.condition, trial=record.trial, decision=decision,  # type: ignore[arg-type]
            reason_code=reason, detail=detail, prereg_digest=digest, decided_at=stamp,  # type: ignore[arg-type]
        ))
    store.put_table(key, decisions_table(decisions))
    return decisions


def decided_runs(store: ArtifactStore) -> list[str]:
    """Run ids that have stored admission decisions."""
    return sorted(k.split("/")[1] for k in store.list_keys(RUNS) if k.endswith(f"/{ADMISSIONS_TABLE}") and k.count("/") == 2)


def apply_correction(store: ArtifactStore, old: Preregistration, new: Preregistration, *, now: datetime | None = None) -> list[str]:
    """Mark every record admitted against `old` as excluded (`apparatus_correction`); return the runs changed.

    Records already excluded keep their own reason; nothing else about a run changes.
    """
    if new.supersedes != prereg_digest(old):
        raise PreregError(f"{new.name} v{new.version} does not supersede v{old.version}; its 'supersedes' names another digest")
    old_digest, stamp = prereg_digest(old), utc_stamp(now or datetime.now(UTC))
    changed = []
    for run_id in decided_runs(store):
        decisions = load_decisions(store, run_id)
        if not any(d.prereg_digest == old_digest and d.decision == "admitted" for d in decisions):
            continue
        detail = f"superseded by {new.name} v{new.version} ({prereg_digest(new)[:12]}): {new.correction}"
        updated = [
            d.model_copy(update={"decision": "excluded", "reason_code": "apparatus_correction", "detail": detail, "decided_at": stamp})
            if d.prereg_digest == old_digest and d.decision == "admitted" else d
            for d in decisions
        ]
        store.put_table(admissions_key(run_id), decisions_table(updated))
        changed.append(run_id)
    return changed
