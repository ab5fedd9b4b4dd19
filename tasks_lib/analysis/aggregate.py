"""Aggregation: grade a stored run and write its tables under the run's artifact root.

Reads the run's records through `tasks_lib.run.records` (the table written by `memtrial paired`,
reconciled with the per-attempt records), after verifying its seal; the transcripts and audit
receipts the records point to; and `admissions.parquet` when the admission step wrote one.
Writes, each atomically through the artifact store (a local folder or S3):

- `grades.parquet`: one row per graded attempt (`AttemptGrade`);
- `ablations.parquet`: marginal lane deltas and the harness check (`ConditionDelta`);
- `audit_receipts.parquet`: one row per stored mutation-audit receipt;
- `summary.json`: the `GradingSummary`.

Attempts excluded by an admission decision (`tasks_lib.analysis.admission`) are kept in the records but
graded nowhere; the one exception is a calibration attempt excluded as `calibration_agent`, which
stays in the calibration grading (the report labels the whole run as calibration).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import pyarrow as pa
from pydantic import Field, ValidationError

from tasks_lib.analysis.admission import AdmissionDecision, admissions_key, load_decisions
from tasks_lib.analysis.evidence import Cell, Evidence, load_evidence, with_evidence
from tasks_lib.analysis.grading import (
    AttemptGrade,
    ConditionDelta,
    GradingSummary,
    grade_attempts,
    summarize,
)
from tasks_lib.arm.comparability import MissingKeyError, comparison_key
from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.contracts import ContractModel, Document, RunRecord, violations_of
from tasks_lib.errors import MemtrialError
from tasks_lib.run.layout import (
    ABLATIONS_TABLE,
    AUDIT_TABLE,
    GRADES_TABLE,
    MANIFEST_JSON,
    RUN_WARNINGS_JSON,
    SUMMARY_JSON,
)
from tasks_lib.run.records import RunNotFound, read_records, require_table, run_folder  # noqa: F401 - RunNotFound: aggregate_run raises it
from tasks_lib.run.seal import verify_run

CALIBRATION_REASON = "calibration_agent"
"""An exclusion for this reason only says 'not publishable': a calibration run is still graded (labelled)."""


class AggregateError(MemtrialError):
    """A stored artifact of a run cannot be aggregated (bad table, bad row)."""


class AuditRow(ContractModel):
    """One row of `audit_receipts.parquet`."""

    task_id: str
    """The task."""
    condition: str
    """The memory condition."""
    trial: int = Field(ge=0)
    """Trial index."""
    receipt: str | None
    """Key of the receipt in the artifact root; None when the record names none."""
    found: bool
    """The receipt exists and is a valid audit receipt."""
    passed: bool | None
    """The audit passed (None when not found)."""
    violations: int | None
    """Changes outside the allowed paths."""
    violation_paths: tuple[str, ...]
    """Paths of those changes."""
    allowed_changes: int | None
    """Changes inside the allowed paths."""
    before_digest: str | None
    """Digest of the pre-run snapshot."""
    after_digest: str | None
    """Digest of the finished tree."""


@dataclass(frozen=True)
class Aggregate:
    """The result of aggregating one run."""

    summary: GradingSummary
    grades: tuple[AttemptGrade, ...]
    excluded: tuple[AdmissionDecision, ...]
    admissions_recorded: bool
    audit: tuple[AuditRow, ...]
    keys: dict[str, str]
    """Table name -> artifact key written."""
    records: tuple[RunRecord, ...] = ()
    """Every record of the run (excluded ones too), as graded (evidence applied)."""


def load_admissions(store: ArtifactStore, run_id: str) -> list[AdmissionDecision] | None:
    """The run's admission decisions (`tasks_lib.analysis.admission`), or None when none were recorded."""
    key = admissions_key(run_id)
    if not store.exists(key):
        return None
    try:
        return load_decisions(store, run_id)
    except ValidationError as error:
        problems = "; ".join(str(v) for v in violations_of(error, f"{store.uri.rstrip('/')}/{key}"))
        raise AggregateError(f"not an admission decision: {problems}") from None


def audit_rows(records: Sequence[RunRecord], evidence: Mapping[Cell, Evidence]) -> list[AuditRow]:
    """One row per record from its stored audit receipt (found=False when it is missing or invalid)."""
    rows = []
    for r in records:
        receipt = evidence[(r.task_id, r.condition, r.trial)].receipt
        rows.append(AuditRow(
            task_id=r.task_id, condition=r.condition, trial=r.trial, receipt=r.audit_receipt, found=receipt is not None,
            passed=receipt.passed if receipt else None,
            violations=len(receipt.violations) if receipt else None,
            violation_paths=tuple(v.path for v in receipt.violations) if receipt else (),
            allowed_changes=len(receipt.allowed_changes) if receipt else None,
            before_digest=receipt.before_digest if receipt else None,
            after_digest=receipt.after_digest if receipt else None,
        ))
    return rows


