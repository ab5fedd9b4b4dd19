"""Workspace templates: each task's fixture built from git objects once, copied into every attempt.

A matrix runs each task under several conditions and trials; all of them start from the same
redacted fixture. `WorkspaceTemplates.materialize` builds that fixture once per (repository,
commit, fixture folder), redacts it, snapshots it for the mutation audit, and then gives each
attempt a byte-identical copy (`cp -a`: content, permission bits, symlinks) plus the template's
snapshot. The copy is not trusted blindly: if it ever differed from the template, the audit
compares the finished workspace against the template's snapshot and reports every difference,
so a bad copy fails the attempt rather than passing it.

The first snapshot is derived from the build's own listing (git mode, SHA-256 and size of every
file, written by `build_tree` a moment earlier) plus the folders' permission bits, instead of
hashing every file again; when redaction removed anything the template is hashed in full.

Templates live under a runner-owned folder, never inside a workspace. Built templates are kept
as `<key>/tree` with `<key>/template.json` (corpus id and snapshot), so another process sharing
the folder re-uses them; a template being built is staged and renamed into place atomically.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import threading
from pathlib import Path
from typing import ClassVar

from tasks_lib.arm.audit import SnapshotEntry, TreeSnapshot, snapshot_digest, snapshot_tree
from tasks_lib.contracts import CorpusBuild, Document, Sha256, dump_document
from tasks_lib.corpus.build import build_tree, staged_directory
from tasks_lib.corpus.redact import apply_redaction, plan_redaction
from tasks_lib.errors import MemtrialError

TREE = "tree"
RECORD = "template.json"
CP = shutil.which("cp")
"""GNU/BusyBox `cp`; `cp -a` copies a 1,000-file tree several times faster than shutil.copytree."""


class TemplateError(MemtrialError):
    """A workspace template cannot be built, read or copied."""


class WorkspaceTemplate(Document):
    """A built, redacted fixture and its pre-run snapshot."""

    KIND: ClassVar[str] = "workspace template"

    corpus_id: Sha256
    """Identity of the fixture tree (from the git tree id)."""
    snapshot: TreeSnapshot
    """Snapshot of the redacted tree: the `before` of every attempt's audit."""


def listing_snapshot(tree: Path, build: CorpusBuild) -> TreeSnapshot:
    """The snapshot of a tree `build_tree` just wrote, from its listing (no file is read again)."""
    entries: list[SnapshotEntry] = []
    folders: set[str] = set()
    for item in build.files:
        parent = item.path.rpartition("/")[0]
        while parent and parent not in folders:
            folders.add(parent)
            parent = parent.rpartition("/")[0]
        if item.mode == "120000":
            target = os.readlink(tree / item.path)
            entries.append(SnapshotEntry.model_construct(path=item.path, type="symlink", mode=0, sha256=None, size=None, link_target=target))
        else:
            mode = 0o755 if item.mode == "100755" else 0o644
            entries.append(SnapshotEntry.model_construct(path=item.path, type="file", mode=mode, sha256=item.sha256, size=item.size, link_target=None))
    for folder in folders:
        info = os.lstat(tree / folder)
        if not stat.S_ISDIR(info.st_mode):
            raise TemplateError(f"{tree / folder}: expected a folder of the built tree; rebuild the template")
        entries.append(SnapshotEntry.model_construct(path=folder, type="dir", mode=stat.S_IMODE(info.st_mode), sha256=None, size=None, link_target=None))
    entries.sort(key=lambda e: e.path)
    return TreeSnapshot(entries=tuple(entries), digest=snapshot_digest(entries))


def build_redacted(repo_root: Path, commit: str, subdir: str, dest: Path) -> tuple[str, TreeSnapshot]:
    """Build the fixture from git objects into `dest`, redact it; return (corpus id, its snapshot)."""
    build = build_tree(repo_root, commit, dest, subdir=subdir)
    receipt = plan_redaction(dest, build.corpus_id, listing=build.files)
    if receipt.removed:
        apply_redaction(dest, receipt)
        return build.corpus_id, snapshot_tree(dest)
    # A tree built from git objects has no empty folder, so redaction with nothing to remove changes nothing.
    return build.corpus_id, listing_snapshot(dest, build)


def copy_tree(source: Path, dest: Path) -> None:
    """Copy `source` to the new folder `dest` exactly (content, permission bits, symlinks as links)."""
    if CP is not None:
        done = subprocess.run([CP, "-a", "--", str(source), str(dest)], capture_output=True, check=False)
        if done.returncode != 0:
            shutil.rmtree(dest, ignore_errors=True)
            raise TemplateError(f"{dest}: copying the template failed: {done.stderr.decode(errors='replace').strip()[:300]}")
        return
    shutil.copytree(source, dest, symlinks=True)


class WorkspaceTemplates:
    """Per-task templates under `root` (see the module docstring); safe to share between threads."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._lock = threading.Lock()
        self._loaded: dict[str, WorkspaceTemplate] = {}
        self._building: dict[str, threading.Lock] = {}

    @staticmethod
    def key(repo_root: Path, commit: str, subdir: str) -> str:
        """The template folder name for one fixture of one commit."""
        return hashlib.sha256(f"{repo_root.resolve()}\0{commit}\0{subdir}".encode()).hexdigest()[:24]

    def _template(self, repo_root: Path, commit: str, subdir: str) -> tuple[Path, WorkspaceTemplate]:
        key = self.key(repo_root, commit, subdir)
        with self._lock:
            lock = self._building.setdefault(key, threading.Lock())
        with lock:
            folder = self.root / key
            if key not in self._loaded:
                if not (folder / RECORD).is_file():
                    self._build(repo_root, commit, subdir, folder)
                try:
                    self._loaded[key] = WorkspaceTemplate.model_validate_json((folder / RECORD).read_bytes())
                except ValueError as error:
                    raise TemplateError(f"{folder / RECORD}: not a valid workspace template ({error}); delete {folder}") from None
            return folder / TREE, self._loaded[key]

    @staticmethod
    def _build(repo_root: Path, commit: str, subdir: str, folder: Path) -> None:
        try:
            with staged_directory(folder) as staging:
                corpus_id, snapshot = build_redacted(repo_root, commit, subdir, staging / TREE)
                (staging / RECORD).write_bytes(dump_document(WorkspaceTemplate(corpus_id=corpus_id, snapshot=snapshot)))
        except (MemtrialError, OSError):
            if (folder / RECORD).is_file():  # another process built it first
                return
            raise

    def materialize(self, repo_root: Path, commit: str, subdir: str, dest: Path) -> tuple[str, TreeSnapshot]:
        """Copy the fixture's template to the new folder `dest`; return (corpus id, pre-run snapshot)."""
        tree, template = self._template(repo_root, commit, subdir)
        copy_tree(tree, dest)
        return template.corpus_id, template.snapshot
