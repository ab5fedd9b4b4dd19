"""Compare two runs: per task and condition pass rates and their difference, only on matching keys.

Both runs must hold the same tasks, and for each task the comparability key of its records
(challenge, fixture, model, conditions, manifest and verifier digests, source commit) must be the
same in both runs; otherwise `compare_runs` raises IncomparableError naming the differing fields
with both values. The build under test is not part of the key; it is reported per run and cell.
By default only admitted records count; `basis="completed"` compares every completed record
(for calibration runs, which are never admitted) and says so in the result.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Literal

from pydantic import Field

from tasks_lib.analysis.admission import load_decisions, load_records
from tasks_lib.analysis.evidence import load_evidence, with_evidence
from tasks_lib.analysis.stats import wilson
from tasks_lib.arm.comparability import (
    ComparabilityKey,
    IncomparableError,
    comparison_key,
    require_same_key,
)
from tasks_lib.artifacts import ArtifactStore
from tasks_lib.contracts import Condition, ContractModel, Identifier, RunRecord
from tasks_lib.run.seal import verify_run

Basis = Literal["admitted", "completed"]


class RateCell(ContractModel):
    """Pass rate of one task under one condition in one run."""

    passes: int = Field(ge=0)
    """Graded attempts that passed."""
    graded: int = Field(ge=0)
    """Attempts with a pass or fail verdict (ungradable ones are not counted)."""
    rate: float | None
    """passes / graded; None when nothing was graded."""
    wilson_low: float | None
    """Lower bound of the 95% Wilson interval."""
    wilson_high: float | None
    """Upper bound of the 95% Wilson interval."""
    builds: tuple[str, ...]
    """Builds under test of the counted attempts."""


class CellComparison(ContractModel):
    """One task and condition in both runs."""

    task_id: Identifier
    """The task."""
    condition: Condition
    """The memory condition."""
    a: RateCell
    """Run A."""
    b: RateCell
    """Run B."""
    difference: float | None
    """Pass rate of B minus pass rate of A; None unless both were graded."""


class RunComparison(ContractModel):
    """Two runs side by side, only ever with matching comparability keys."""

    run_a: Identifier
    """The first run."""
    run_b: Identifier
    """The second run."""
    basis: Basis
    """Which records counted: admitted ones, or every completed one."""
    keys: tuple[ComparabilityKey, ...]
    """The shared key of each task."""
    cells: tuple[CellComparison, ...]
    """Every task and condition, sorted."""


def counted_records(store: ArtifactStore, run_id: str, basis: Basis) -> list[RunRecord]:
    """The records of `run_id` that count on `basis` (its manifest verified, an outcome its evidence does
    not back made `ungradable`); IncomparableError when none do."""
    verify_run(store, run_id)  # first: nothing is read from a run whose evidence changed
    records = load_records(store, run_id)
    records = with_evidence(records, load_evidence(store, records))
    if basis == "admitted":
        admitted = {(d.task_id, d.condition, d.trial) for d in load_decisions(store, run_id) if d.decision == "admitted"}
        records = [r for r in records if (r.task_id, r.condition, r.trial) in admitted]
        if not records:
            raise IncomparableError(
                f"run {run_id} has no admitted records (calibration runs never do); compare completed records with --completed"
            )
    return records


def rate_cell(records: Sequence[RunRecord]) -> RateCell:
    """Pass rate and Wilson interval of `records` (ungradable ones left out)."""
    graded = [r for r in records if r.outcome in ("pass", "fail")]
    passes = sum(r.outcome == "pass" for r in graded)
    builds = tuple(sorted({r.build_under_test for r in records}))
    if not graded:
        return RateCell(passes=0, graded=0, rate=None, wilson_low=None, wilson_high=None, builds=builds)
    interval = wilson(passes, len(graded))
    return RateCell(passes=passes, graded=len(graded), rate=passes / len(graded), wilson_low=interval.lower,
                    wilson_high=interval.upper, builds=builds)


def _by_task(records: Sequence[RunRecord]) -> dict[str, list[RunRecord]]:
    grouped: dict[str, list[RunRecord]] = defaultdict(list)
    for record in records:
        grouped[record.task_id].append(record)
    return grouped


def compare_runs(store: ArtifactStore, run_a: str, run_b: str, basis: Basis = "admitted") -> RunComparison:
    """Per task and condition pass rates of both runs and their difference; IncomparableError on any key mismatch."""
    tasks_a = _by_task(counted_records(store, run_a, basis))
    tasks_b = _by_task(counted_records(store, run_b, basis))
    if set(tasks_a) != set(tasks_b):
        only_a, only_b = sorted(set(tasks_a) - set(tasks_b)), sorted(set(tasks_b) - set(tasks_a))
        raise IncomparableError(
            f"runs {run_a} and {run_b} hold different tasks (only in {run_a}: {', '.join(only_a) or 'none'}; "
            f"only in {run_b}: {', '.join(only_b) or 'none'}); compare runs of the same tasks"
        )
    keys, cells = [], []
    for task in sorted(tasks_a):
        key = require_same_key([
            (f"{run_a} {task}", comparison_key(tasks_a[task], run_a)),
            (f"{run_b} {task}", comparison_key(tasks_b[task], run_b)),
        ])
        keys.append(key)
        for condition in key.conditions:
            a = rate_cell([r for r in tasks_a[task] if r.condition == condition])
            b = rate_cell([r for r in tasks_b[task] if r.condition == condition])
            difference = b.rate - a.rate if a.rate is not None and b.rate is not None else None
            cells.append(CellComparison(task_id=task, condition=condition, a=a, b=b, difference=difference))
    return RunComparison(run_a=run_a, run_b=run_b, basis=basis, keys=tuple(keys), cells=tuple(cells))
