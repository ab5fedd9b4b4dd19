"""Applying hidden/ never follows a symlink the agent made. `calc-add` allows the agent to change
`tests/`, so a real `command` agent (in the real sandbox, unprivileged) swaps `tests/` or the hidden
test's own path for a symlink: to a host folder, a host file, or nowhere. The runner must write
nothing through it, and the attempt must fail with the symlink named, never crash the run."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from hostile_corpus import RUN_ID, TARGET, make_corpus, register_planter
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import OverlayRefused, overlay
from tasks_lib.trees import walk_files

CASES = {
    "tests-folder-to-host-folder": ("tests", "host-folder"),
    "tests-folder-dangling": ("tests", "nowhere"),
    "hidden-test-to-host-file": ("tests/test_hidden.py", "host-file"),
}
"""Case -> (the workspace path the agent swaps, what the symlink points at)."""


def _host_tree(root: Path) -> dict[str, bytes]:
    return {rel: (root / rel).read_bytes() for rel in walk_files(root)}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_a_symlink_where_hidden_tests_go_is_a_named_violation_and_nothing_is_written_through_it(case: str, tmp_path: Path) -> None:
    """Regression (issue #15, class 3): with `tests/` a symlink the hidden tests were written onto a
    host path, as root; a dangling link aborted the whole run (exit 2)."""
    swapped, kind = CASES[case]
    host = tmp_path / "host"
    (host / "folder").mkdir(parents=True)
    (host / "folder" / "keep.txt").write_text("the runner's own file\n")
    (host / "file.txt").write_text("a host file\n")
    target = {"host-folder": host / "folder", "host-file": host / "file.txt",
              "nowhere": tmp_path / f"absent-{secrets.token_hex(4)}" / "tests"}[kind]
    before = _host_tree(host)
    corpus = make_corpus(tmp_path)
    register_planter(f"symlinker-{case}", "--symlink", str(target), swapped)
    plan = schedule([corpus.tasks[TARGET]], ["off", "on"], 1)
    records = run_matrix(plan, run_id=RUN_ID, repo_root=corpus.repo, commit=corpus.commit, tasks_subdir="tasks",
                         agent_name=f"symlinker-{case}", store=LocalStore(tmp_path / "artifacts"))
    assert len(records) == 2, "every attempt of the run completed"
    for record in records:
        assert record.audit_passed, "the swap is inside the allowed paths; only the overlay can catch it"
        assert record.outcome == "fail" and record.check_exit_code is None and record.check_sandbox is None
        assert record.failure_reason == (f"hidden/ not applied: {swapped}: a symlink (to '{target}') stands where the runner "
                                         "writes tests/test_hidden.py; the overlay never follows a symlink")
    assert _host_tree(host) == before, "the host folder and file are untouched"
    if kind == "nowhere":
        assert not target.parent.exists(), "nothing was created at the dangling target"


def test_overlay_refuses_a_file_where_a_runner_folder_goes(tmp_path: Path) -> None:
    """A plain file where hidden/ needs a folder is named too (and nothing else is written)."""
    source, dest = tmp_path / "hidden", tmp_path / "workspace"
    (source / "tests").mkdir(parents=True)
    (source / "tests" / "test_hidden.py").write_text("pass\n")
    dest.mkdir()
    (dest / "tests").write_text("not a folder\n")
    with pytest.raises(OverlayRefused, match="^tests: not a folder stands where the runner writes tests/test_hidden.py$"):
        overlay(source, dest)
    assert (dest / "tests").read_text() == "not a folder\n"


def test_overlay_copies_content_mode_and_replaces_a_plain_file(tmp_path: Path) -> None:
    """The control: over a regular tree the overlay still creates folders, replaces files and keeps modes."""
    source, dest = tmp_path / "hidden", tmp_path / "workspace"
    (source / "a" / "b").mkdir(parents=True)
    (source / "a" / "b" / "run.sh").write_text("#!/bin/sh\n")
    (source / "a" / "b" / "run.sh").chmod(0o755)
    (source / "top.txt").write_text("new\n")
    dest.mkdir()
    (dest / "top.txt").write_text("old\n")
    assert sorted(overlay(source, dest)) == ["a/b/run.sh", "top.txt"]
    assert (dest / "top.txt").read_text() == "new\n" and (dest / "a" / "b" / "run.sh").stat().st_mode & 0o777 == 0o755
