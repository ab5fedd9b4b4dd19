"""Finding and reading runs: what `memtrial runs` lists and what `memtrial show` prints.

A run's state comes from its status marker (`tasks_lib.run.status`); a run whose process on this
host is gone while its marker still says `running` is listed `stopped`.
The agents' runs of a nightly run `R` are `R-<agent>`; they carry no marker of their own and take
their parent's. A run stored before markers existed is `complete` when its records are sealed and
`unknown` otherwise (an interrupted run and a run still going look the same from its files).
A run whose records cannot be read (`tasks_lib.run.records`: a damaged or truncated table, a
table that disagrees with the per-attempt records) is listed `unreadable` with the reader's one
line, never dropped and never fatal to the listing; `show` refuses it in that line.
Everything here only reads.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from tasks_lib.agents.base import Transcript
from tasks_lib.analysis.evidence import evidence_problem, load_evidence, with_evidence
from tasks_lib.analysis.grading import DeliveryRate, GradingSummary, delivery_rates
from tasks_lib.arm.audit import AuditReceipt
from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.contracts import ContractModel, RunRecord, parse_document
from tasks_lib.errors import ArtifactError, ContractError, MemtrialError
from tasks_lib.memory.delivery.witness import DeliveryReceipt
from tasks_lib.run.layout import MANIFEST_JSON, RECORDS_TABLE, RUN_CONFIG_JSON, RUNS, SUMMARY_JSON
from tasks_lib.run.layout import STATUS_JSON as RUN_STATUS_JSON
from tasks_lib.run.records import read_records
from tasks_lib.run.seal import TamperedRunError, verify_run
from tasks_lib.run.status import RunStatus, read_status, stopped_outright

SHOWN_RUNS = 10
"""Runs named in an unknown-run error."""
SHOWN_ATTEMPTS = 20
"""Attempts named in an unknown-attempt error."""

ListedState = Literal["running", "complete", "failed", "interrupted", "stopped", "unknown", "unreadable"]

_STAMP = re.compile(r"-(\d{8})-(\d{6})-[0-9a-f]{6}(?:-|$)")
"""The UTC time stamp `tasks_lib.artifacts.new_run_id` puts in a run id."""


class UnknownRunError(MemtrialError):
    """The artifact root holds nothing under `runs/<run_id>/`."""


class UnknownAttemptError(MemtrialError):
    """A run holds no attempt of the requested task, condition and trial."""


class UnreadableRunError(MemtrialError):
    """A run's records cannot be read (damaged, truncated, or the table and per-attempt records disagree)."""


# --------------------------------------------------------------------------- the headline


def _points(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:+.1f}"


class Headline(ContractModel):
    """The figures a run is quoted by: success on - off over tasks with its 95% interval, and net MUI."""

    success_difference: float | None
    """Mean over tasks of pass rate(on) - pass rate(off), a fraction; None when no task has both."""
    success_low: float | None
    """Lower 95% bound of `success_difference`."""
    success_high: float | None
    """Upper 95% bound of `success_difference`."""
    p_value: float | None
    """Sign-flip p-value over tasks."""
    tasks: int
    """Tasks with a gradable attempt on and off."""
    net_mui: float | None
    """Net MUI (success lift + cost saving - harm), a share of on attempts; None without gradable on attempts."""
    mui_low: float | None
    """Lower 95% bound of `net_mui`."""
    mui_high: float | None
    """Upper 95% bound of `net_mui`."""
    p_text: str | None = None
    """`p_value` as the report words it: `exact`, or the Monte Carlo draws and the sample's floor
    (`p < 0.0001 (20,000 draws)`); None in a headline made before it."""

    def describe(self) -> str:
        """One line, in percentage points."""
        p = self.p_text or ("p n/a" if self.p_value is None else f"p = {self.p_value:.3g}")
        line = (f"on - off {_points(self.success_difference)} pp [95% {_points(self.success_low)}, {_points(self.success_high)}], "
                f"{p}, {self.tasks} task(s)")
        if self.net_mui is not None:
            line += f"; net MUI {_points(self.net_mui)} [95% {_points(self.mui_low)}, {_points(self.mui_high)}]"
        return line


