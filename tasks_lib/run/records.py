"""The one reader of a run's records: the records table and the per-attempt records, reconciled.

A run stores each attempt's record twice: `attempts/<task>/<condition>/t<trial>/record.json`, written
when the attempt ends, and one row of `records.parquet`, written with every record when the matrix
is done (and sealed with them). `read_records` reads both and refuses, in one line naming the file
and what to do, a run where they disagree: a row with no per-attempt record, a per-attempt record
with no row, a row given twice, or a field whose values differ. A run that stopped before its table
was written (no table, no seal) is read from its per-attempt records alone; a sealed run whose
table is gone is refused.

Every stage, command and report reads a run's records through `read_records` (grading, admission,
comparison, publication, `memtrial runs`, `show`, `power`). It only reads and never repairs; it
checks only the table's own sealed digest (the whole seal is `tasks_lib.run.seal.verify_run`'s,
which graders call first).

A damaged table is never handed to pyarrow when the run's seal can tell: a table whose sha256 is
not the one sealed is refused unread. Any other table is parsed by `ParquetFile.read` on the
calling thread with no read-ahead: `pq.read_table` (pyarrow's dataset scanner and its thread
pools), given a corrupted buffer, raised its error and then aborted the interpreter at exit
("terminate called without an active exception", SIGABRT, in most tries, `use_threads=False` and
`pre_buffer=False` included), after memtrial had printed its one-line error. The store's
`get_table` and the release check read Parquet the same way.
"""

from __future__ import annotations

import io
import json
from collections.abc import Collection, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from tasks_lib.artifacts import ArtifactStore, read_concurrently, run_key
from tasks_lib.contracts import RunRecord, parse_document
from tasks_lib.errors import ArtifactError, MemtrialError
from tasks_lib.run.layout import (
    MANIFEST_JSON,
    RECORD_JSON,
    RECORDS_TABLE,
    RUNS,
    attempt_file,
    is_attempt_record,
)
from tasks_lib.trees import sha256_bytes

Cell = tuple[str, str, int]
"""An attempt's (task, condition, trial)."""

FIX = "restore the run's original artifacts, or run it again"
"""What a user can do about a damaged run (its evidence cannot be repaired in place)."""
ERROR_WIDTH = 200
"""Characters of a parser's own message kept in a one-line error."""


class RunNotFound(MemtrialError):
    """The artifact root holds no records for the requested run."""


class UnreadableRecordsError(ArtifactError):
    """A run's records table or one of its per-attempt records cannot be read."""


class RecordsDisagreeError(MemtrialError):
    """A run's records table and its per-attempt records do not hold the same records."""


def cell_of(record: RunRecord) -> Cell:
    """The attempt a record is of."""
    return (record.task_id, record.condition, record.trial)


def cell_label(cell: Cell) -> str:
    """`task/condition/trial`, as errors name an attempt."""
    return "/".join(map(str, cell))


def run_folder(store: ArtifactStore, run_id: str) -> set[str]:
    """Keys under `runs/<run_id>/`, relative to that folder."""
    prefix = run_key(run_id) + "/"
    return {key.removeprefix(prefix) for key in store.list_keys(run_key(run_id))}


def _where(store: ArtifactStore, run_id: str, rel: str) -> str:
    return f"{store.uri.rstrip('/')}/{run_key(run_id, rel)}"


def _short(error: BaseException) -> str:
    text = " ".join(str(error).split()) or type(error).__name__
    return text if len(text) <= ERROR_WIDTH else text[: ERROR_WIDTH - 3] + "..."


def parse_table(data: bytes, where: str) -> list[dict[str, object]]:
    """The rows of a Parquet table's bytes, parsed on this thread. UnreadableRecordsError names `where`."""
    try:
        return pq.ParquetFile(io.BytesIO(data), pre_buffer=False).read(use_threads=False).to_pylist()
    except (pa.ArrowException, OSError, ValueError) as error:
        raise UnreadableRecordsError(f"{where}: not a readable Parquet table ({_short(error)}); {FIX}") from None


def table_records(store: ArtifactStore, run_id: str) -> list[tuple[int, RunRecord]]:
    """(row index, record) of every row of the run's records table, in table order. ContractError names
    a bad row; RecordsDisagreeError a cell given twice."""
    where = _where(store, run_id, RECORDS_TABLE)
    data = store.get_bytes(run_key(run_id, RECORDS_TABLE))
    sealed = sealed_digest(store, run_id)
    if sealed is not None and sha256_bytes(data) != sealed:
        raise UnreadableRecordsError(f"{where}: changed after the run was sealed (sha256 {sha256_bytes(data)[:12]}..., sealed "
                                     f"{sealed[:12]}...), so it is not read; {FIX}")
    rows = parse_table(data, where)
    records: list[tuple[int, RunRecord]] = []
    seen: dict[Cell, int] = {}
    for index, row in enumerate(rows):
        record = parse_document(RunRecord, {k: v for k, v in row.items() if v is not None}, f"{where} row {index}")
        cell = cell_of(record)
        if cell in seen:
            raise RecordsDisagreeError(f"{where} row {index}: a second record for {cell_label(cell)} (row {seen[cell]} is the first); "
                                       f"a run has one per task, condition and trial: {FIX}")
        seen[cell] = index
        records.append((index, record))
    return records


