"""Runner-owned task files as the invariants certified them: read from git objects, checked at use.

The corpus invariants are proven on a commit's git objects, so an arm must grade with those same
bytes, never with whatever the checkout holds now. `pin_task` writes the task's `task.json`, its
verifier and its `hidden/` tree from the commit's objects into a runner-owned folder (outside the
workspace) and refuses a checkout whose `task.json` differs from the commit's (the prompts,
memories and allowed paths the arm already used come from it). `check_pinned` re-hashes every
pinned file right before the check uses it; a file that changed since is a named error.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.contracts import TaskManifest, parse_document
from tasks_lib.corpus.build import build_tree
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.errors import MemtrialError
from tasks_lib.trees import sha256_file, walk_files


class PinnedTaskError(MemtrialError):
    """A task's runner-owned files differ from the commit the invariants certified, or changed before use."""


@dataclass(frozen=True)
class PinnedTask:
    """A task's runner-owned files, from git objects, with the digest of each at pinning time."""

    task: LoadedTask
    """The task as committed; its `root` is the runner-owned folder holding the pinned files."""
    digests: tuple[tuple[str, str], ...]
    """(path relative to `task.root`, sha256) of every pinned file."""


def _blob(repo: Path, commit: str, path: str) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), "cat-file", "blob", f"{commit}:{path}"], capture_output=True, check=False)
    if done.returncode != 0:
        raise PinnedTaskError(f"{repo}: {path} is not in commit {commit[:12]} ({done.stderr.decode(errors='replace').strip()}); "
                              "tasks run from committed files only: commit it")
    return done.stdout


def committed_manifest(task: LoadedTask, repo: Path, commit: str, task_subdir: str) -> tuple[bytes, TaskManifest]:
    """`task`'s task.json as committed (bytes and model). Raises PinnedTaskError when the checkout's
    task.json differs from it (the flow checks this before it sends an arm the committed task)."""
    manifest_bytes = _blob(repo, commit, f"{task_subdir}/task.json")
    manifest = parse_document(TaskManifest, json.loads(manifest_bytes), f"{commit[:12]}:{task_subdir}/task.json")
    if manifest != task.manifest:
        raise PinnedTaskError(f"{task.root / 'task.json'}: differs from commit {commit[:12]}, whose git objects the invariants "
                              "certified; commit the change (and re-check the corpus) or revert it")
    return manifest_bytes, manifest


def pin_task(task: LoadedTask, repo: Path, commit: str, task_subdir: str, dest: Path) -> PinnedTask:
    """Write `task`'s task.json, verifier and hidden/ from `commit` into `dest` (must not exist).

    Raises PinnedTaskError when the checkout's task.json differs from the commit's, or a runner-owned
    file is missing from the commit.
    """
    manifest_bytes, manifest = committed_manifest(task, repo, commit, task_subdir)
    dest.mkdir(parents=True)
    (dest / "task.json").write_bytes(manifest_bytes)
    verifier = dest / manifest.verifier.asset.path
    verifier.parent.mkdir(parents=True, exist_ok=True)
    verifier.write_bytes(_blob(repo, commit, f"{task_subdir}/{manifest.verifier.asset.path}"))
    build_tree(repo, commit, dest / manifest.hidden_dir, subdir=f"{task_subdir}/{manifest.hidden_dir}")
    pinned = LoadedTask(root=dest, manifest=manifest)
    files = ["task.json", manifest.verifier.asset.path, *(f"{manifest.hidden_dir}/{rel}" for rel in walk_files(pinned.hidden_dir))]
    digests = tuple((rel, sha256_file(dest / rel)) for rel in files)
    if dict(digests)[manifest.verifier.asset.path] != manifest.verifier.asset.sha256:
        raise PinnedTaskError(f"{commit[:12]}:{task_subdir}/{manifest.verifier.asset.path}: sha256 differs from the pin in task.json")
    return PinnedTask(task=pinned, digests=digests)


def check_pinned(pinned: PinnedTask) -> None:
    """Re-hash every pinned file; raise PinnedTaskError naming the first that changed, vanished or was added."""
    root = pinned.task.root
    expected = dict(pinned.digests)
    present = {"task.json", pinned.task.manifest.verifier.asset.path,
               *(f"{pinned.task.manifest.hidden_dir}/{rel}" for rel in walk_files(pinned.task.hidden_dir))}
    added = sorted(present - expected.keys())
    if added:
        raise PinnedTaskError(f"{root / added[0]}: appeared among the pinned runner-owned files before the check")
    for rel, digest in pinned.digests:
        path = root / rel
        if path.is_symlink() or not path.is_file() or sha256_file(path) != digest:
            raise PinnedTaskError(f"{path}: changed after it was pinned from git objects; the check does not run on it")
