"""One task's edit blocks only that task: through the real paired flow on a clone of this checkout,
a run of every task goes on when one task folder is an unfinished scaffold, and lists it as left out."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from flows.paired import paired_flow
from gitrepo import git
from tasks_lib.corpus.authoring import scaffold_task
from tasks_lib.run.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
TASK = "logship-partial-exit"


def test_a_run_of_every_task_leaves_an_unfinished_scaffold_out_and_says_so(prefect_harness: None, tmp_path: Path) -> None:
    """Regression: after `memtrial task new demo-task`, every run of the corpus stopped at loading the
    task list (the scaffold's TODOs); the run now measures the other tasks and names the scaffold in
    its exclusions (which its distrust lines repeat)."""
    clone = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--shared", str(REPO), str(clone)], check=True)
    tasks = clone / "corpora" / "tasks"
    for folder in tasks.iterdir():
        if folder.is_dir() and folder.name != TASK:
            shutil.rmtree(folder)
    lanes = json.loads((tasks / "key_lanes.json").read_text())
    lanes["tasks"] = {TASK: lanes["tasks"][TASK]}
    (tasks / "key_lanes.json").write_text(json.dumps(lanes))
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", "one task")
    scaffold_task(tasks, "demo-task", "convention")  # uncommitted and unfinished, as `memtrial task new` leaves it
    result = paired_flow(RunConfig(conditions=["off"], trials=1, suites=[]), "broken-left-out", str(clone), str(tmp_path / "artifacts"))
    assert [r.task_id for r in result.records] == [TASK]
    assert result.excluded["demo-task"].startswith("layout: ") and "unfinished scaffold" in result.excluded["demo-task"]