def headline_of(summary: GradingSummary) -> Headline | None:
    """The on - off headline of a graded run; None when the run has no on/off comparison."""
    effect = next((c for c in summary.headline if c.kind == "memory-effect"), None)
    if effect is None:
        return None
    from tasks_lib.report.wording import effect_p

    d, m = effect.success_difference, effect.mui
    return Headline(success_difference=d.estimate, success_low=d.low, success_high=d.high, p_value=d.p_value, tasks=effect.tasks,
                    net_mui=m.net if m else None, mui_low=m.low if m else None, mui_high=m.high if m else None, p_text=effect_p(d))


# --------------------------------------------------------------------------- listing


class RunEntry(ContractModel):
    """One run as `memtrial runs` lists it."""

    run_id: str
    """The run (a folder under `runs/`)."""
    state: ListedState
    """From its marker (or its parent's); `stopped` when the marker says `running` but the process
    that wrote it, on this host, is gone (killed outright); without a marker: `complete` when its
    records are sealed, else `unknown`; `unreadable` whatever its marker says when its records
    cannot be read (`unreadable` says why)."""
    state_from: Literal["marker", "parent", "files"]
    """Where `state` comes from."""
    stage: str | None
    """The stage a failed run failed in, when known."""
    error: str | None
    """A failed run's error, one line."""
    parent: str | None
    """The nightly run this agent's run belongs to; None for a run of its own."""
    agents: tuple[str, ...]
    """Agents of its records (or of its marker when it has no records)."""
    memory_systems: tuple[str, ...]
    """The records' `build_under_test` values (or the marker's configured memory system)."""
    started_at: datetime | None
    """From its marker, else the stamp in its id; None when neither says."""
    headline: Headline | None
    """From `summary.json`; None when the run was not graded or has no on/off pair."""
    problems: tuple[str, ...]
    """Files of the run besides its records that could not be read, one line each."""
    rerunnable: bool = False
    """Whether `memtrial rerun` takes it: a run of `memtrial run`, which stores its resolved config
    (`run-config.json`); a paired run, or one agent's run of a nightly run, is not."""
    unreadable: str | None = None
    """Why the run's records cannot be read (damaged, truncated, or the table and the per-attempt
    records disagree), one line naming the file and what to do; None when they can."""


def run_files(store: ArtifactStore) -> dict[str, set[str]]:
    """Run id -> keys under `runs/<run_id>/` (relative to that folder), for every run of the root."""
    runs: dict[str, set[str]] = {}
    for key in store.list_keys(RUNS):
        parts = key.split("/", 2)
        if len(parts) == 3:
            runs.setdefault(parts[1], set()).add(parts[2])
    return runs


def stamp_of(run_id: str) -> datetime | None:
    """The UTC time stamp in a run id made by `new_run_id`, or None."""
    match = _STAMP.search(run_id)
    if match is None:
        return None
    try:
        return datetime.strptime(match.group(1) + match.group(2), "%Y%m%d%H%M%S").replace(tzinfo=UTC)
    except ValueError:
        return None


def _summary(store: ArtifactStore, run_id: str) -> GradingSummary:
    key = run_key(run_id, SUMMARY_JSON)
    source = f"{store.uri.rstrip('/')}/{key}"
    try:
        data = json.loads(store.get_bytes(key))
    except ValueError as error:
        raise ArtifactError(f"{source}: not valid JSON ({error})") from None
    return parse_document(GradingSummary, data, source)


@dataclass(frozen=True)
class _StoredRun:
    """What one run's files hold, each read once; a file that cannot be read is None (or empty) and named in `problems`."""

    status: RunStatus | None
    records: list[RunRecord]
    summary: GradingSummary | None
    problems: tuple[str, ...]
    unreadable: str | None = None
    """Why its records cannot be read (the records reader's one line); None when they can."""


def _read_run(store: ArtifactStore, run_id: str, files: set[str]) -> _StoredRun:
    problems: list[str] = []
    status: RunStatus | None = None
    records: list[RunRecord] = []
    summary: GradingSummary | None = None
    unreadable: str | None = None
    try:
        if RUN_STATUS_JSON in files:
            status = read_status(store, run_id)
    except (ArtifactError, ContractError) as error:
        problems.append(str(error))
    try:
        records = read_records(store, run_id, files)
    except (MemtrialError, ArtifactError, ContractError) as error:
        unreadable = str(error)
    try:
        if SUMMARY_JSON in files:
            summary = _summary(store, run_id)
    except (ArtifactError, ContractError) as error:
        problems.append(str(error))
    return _StoredRun(status, records, summary, tuple(problems), unreadable)