def attempt_records(store: ArtifactStore, run_id: str, rels: Iterable[str]) -> dict[Cell, tuple[str, RunRecord]]:
    """Cell -> (key relative to the run's folder, record) of every per-attempt record named in `rels`.
    UnreadableRecordsError names a record that cannot be read, is of another run or lies in another
    attempt's folder."""
    keys = sorted(rels)

    def read(rel: str) -> RunRecord:
        try:
            return store.get_json(run_key(run_id, rel), RunRecord)
        except (ArtifactError, MemtrialError) as error:
            raise UnreadableRecordsError(f"{_short(error)}; {FIX}") from None

    found: dict[Cell, tuple[str, RunRecord]] = {}
    for rel, record in zip(keys, read_concurrently(read, keys)):
        if record.run_id != run_id:
            raise UnreadableRecordsError(f"{_where(store, run_id, rel)}: field 'run_id' is {record.run_id!r}, not {run_id!r}; "
                                         f"it was copied from another run: {FIX}")
        if rel != attempt_file(*cell_of(record), RECORD_JSON):
            raise UnreadableRecordsError(f"{_where(store, run_id, rel)}: a record of {cell_label(cell_of(record))} stored in "
                                         f"another attempt's folder: {FIX}")
        found[cell_of(record)] = (rel, record)
    return found


def first_difference(a: RunRecord, b: RunRecord) -> tuple[str, object, object] | None:
    """(field, value in `a`, value in `b`) of the first field where two records differ; None when none does."""
    for name in type(a).model_fields:
        left, right = getattr(a, name), getattr(b, name)
        if left != right:
            return name, left, right
    return None


def reconcile(store: ArtifactStore, run_id: str, table: Sequence[tuple[int, RunRecord]],
              attempts: dict[Cell, tuple[str, RunRecord]]) -> None:
    """Refuse a table and per-attempt records that do not hold the same records (RecordsDisagreeError:
    the first row missing, extra row or differing field, and how many disagreements there are)."""
    where = _where(store, run_id, RECORDS_TABLE)
    problems: list[str] = []
    in_table = {cell_of(record) for _, record in table}
    for index, record in table:
        cell = cell_of(record)
        if cell not in attempts:
            problems.append(f"{where} row {index}: {cell_label(cell)} has no per-attempt record "
                            f"({attempt_file(*cell, RECORD_JSON)} is missing)")
            continue
        rel, stored = attempts[cell]
        differs = first_difference(record, stored)
        if differs is not None:
            field, mine, theirs = differs
            problems.append(f"{where} row {index}: field {field!r} of {cell_label(cell)} is {mine!r}, but {rel} says {theirs!r}")
    for cell in sorted(set(attempts) - in_table):
        problems.append(f"{where}: no row for {cell_label(cell)}, which {attempts[cell][0]} records")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise RecordsDisagreeError(f"{problems[0]}{more}; the records table and the per-attempt records disagree: {FIX}")


def sealed_digest(store: ArtifactStore, run_id: str) -> str | None:
    """The sha256 the run's seal (`manifest.json`, written by `tasks_lib.run.seal`) gives its records
    table; None when the run has no readable seal or the seal names no table. Read as plain JSON: an
    unreadable seal says nothing here (`verify_run` refuses it), and the seal's module builds on this
    package's layout."""
    try:
        files = json.loads(store.get_bytes(run_key(run_id, MANIFEST_JSON)))["files"]
        table = run_key(run_id, RECORDS_TABLE)
        return next((str(f["sha256"]) for f in files if f["key"] == table), None)
    except (MemtrialError, ValueError, KeyError, TypeError):
        return None


def known_runs(store: ArtifactStore) -> list[str]:
    """Run ids under the artifact root that have a records table."""
    suffix = f"/{RECORDS_TABLE}"
    return sorted(k.split("/")[1] for k in store.list_keys(RUNS) if k.endswith(suffix) and k.count("/") == 2)


def require_table(store: ArtifactStore, run_id: str, files: Collection[str]) -> None:
    """RunNotFound, naming the root and the runs it holds, when the run has no records table."""
    if RECORDS_TABLE in files:
        return
    runs = known_runs(store)
    hint = f"known runs: {', '.join(runs[-10:])}" if runs else "it holds no runs; make one with 'memtrial paired'"
    raise RunNotFound(f"run {run_id!r}: no {RECORDS_TABLE} under {store.uri.rstrip('/')}/{RUNS}/{run_id}/; {hint}")


def read_records(store: ArtifactStore, run_id: str, files: Collection[str] | None = None, *,
                 table_required: bool = False) -> list[RunRecord]:
    """The run's records, the table and the per-attempt records reconciled: in table order, or (a run
    stopped before its table was written) the per-attempt records by task, condition and trial.

    `files` are the keys under `runs/<run_id>/` (listed when not given). With `table_required`, a run
    without a table is RunNotFound. Raises UnreadableRecordsError (a file that cannot be read, a
    sealed run whose table is gone), RecordsDisagreeError, ContractError (a row that is no record).
    """
    files = run_folder(store, run_id) if files is None else files
    if table_required:
        require_table(store, run_id, files)
    attempts = attempt_records(store, run_id, (f for f in files if is_attempt_record(f)))
    if RECORDS_TABLE not in files:
        if MANIFEST_JSON in files and sealed_digest(store, run_id) is not None:
            raise UnreadableRecordsError(f"{_where(store, run_id, RECORDS_TABLE)}: missing, but the run was sealed "
                                         f"({MANIFEST_JSON}) with it; {FIX}")
        return [attempts[cell][1] for cell in sorted(attempts)]
    table = table_records(store, run_id)
    reconcile(store, run_id, table, attempts)
    return [record for _, record in table]