def _table(rows: Sequence[ContractModel], model: type[ContractModel]) -> pa.Table:
    """A table of contract rows; an empty one still carries the columns (as strings)."""
    if rows:
        return pa.Table.from_pylist([r.model_dump(mode="json") for r in rows])
    return pa.table({name: pa.array([], pa.string()) for name in model.model_fields})


def _cohort(records: Sequence[RunRecord], admissions: Sequence[AdmissionDecision] | None) -> tuple[list[RunRecord], list[AdmissionDecision]]:
    """(records graded, exclusions shown). An excluded attempt is graded nowhere, except that a
    calibration attempt excluded only as `calibration_agent` stays in its (labelled) calibration grading."""
    if not admissions:
        return list(records), []
    excluded = [a for a in admissions if a.decision == "excluded"]
    reasons = {(a.task_id, a.condition, a.trial): a.reason_code for a in excluded}

    def graded(r: RunRecord) -> bool:
        reason = reasons.get((r.task_id, r.condition, r.trial))
        return reason is None or (r.calibration and reason == CALIBRATION_REASON)

    return [r for r in records if graded(r)], excluded


def require_one_key_per_task(records: Sequence[RunRecord], run_id: str) -> None:
    """Refuse a run whose records of one task differ in comparability key (model, fixture, verifier,
    ...): their pass rates would share one line of the report. Raises IncomparableError naming the
    differing fields and both values. Records stored before the key fields existed carry no key;
    they are graded (they can never be admitted or compared)."""
    by_task: dict[str, list[RunRecord]] = {}
    for record in records:
        by_task.setdefault(record.task_id, []).append(record)
    for task_records in by_task.values():
        try:
            comparison_key(task_records, f"run {run_id}")
        except MissingKeyError:
            continue


class RunWarnings(Document):
    """`runs/<run_id>/run-warnings.json`: distrust warnings from outside the run's records (a failed
    suite gate, a task left out of the matrix), written by the flow that ran it, read by every later grading."""

    KIND: ClassVar[str] = "run warnings"

    warnings: tuple[str, ...]
    """One line each, as the report lists them."""


def run_warnings(store: ArtifactStore, run_id: str, given: Sequence[str] | None) -> tuple[str, ...]:
    """`given` (then stored, replacing what was there), or else the run's stored warnings (none when absent)."""
    key = run_key(run_id, RUN_WARNINGS_JSON)
    if given is not None:
        store.put_json(key, RunWarnings(warnings=tuple(given)))
        return tuple(given)
    if not store.exists(key):
        return ()
    return store.get_json(key, RunWarnings).warnings


def aggregate_run(store: ArtifactStore, run_id: str, memory_texts: Mapping[str, Sequence[str]] | None = None,
                  warnings: Sequence[str] | None = None) -> Aggregate:
    """Grade a stored run and write its tables and summary; return what was written.

    `memory_texts` (task -> planted memory texts) enables the v1 surface echo; without it the echo
    is unknown. `warnings` are the flow's distrust warnings from outside the records (stored with the
    run; None reads the stored ones). The run's manifest is verified first, and an attempt whose
    stored evidence does not back its outcome is graded `ungradable` (`tasks_lib.analysis.evidence`).
    Raises RunNotFound for an unknown run, TamperedRunError for evidence that changed, the records
    reader's errors (`tasks_lib.run.records`) for records that cannot be read or disagree, and
    AggregateError/ContractError for a bad admissions table.
    """
    files = run_folder(store, run_id)
    if MANIFEST_JSON not in files:  # a sealed run whose table is gone is the seal's to name
        require_table(store, run_id, files)
    verify_run(store, run_id)  # before anything is parsed: nothing is read from a run whose evidence changed
    records = read_records(store, run_id, files, table_required=True)
    outside = run_warnings(store, run_id, warnings)
    evidence = load_evidence(store, records)
    records = with_evidence(records, evidence)
    require_one_key_per_task(records, run_id)
    admissions = load_admissions(store, run_id)
    cohort, excluded = _cohort(records, admissions)
    transcripts = {(r.task_id, r.condition, r.trial): evidence[(r.task_id, r.condition, r.trial)].transcript for r in cohort} \
        if memory_texts is not None else None
    grades = grade_attempts(cohort, transcripts, memory_texts)
    summary = summarize(run_id, cohort, grades, excluded=len(records) - len(cohort), run_warnings=outside)
    keys = {name: run_key(run_id, name) for name in (GRADES_TABLE, ABLATIONS_TABLE, AUDIT_TABLE, SUMMARY_JSON)}
    store.put_table(keys[GRADES_TABLE], _table(grades, AttemptGrade))
    store.put_table(keys[ABLATIONS_TABLE], _table(summary.ablations, ConditionDelta))
    audit = audit_rows(records, evidence)
    store.put_table(keys[AUDIT_TABLE], _table(audit, AuditRow))
    store.put_json(keys[SUMMARY_JSON], summary)
    return Aggregate(summary, tuple(grades), tuple(excluded), admissions is not None, tuple(audit), keys, tuple(records))


def summary_json(summary: GradingSummary) -> dict[str, Any]:
    """The summary as plain JSON data (for `--json` output)."""
    return json.loads(summary.model_dump_json())
