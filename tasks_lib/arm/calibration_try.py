"""`memtrial task try`: the calibration agent's off/on pair on one task, against what the corpus predicts.

An author runs the task through the whole arm pipeline (workspace from git objects, memory
planted and delivered by the hook, audit, sandboxed check) with the calibration agent, whose
behaviour follows from the task's kind and the lanes that retrieve its key memory
(`tasks_lib.agents.calibration_plan`). Each condition's record is set beside that prediction, so a
task whose memory never reaches the agent, or whose check does not flip as its kind says, shows
up before any paid run.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.agents.calibration_plan import ExpectedAttempt, expected_attempt, measure_key_lanes
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import LoadedTask

TRY_CONDITIONS = ("off", "on")


@dataclass(frozen=True)
class TryOutcome:
    """One condition of the pair: the record and the calibration plan's prediction for it."""

    condition: str
    record: RunRecord
    expected: ExpectedAttempt

    @property
    def as_expected(self) -> bool:
        """The check's verdict is the one the corpus predicts for this condition."""
        return self.record.outcome == self.expected.outcome


def try_task(task: LoadedTask, *, repo_root: Path, commit: str, tasks_subdir: str, artifacts: Path | None = None) -> list[TryOutcome]:
    """Run the calibration agent on `task` under off and on (one trial each) from `commit`; return both outcomes.

    The prediction uses the lanes the reference store measures for the task now (the declaration
    may not exist yet while authoring). Artifacts go under `artifacts`, or a temporary folder.
    """
    lanes = measure_key_lanes(task)
    with tempfile.TemporaryDirectory(prefix="memtrial-task-try-") as tmp:
        store = LocalStore(artifacts or Path(tmp))
        records = run_matrix(schedule([task], TRY_CONDITIONS, 1), run_id=f"try-{task.task_id}", repo_root=repo_root, commit=commit,
                             tasks_subdir=tasks_subdir, agent_name="calibration", store=store)
    return [TryOutcome(r.condition, r, expected_attempt(task, r.condition, lanes)) for r in records]
