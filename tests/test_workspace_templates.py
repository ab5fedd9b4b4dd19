"""Workspace templates: built once, copied exactly, and never trusted over the audit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tasks_lib.arm.audit import audit, snapshot_tree
from tasks_lib.arm.workspace import (
    WorkspaceTemplates,
    build_redacted,
    listing_snapshot,
)
from tasks_lib.corpus.build import build_tree

GIT_ENV = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": "/nonexistent"}


def repo_with_modes(tmp_path: Path, extra: dict[str, str] | None = None) -> tuple[Path, str]:
    """A repository whose fixture has nested folders, an executable, a symlink, and `extra` files."""
    repo = tmp_path / "repo"
    fixture = repo / "fx"
    (fixture / "src" / "deep" / "er").mkdir(parents=True)
    (fixture / "src" / "deep" / "er" / "mod.py").write_text("VALUE = 1\n")
    (fixture / "README.md").write_text("# project\n")
    (fixture / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (fixture / "run.sh").chmod(0o755)
    os.symlink("src/deep/er/mod.py", fixture / "link.py")
    for rel, text in (extra or {}).items():
        (fixture / rel).parent.mkdir(parents=True, exist_ok=True)
        (fixture / rel).write_text(text)
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-q", "-m", "fixture"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=GIT_ENV, capture_output=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, commit


def test_the_snapshot_from_the_build_listing_equals_hashing_the_tree(tmp_path: Path) -> None:
    """Skipping the first hash pass must not change a single entry or the digest."""
    repo, commit = repo_with_modes(tmp_path)
    build = build_tree(repo, commit, tmp_path / "built", subdir="fx")
    assert listing_snapshot(tmp_path / "built", build) == snapshot_tree(tmp_path / "built")


def test_redaction_that_removes_files_falls_back_to_hashing(tmp_path: Path) -> None:
    repo, commit = repo_with_modes(tmp_path, {"CLAUDE.md": "remember: tabs\n", ".claude/settings.json": "{}\n"})
    _corpus_id, snapshot = build_redacted(repo, commit, "fx", tmp_path / "ws")
    paths = {e.path for e in snapshot.entries}
    assert "CLAUDE.md" not in paths and not any(p.startswith(".claude") for p in paths)
    assert not (tmp_path / "ws" / "CLAUDE.md").exists() and not (tmp_path / "ws" / ".claude").exists()
    assert snapshot == snapshot_tree(tmp_path / "ws")


def test_every_copy_is_the_template_exactly(tmp_path: Path) -> None:
    repo, commit = repo_with_modes(tmp_path)
    templates = WorkspaceTemplates(tmp_path / "templates")
    first = templates.materialize(repo, commit, "fx", tmp_path / "a")
    second = templates.materialize(repo, commit, "fx", tmp_path / "b")
    assert first == second
    assert snapshot_tree(tmp_path / "a") == snapshot_tree(tmp_path / "b") == first[1]
    assert os.readlink(tmp_path / "b" / "link.py") == "src/deep/er/mod.py"
    assert len(list((tmp_path / "templates").iterdir())) == 1, "one template per fixture"


def test_another_process_reuses_a_built_template(tmp_path: Path) -> None:
    repo, commit = repo_with_modes(tmp_path)
    WorkspaceTemplates(tmp_path / "templates").materialize(repo, commit, "fx", tmp_path / "a")
    (template,) = (tmp_path / "templates").iterdir()
    built_at = (template / "template.json").stat().st_mtime_ns
    _corpus_id, snapshot = WorkspaceTemplates(tmp_path / "templates").materialize(repo, commit, "fx", tmp_path / "b")
    assert (template / "template.json").stat().st_mtime_ns == built_at
    assert snapshot == snapshot_tree(tmp_path / "b")


def test_a_template_changed_after_it_was_built_fails_the_audit(tmp_path: Path) -> None:
    """A tampered template (e.g. by an earlier unsandboxed agent) is caught, never silently copied."""
    repo, commit = repo_with_modes(tmp_path)
    templates = WorkspaceTemplates(tmp_path / "templates")
    templates.materialize(repo, commit, "fx", tmp_path / "a")
    (template,) = (tmp_path / "templates").iterdir()
    (template / "tree" / "README.md").write_text("# project\nThe answer is 42.\n")
    _corpus_id, before = templates.materialize(repo, commit, "fx", tmp_path / "b")
    receipt = audit(before, tmp_path / "b", ["out"])
    assert not receipt.passed and [(c.path, c.kind) for c in receipt.violations] == [("README.md", "changed")]


def test_a_bad_commit_leaves_no_template_behind(tmp_path: Path) -> None:
    repo, _commit = repo_with_modes(tmp_path)
    templates = WorkspaceTemplates(tmp_path / "templates")
    with pytest.raises(Exception, match="0000000"):
        templates.materialize(repo, "0" * 40, "fx", tmp_path / "a")
    assert list((tmp_path / "templates").iterdir()) == [] and not (tmp_path / "a").exists()