def _entry(run_id: str, files: set[str], parent: tuple[str, RunStatus] | None, stored: _StoredRun) -> RunEntry:
    status, records = stored.status, stored.records
    marker, state_from = (status, "marker") if status else ((parent[1], "parent") if parent else (None, "files"))
    if marker is not None:
        state: ListedState = "stopped" if stopped_outright(marker) else marker.state
    else:
        state = "complete" if {RECORDS_TABLE, MANIFEST_JSON} <= files else "unknown"
    if stored.unreadable is not None:
        state = "unreadable"
    agents = tuple(sorted({r.agent for r in records})) or (status.agents if status else ())
    builds = tuple(sorted({r.build_under_test for r in records}))
    if not builds and status and status.memory_system:
        builds = (status.memory_system,)
    return RunEntry(
        run_id=run_id, state=state, state_from=state_from,  # type: ignore[arg-type]
        stage=marker.stage if marker else None, error=marker.error if marker else None,
        parent=parent[0] if parent else None, agents=agents, memory_systems=builds,
        started_at=marker.started_at if marker else stamp_of(run_id),
        headline=headline_of(stored.summary) if stored.summary is not None and stored.unreadable is None else None,
        problems=stored.problems, rerunnable=RUN_CONFIG_JSON in files,
        unreadable=stored.unreadable,
    )


def _parents(store: ArtifactStore, runs: dict[str, set[str]]) -> dict[str, tuple[str, RunStatus]]:
    """Agent run id -> (its nightly run, that run's marker), for every marker naming agents."""
    parents: dict[str, tuple[str, RunStatus]] = {}
    for run_id, files in runs.items():
        if RUN_STATUS_JSON not in files:
            continue
        try:
            status = read_status(store, run_id)
        except (ArtifactError, ContractError):
            continue
        if status is None:
            continue
        for agent in status.agents:
            child = f"{run_id}-{agent}"
            if child in runs and child != run_id:
                parents[child] = (run_id, status)
    return parents


def newest_first(entries: Sequence[RunEntry]) -> list[RunEntry]:
    """Newest first; a run without a time last; ties (a nightly run and its agents' runs) by id."""
    floor = datetime.min.replace(tzinfo=UTC)
    by_id = sorted(entries, key=lambda e: e.run_id)
    return sorted(by_id, key=lambda e: e.started_at or floor, reverse=True)


def list_runs(store: ArtifactStore) -> list[RunEntry]:
    """Every run under the artifact root, newest first. A run whose files cannot be read is listed
    with its `problems`, never dropped."""
    runs = run_files(store)
    parents = _parents(store, runs)
    return newest_first([_entry(run_id, files, parents.get(run_id), _read_run(store, run_id, files)) for run_id, files in runs.items()])


def require_run(store: ArtifactStore, run_id: str, runs: dict[str, set[str]] | None = None) -> set[str]:
    """The run's files (from `runs`, the root's listing, when given); UnknownRunError names the root
    and the newest runs it does hold."""
    runs = run_files(store) if runs is None else runs
    if run_id in runs:
        return runs[run_id]
    known = [e.run_id for e in newest_first([RunEntry(run_id=r, state="unknown", state_from="files", stage=None, error=None, parent=None,
                                                      agents=(), memory_systems=(), started_at=stamp_of(r), headline=None, problems=())
                                             for r in runs])]
    where = f"{store.uri.rstrip('/')}/{RUNS}/"
    if not known:
        raise UnknownRunError(f"run {run_id!r}: {where} holds no runs; make one with 'memtrial paired' or 'memtrial run'")
    more = f" (and {len(known) - SHOWN_RUNS} older; 'memtrial runs' lists them)" if len(known) > SHOWN_RUNS else ""
    raise UnknownRunError(f"run {run_id!r}: not under {where}; runs there, newest first: {', '.join(known[:SHOWN_RUNS])}{more}")


# --------------------------------------------------------------------------- one run


@dataclass(frozen=True)
class RunView:
    """What `memtrial show RUN` prints."""

    entry: RunEntry
    status: RunStatus | None
    """The run's own marker (None: none, or it takes its parent's)."""
    summary: GradingSummary | None
    """The stored grading summary; None when the run was not graded."""
    delivery: tuple[DeliveryRate, ...]
    """Per condition: from the summary, else from the records checked against their evidence."""
    attempts: int
    """Records stored."""
    agent_runs: tuple[str, ...]
    """A nightly run's agents' runs."""
    seal: str
    """The evidence manifest's verdict in one line."""


