"""Hostile class 7: runner-owned files taken from the working tree. The invariants are proven on a
commit's git objects, but the arms read `task.json`, `hidden/` and the verifier from the checkout, so
an edited, uncommitted verifier was used silently. Through the real paired flow on a clone of this
repository: the committed verifier grades, and an edited task.json stops the run by name."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from flows.paired import paired_flow
from tasks_lib.arm.comparability import verifier_digest
from tasks_lib.artifacts import open_store
from tasks_lib.corpus.tasks import load_task
from tasks_lib.run.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
TASK = "logship-partial-exit"
"""A convention task: the calibration agent fails it without memory."""


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of this checkout's HEAD: its working tree is the test's to edit."""
    target = tmp_path / "checkout"
    subprocess.run(["git", "clone", "--quiet", "--no-hardlinks", str(REPO), str(target)], check=True)
    return target


def _run(clone: Path, tmp_path: Path):  # type: ignore[no-untyped-def]
    config = RunConfig(tasks=[TASK], conditions=["off"], trials=1, suites=[])
    return paired_flow(config, "pinned-files", str(clone), str(tmp_path / "artifacts"))


def test_an_uncommitted_verifier_that_always_passes_is_not_used(prefect_harness: None, clone: Path, tmp_path: Path) -> None:
    """Regression: `exit 0` written over the checkout's verifier turned every attempt into a pass."""
    task_dir = clone / "corpora" / "tasks" / TASK
    committed = verifier_digest(load_task(task_dir).manifest, task_dir / "hidden")
    (task_dir / "verifier.sh").write_text("#!/bin/sh\nexit 0\n")
    (task_dir / "hidden" / "tests" / "test_partial_delivery.py").write_text("")
    (record,) = _run(clone, tmp_path).records
    assert record.outcome == "fail", record
    assert record.verifier_digest == committed, "the record names the verifier the invariants certified"
    check = open_store(tmp_path / "artifacts").get_bytes(record.check_output or "").decode()
    verifier_output = check.split("--- verifier ---", 1)[1]
    assert "Ran " in verifier_output, "the committed verifier ran the project's suite (the planted one prints nothing)"


def test_an_uncommitted_task_manifest_stops_the_arm_by_name(prefect_harness: None, clone: Path, tmp_path: Path) -> None:
    """Regression: an edited task.json (its prompts, memories, allowed paths) ran unchecked."""
    manifest = clone / "corpora" / "tasks" / TASK / "task.json"
    manifest.write_text(manifest.read_text().replace('"logship",', '"logship", "tests",'))
    with pytest.raises(Exception, match=r"task.json: differs from commit [0-9a-f]{12}, whose git objects the invariants certified"):
        _run(clone, tmp_path)


def test_a_run_gates_each_of_its_own_tasks_and_no_other(prefect_harness: None, clone: Path, tmp_path: Path) -> None:
    """The run checks the invariants of the tasks it measures (not the whole corpus, which made every
    small run pay for all of it): a committed verifier that no longer matches its pinned digest
    excludes that task by name, the other task runs, and a broken task outside the run stops nothing."""
    for task in (TASK, "rotlog-keep-count"):
        verifier = clone / "corpora" / "tasks" / task / "verifier.sh"
        verifier.write_text(verifier.read_text() + "exit 0\n")
    subprocess.run(["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.org", "commit", "-qam", "break two verifiers"],
                   check=True)
    config = RunConfig(tasks=[TASK, "tabmill-delimiter"], conditions=["off"], trials=1, suites=[])
    result = paired_flow(config, "gate-own-tasks", str(clone), str(tmp_path / "artifacts"))
    assert result.excluded == {TASK: "invariants: digests-match"}
    assert [(r.task_id, r.condition) for r in result.records] == [("tabmill-delimiter", "off")]
