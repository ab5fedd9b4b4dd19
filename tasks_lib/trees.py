"""Files on disk: listing and digesting a packaged tree, and writing one file atomically."""

from __future__ import annotations

import hashlib
import os
import stat
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Literal

from tasks_lib.contracts import TreeEntry
from tasks_lib.errors import ArtifactError, CorpusError

READ_CHUNK = 1 << 20
TEMP_MARK = ".partial-"
"""Marks the temporary sibling of a file being written (`.<name>.partial-<hex>`); listings skip it."""


def sha256_file(path: Path) -> str:
    """SHA-256 of a file's bytes."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(READ_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def sha256_bytes(data: bytes) -> str:
    """SHA-256 of bytes."""
    return hashlib.sha256(data).hexdigest()


def write_atomically(path: Path, data: bytes, what: str = "file") -> None:
    """Write `data` to `path` through a flushed temporary sibling and a rename: a reader sees the old
    file or the new one, never part of one. The file gets the usual permissions (0o666 less the umask).

    Raises ArtifactError naming the path, `what` it is and the folder to fix; the sibling is removed.
    """
    staging = path.with_name(f".{path.name}{TEMP_MARK}{uuid.uuid4().hex[:8]}")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(os.open(staging, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(staging, path)
    except BaseException as error:
        staging.unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise ArtifactError(f"{path}: cannot write {what} ({error.strerror}); check that {path.parent} is writable") from None
        raise


def entry_for(root: Path, rel: str) -> TreeEntry:
    """Describe one file or symlink of `root` as a TreeEntry."""
    path = root / rel
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        target = os.readlink(path).encode()
        return TreeEntry(path=rel, mode="120000", sha256=sha256_bytes(target), size=len(target))
    if not stat.S_ISREG(info.st_mode):
        raise CorpusError(f"{path}: not a regular file, symlink or directory; a corpus holds only those")
    mode: Literal["100644", "100755"] = "100755" if info.st_mode & stat.S_IXUSR else "100644"
    return TreeEntry(path=rel, mode=mode, sha256=sha256_file(path), size=info.st_size)


def walk_files(root: Path) -> list[str]:
    """Relative POSIX paths of every file and symlink under `root`, sorted; never follows links."""
    if not root.is_dir():
        raise CorpusError(f"{root}: no such directory")
    found: list[str] = []
    stack = [""]
    while stack:
        prefix = stack.pop()
        with os.scandir(root / prefix if prefix else root) as entries:
            for item in entries:
                rel = f"{prefix}{item.name}"
                if item.is_dir(follow_symlinks=False):
                    stack.append(rel + "/")
                else:
                    found.append(rel)
    return sorted(found)


def list_tree(root: Path) -> list[TreeEntry]:
    """Every file of the tree at `root` with mode and digest, sorted by path."""
    return [entry_for(root, rel) for rel in walk_files(root)]


def tree_digest(entries: Iterable[TreeEntry]) -> str:
    """Digest of a tree listing: stable across machines, changes with any path, mode or byte."""
    digest = hashlib.sha256()
    for entry in sorted(entries, key=lambda e: e.path):
        digest.update(f"{entry.mode} {entry.sha256} {entry.path}\n".encode())
    return digest.hexdigest()


RAM_SCRATCH = Path("/dev/shm")
"""A memory-backed folder on Linux; throwaway scratch there costs no disk sync."""


def ram_scratch() -> str | None:
    """A memory-backed folder for short-lived scratch (`dir=` of tempfile), or None (the default temp folder)
    when there is none writable. Only for scratch that is deleted when the work ends."""
    return str(RAM_SCRATCH) if RAM_SCRATCH.is_dir() and os.access(RAM_SCRATCH, os.W_OK | os.X_OK) else None