def _seal(store: ArtifactStore, run_id: str, files: set[str], agent_runs: Sequence[str]) -> str:
    if MANIFEST_JSON not in files and RECORDS_TABLE not in files:
        if agent_runs:
            return "none of its own: its agents' runs hold and seal the evidence"
        return "not sealed (no records table: the run did not get that far)"
    try:
        manifest = verify_run(store, run_id)
    except TamperedRunError as error:
        return f"NOT INTACT: {error}"
    return f"sealed, {len(manifest.files)} file(s) intact"


def show_run(store: ArtifactStore, run_id: str) -> RunView:
    """A run's marker, summary, delivery and seal. Raises UnknownRunError, and UnreadableRunError
    (one line naming the file and what to do) when its records cannot be read."""
    runs = run_files(store)
    files = require_run(store, run_id, runs)
    parents = _parents(store, runs)
    stored = _read_run(store, run_id, files)
    if stored.unreadable is not None:
        raise UnreadableRunError(f"run {run_id} cannot be shown: {stored.unreadable}")
    entry = _entry(run_id, files, parents.get(run_id), stored)
    status, summary, records = stored.status, stored.summary, stored.records
    if summary is not None:
        delivery = summary.delivery
    else:
        delivery = tuple(delivery_rates(with_evidence(records, load_evidence(store, records)))) if records else ()
    children = tuple(sorted(child for child, (parent, _) in parents.items() if parent == run_id))
    return RunView(entry=entry, status=status, summary=summary, delivery=delivery, attempts=len(records),
                   agent_runs=children, seal=_seal(store, run_id, files, children))


# --------------------------------------------------------------------------- one attempt


@dataclass(frozen=True)
class AttemptView:
    """What `memtrial show RUN TASK CONDITION TRIAL` prints."""

    record: RunRecord
    transcript: Transcript | None
    audit: AuditReceipt | None
    delivery: DeliveryReceipt | None
    evidence_problem: str | None
    """Why the stored evidence does not back the record's outcome (it would be graded ungradable); None when it does."""
    check_output: str | None
    """The check's stored output (`check.txt`); None when no check ran, the run predates it, or the file is unreadable."""


def attempt_label(task: str, condition: str, trial: int) -> str:
    """`task condition trial`, as `memtrial show` takes it."""
    return f"{task} {condition} {trial}"


def parse_trial(text: str) -> int:
    """A trial given as `0` or `t0`."""
    digits = text[1:] if text[:1] == "t" else text
    if not digits.isdigit():
        raise UnknownAttemptError(f"trial {text!r} is not a number; give it as 0, 1, ... (or t0, t1, ...)")
    return int(digits)


def show_attempt(store: ArtifactStore, run_id: str, task: str, condition: str, trial: str) -> AttemptView:
    """One attempt's record with its transcript, audit receipt and delivery receipt (each None when
    missing or unreadable). Raises UnknownRunError, UnknownAttemptError, and the records reader's errors
    (`tasks_lib.run.records`) when the run's records cannot be read."""
    files = require_run(store, run_id)
    wanted = (task, condition.replace("ablate-", "ablate:", 1) if condition.startswith("ablate-") else condition, parse_trial(trial))
    records = read_records(store, run_id, files)
    found = next((r for r in records if (r.task_id, r.condition, r.trial) == wanted), None)
    if found is None:
        cells = sorted((r.task_id, r.condition, r.trial) for r in records)
        if not cells:
            raise UnknownAttemptError(f"run {run_id!r} holds no attempts yet (no records table, no attempts/.../record.json)")
        shown = "; ".join(attempt_label(*c) for c in cells[:SHOWN_ATTEMPTS])
        more = f" (and {len(cells) - SHOWN_ATTEMPTS} more)" if len(cells) > SHOWN_ATTEMPTS else ""
        raise UnknownAttemptError(f"run {run_id!r} has no attempt {attempt_label(*wanted)}; its attempts: {shown}{more}")
    evidence = load_evidence(store, [found])[wanted]
    return AttemptView(record=found, transcript=evidence.transcript, audit=evidence.receipt, delivery=evidence.delivery,
                       evidence_problem=evidence_problem(found, evidence), check_output=_check_output(store, found.check_output))


def _check_output(store: ArtifactStore, key: str | None) -> str | None:
    if not key:
        return None
    try:
        return store.get_bytes(key).decode("utf-8", "replace")
    except ArtifactError:
        return None


def abbreviate(text: str, width: int) -> str:
    """`text` on one line, at most `width` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 3] + "..."

