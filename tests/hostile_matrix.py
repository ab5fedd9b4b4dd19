"""Drive the real paired matrix (`tasks_lib.arm.steps.run_matrix`) with a hostile `command` agent.

Lighter than `hostile_flow.run_hostile` (no Prefect, no calibration matrix before it), for the hostile
tests whose attack is on the memory side: each attempt still runs the arm's own composition (the
task's fixture from this checkout's committed git objects, the run's realm secret, the reference
store behind the runner's delivery witness, the agent unprivileged in the real sandbox, audit, check,
record). `run_command_matrix` returns the records and the artifact store they were written to.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks

REPO = Path(__file__).resolve().parents[1]
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def run_command_matrix(artifacts: Path, script: str, tasks: Sequence[str], conditions: Sequence[str],
                       run_id: str) -> tuple[list[RunRecord], LocalStore]:
    """Run `script` (Python, in the agent's sandbox, workspace as cwd) as the `command` agent on every
    task x condition, one trial; return its records (schedule order) and the store under `artifacts`."""
    store = LocalStore(artifacts)
    attempts = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), list(tasks)), list(conditions), 1)
    records = run_matrix(attempts, run_id=run_id, repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="command", store=store, agent_options={"argv": ["python3", "-c", script]})
    return records, store
