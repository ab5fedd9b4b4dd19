"""The mutation audit: what changed in the workspace outside the declared output paths.

`snapshot_tree` records every entry under a root before the agent starts (type, permission bits,
content SHA-256 or symlink target); `audit` snapshots the finished workspace and reports every
change outside `allowed_output_paths`: added, removed, changed, permission-modified,
symlink-retargeted and type-swapped, each with its before and after state. The receipt is
deterministic (sorted by path, then kind) and `passed` is true only when there are no such
changes and something was compared. The audit only reads; it never repairs.

An allowed path covers that file or the whole subtree under it. Directories created on the way
to an allowed path (`target/` for `target/debug`) are allowed as additions. The allowlist has to
describe what the toolchain writes (a lockfile, a build folder), not only what the task is about.

A path longer than the kernel takes (PATH_MAX: 25 folders with 200-byte names) is opened one
folder at a time relative to its parent's descriptor, so such a tree is audited like any other.

Hashing runs on a thread pool (hashlib releases the GIL on buffers over 2 KiB), so all cores read
and hash at once; a snapshot never follows a symlink.

The audit of a finished workspace is bounded (`AuditLimits`: entries, file bytes by apparent size,
seconds): an agent that leaves a million files or a few huge sparse ones gets a failed receipt that
names the limit it crossed, never a stalled run.
"""

from __future__ import annotations

import hashlib
import os
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import AfterValidator, Field, model_validator

from tasks_lib.contracts import ContractModel, Document, RelPath, Sha256, check_rel_path
from tasks_lib.errors import MemtrialError


def check_tree_path(value: str) -> str:
    """`value` if it is a relative path of a Linux tree ('/'-separated, no '.', '..' or empty part)."""
    if not value or value.startswith("/") or "\x00" in value or any(p in ("", ".", "..") for p in value.split("/")):
        raise ValueError(f"path {value!r} is not a relative path inside the tree")
    return value


TreePath = Annotated[str, AfterValidator(check_tree_path)]
"""A relative path as found on disk: any Linux name (a backslash too); a name that is not UTF-8
is written with backslash escapes of its bytes."""

EntryType = Literal["file", "dir", "symlink", "other"]
ChangeKind = Literal["added", "removed", "changed", "permission-modified", "symlink-retargeted", "type-swapped"]

CHUNK = 8 << 20
"""Largest single read; files up to this size are read in one call."""
BATCH_FILES = 32
"""Files per hashing job (fewer pool round trips than one job per file)."""


class AuditError(MemtrialError):
    """A tree could not be snapshotted or audited (unreadable entry, missing root, bad allowlist)."""


class AuditLimits(ContractModel):
    """What the audit of one finished workspace may read; crossing one fails the attempt by name."""

    max_entries: int = Field(default=100_000, ge=1)
    """Entries (files, folders, links, others) in the finished tree."""
    max_bytes: int = Field(default=2 << 30, ge=0)
    """Sum of the files' apparent sizes (a sparse file counts at its full length)."""
    max_seconds: float = Field(default=60.0, gt=0)
    """Wall time of reading and hashing the tree."""


AuditLimit = Literal["entries", "bytes", "seconds"]


class LimitBreach(ContractModel):
    """The audit limit a finished tree crossed, and where the audit stopped."""

    limit: AuditLimit
    """Which limit."""
    allowed: float = Field(ge=0)
    """The limit's value."""
    path: TreePath | None
    """The entry being read when the limit was crossed (None when it is not one entry)."""

    def describe(self) -> str:
        """One line for a failure reason."""
        where = f" at {self.path}" if self.path else ""
        return f"the finished tree exceeds the audit limit on {self.limit} ({self.allowed:g}){where}"


class _OverLimit(Exception):
    """Raised inside a scan when a limit is crossed; carries the breach."""

    def __init__(self, breach: LimitBreach) -> None:
        super().__init__(breach.describe())
        self.breach = breach


class _Budget:
    """The shared, thread-safe allowance of one bounded scan."""

    def __init__(self, limits: AuditLimits) -> None:
        self.limits = limits
        self.deadline = time.monotonic() + limits.max_seconds
        self.bytes = 0
        self.breach: LimitBreach | None = None
        self._lock = threading.Lock()

    def stop(self, breach: LimitBreach) -> None:
        """Record the first breach (every worker stops at its next check) and raise it."""
        with self._lock:
            self.breach = self.breach or breach
        raise _OverLimit(self.breach)

    def tick(self, path: str | None) -> None:
        if self.breach is not None:
            raise _OverLimit(self.breach)
        if time.monotonic() > self.deadline:
            self.stop(LimitBreach(limit="seconds", allowed=self.limits.max_seconds, path=path))

    def take(self, size: int, path: str) -> None:
        with self._lock:
            self.bytes += size
            over = self.bytes > self.limits.max_bytes
        if over:
            self.stop(LimitBreach(limit="bytes", allowed=self.limits.max_bytes, path=path))
        self.tick(path)


class SnapshotEntry(ContractModel):
    """One entry of a tree."""

    path: TreePath
    """Path relative to the snapshot root."""
    type: EntryType
    """`file`, `dir`, `symlink`, or `other` (fifo, socket, device)."""
    mode: int = Field(ge=0, le=0o7777)
    """Permission bits (including setuid/setgid/sticky); 0 for a symlink."""
    sha256: Sha256 | None = None
    """SHA-256 of a file's content; None for other types."""
    size: int | None = Field(default=None, ge=0)
    """Size of a file in bytes."""
    link_target: str | None = None
    """Target of a symlink, exactly as stored."""


class TreeSnapshot(Document):
    """Every entry under a root, sorted by path."""

    KIND: ClassVar[str] = "tree snapshot"

    entries: tuple[SnapshotEntry, ...]
    """All entries, sorted by path (the root itself is not an entry)."""
    digest: Sha256
    """SHA-256 over the sorted entries; equal trees have equal digests."""


class Change(ContractModel):
    """One difference between the snapshot and the finished tree."""

    path: TreePath
    """Path relative to the audited root."""
    kind: ChangeKind
    """What happened to it."""
    before: SnapshotEntry | None
    """The entry before (None when added)."""
    after: SnapshotEntry | None
    """The entry after (None when removed)."""


class AuditReceipt(Document):
    """Result of the mutation audit of one run."""

    KIND: ClassVar[str] = "mutation audit receipt"

    allowed_output_paths: tuple[RelPath, ...]
    """The declared output paths (files or whole subtrees), sorted."""
    before_digest: Sha256
    """Digest of the snapshot taken before the agent started."""
    after_digest: Sha256
    """Digest of the finished tree."""
    entries_before: int = Field(ge=0)
    """Entries in the snapshot."""
    entries_after: int = Field(ge=0)
    """Entries in the finished tree."""
    violations: tuple[Change, ...]
    """Changes outside the allowed paths, sorted by path then kind; any one fails the run."""
    allowed_changes: tuple[Change, ...]
    """Changes inside the allowed paths, for the record."""
    limit_breach: LimitBreach | None = None
    """Set when the finished tree crossed an audit limit: the audit stopped there and the run fails
    (`after_digest`, `entries_after` and the changes then describe only what was read)."""
    passed: bool
    """True only when there are no violations, no limit was crossed and at least one entry was compared."""

    @model_validator(mode="after")
    def _passed_matches(self) -> AuditReceipt:
        expected = not self.violations and self.limit_breach is None and (self.entries_before + self.entries_after) > 0
        if self.passed != expected:
            raise ValueError(f"passed={self.passed} contradicts the receipt; it must be {expected}")
        return self


# --------------------------------------------------------------------------- snapshot


LONG_PATH = 3072
"""Bytes of a host path from which `_open_at` walks folder descriptors instead (PATH_MAX is 4096)."""
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_at(root: str, rel: str, flags: int) -> int:
    """os.open of `rel` under `root`: by its path when short, else one folder at a time from `root`
    by descriptor (never through a symlink), so a path past PATH_MAX opens too."""
    path = os.path.join(root, rel) if rel else root
    if len(os.fsencode(path)) < LONG_PATH:
        return os.open(path, flags)
    parts = rel.strip("/").split("/")
    fd = os.open(root, DIR_FLAGS)
    try:
        for part in parts[:-1]:
            inner = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags, dir_fd=fd)
    finally:
        os.close(fd)


def _hash_file(root: str, rel: str, budget: _Budget | None = None) -> tuple[int, int, str]:
    """(mode bits, size, sha256) of regular file `rel`, opened without following a symlink; with a
    `budget`, its apparent size is charged before any byte is read and time is checked per chunk."""
    path = os.path.join(root, rel)
    try:
        fd = _open_at(root, rel, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    except OSError as error:
        raise AuditError(f"{path}: cannot be opened for the audit ({error.strerror}); the tree must be readable and still") from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise AuditError(f"{path}: changed type while the tree was being read; snapshot a tree nothing writes to")
        if budget is not None:
            budget.take(info.st_size, _shown(rel))
        hasher, size = hashlib.sha256(), 0
        want = min(info.st_size + 1, CHUNK)  # a small file is read in one call, then EOF
        while chunk := os.read(fd, want):
            hasher.update(chunk)
            size += len(chunk)
            want = CHUNK
            if budget is not None:
                budget.tick(_shown(rel))
        digest = hasher.hexdigest()
    finally:
        os.close(fd)
    return stat.S_IMODE(info.st_mode), size, digest


def _hash_batch(root: str, rels: list[str], budget: _Budget | None = None) -> list[tuple[int, int, str]]:
    return [_hash_file(root, rel, budget) for rel in rels]


def _shown(rel: str) -> str:
    """`rel` as recorded: unchanged when it is UTF-8, else its bytes with backslash escapes."""
    try:
        rel.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(rel).decode("utf-8", "backslashreplace")
    return rel


Row = tuple[str, EntryType, int, "str | None", "int | None", "str | None"]
"""An entry as plain values: (path, type, mode, sha256, size, link_target); the audit's fast form."""


def _walk(root: str, budget: _Budget | None = None) -> tuple[list[Row], list[str]]:
    """Non-file entries described, and the path of every regular file to hash.

    Types come from the directory listing (no stat per file); the hashing workers fstat each file
    they open, so the per-file system calls run in parallel too. With a `budget`, the entry count and
    the time are checked per folder.
    """
    described: list[Row] = []
    files: list[str] = []
    stack = [""]
    while stack:
        prefix = stack.pop()
        try:
            folder = _open_at(root, prefix, DIR_FLAGS)
        except OSError as error:
            raise AuditError(f"{os.path.join(root, prefix)}: cannot list it for the audit ({error.strerror})") from error
        try:
            with os.scandir(folder) as items:
                listing = list(items)
            _describe(listing, prefix, folder, budget, described, files, stack)
        except OSError as error:
            raise AuditError(f"{os.path.join(root, prefix)}: cannot list it for the audit ({error.strerror})") from error
        finally:
            os.close(folder)
    return described, files


def _describe(listing: list[os.DirEntry[str]], prefix: str, folder: int, budget: _Budget | None, described: list[Row],
              files: list[str], stack: list[str]) -> None:
    """Sort one folder's entries (listed from descriptor `folder`) into `described`, `files` and `stack`."""
    if budget is not None:
        if len(described) + len(files) + len(listing) > budget.limits.max_entries:
            budget.stop(LimitBreach(limit="entries", allowed=budget.limits.max_entries, path=_shown(prefix.rstrip("/")) or None))
        budget.tick(_shown(prefix.rstrip("/")) or None)
    for item in listing:
        rel = prefix + item.name
        if item.is_file(follow_symlinks=False):
            files.append(rel)
            continue
        info = item.stat(follow_symlinks=False)
        shown = _shown(rel)
        if stat.S_ISDIR(info.st_mode):
            described.append((shown, "dir", stat.S_IMODE(info.st_mode), None, None, None))
            stack.append(rel + "/")
        elif stat.S_ISLNK(info.st_mode):
            target = _shown(os.readlink(item.name, dir_fd=folder))
            described.append((shown, "symlink", 0, None, None, target))
        else:
            described.append((shown, "other", stat.S_IMODE(info.st_mode), None, None, None))


def _batches(files: list[str]) -> list[list[str]]:
    return [files[i : i + BATCH_FILES] for i in range(0, len(files), BATCH_FILES)]


def _row(entry: SnapshotEntry) -> Row:
    return (entry.path, entry.type, entry.mode, entry.sha256, entry.size, entry.link_target)


def _entry(row: Row) -> SnapshotEntry:
    path, type_, mode, sha, size, target = row
    return SnapshotEntry.model_construct(path=path, type=type_, mode=mode, sha256=sha, size=size, link_target=target)


def _row_digest(rows: Iterable[Row]) -> str:
    hasher = hashlib.sha256()
    for path, type_, mode, sha, _size, target in rows:
        hasher.update(f"{type_} {mode:o} {sha or '-'} {target or '-'} {path}\n".encode())
    return hasher.hexdigest()


def snapshot_digest(entries: Iterable[SnapshotEntry]) -> str:
    """The digest of a snapshot's entries (sorted by path); equal trees have equal digests."""
    return _row_digest(_row(e) for e in entries)


def _scan(root: Path, workers: int | None, budget: _Budget | None = None) -> list[Row]:
    """Every entry under `root` as rows sorted by path, files hashed on a thread pool; raises
    `_OverLimit` when a `budget` is given and the tree crosses it."""
    if not root.is_dir() or root.is_symlink():
        raise AuditError(f"{root}: not a directory; the audit snapshots a workspace folder")
    base = str(root)
    described, files = _walk(base, budget)
    batches = _batches(files)
    workers = workers or os.cpu_count() or 1
    if workers > 1 and len(batches) > 1:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="audit-hash") as pool:
            hashed = [r for batch in pool.map(lambda b: _hash_batch(base, b, budget), batches) for r in batch]
    else:
        hashed = [r for b in batches for r in _hash_batch(base, b, budget)]
    rows = described + [
        (_shown(rel), "file", mode, digest, size, None) for rel, (mode, size, digest) in zip(files, hashed, strict=True)
    ]
    rows.sort(key=lambda r: r[0])
    return rows


def snapshot_tree(root: Path, workers: int | None = None) -> TreeSnapshot:
    """Snapshot every entry under `root` (never following symlinks), hashing files on all cores.

    Raises:
        AuditError: `root` is not a directory, or an entry cannot be read or changes type while read.
    """
    rows = _scan(root, workers)
    # Built without re-validation: every field was just computed here (a scandir name is never
    # empty, '.', '..' or slash-bearing; the digest is hexdigest()); loading a snapshot validates.
    return TreeSnapshot(entries=tuple(_entry(r) for r in rows), digest=_row_digest(rows))


# --------------------------------------------------------------------------- audit


def _covered(path: str, allowed: Sequence[str]) -> bool:
    return any(path == a or path.startswith(a + "/") for a in allowed)


def _ancestor_of_allowed(path: str, allowed: Sequence[str]) -> bool:
    return any(a.startswith(path + "/") for a in allowed)


def _changes(path: str, before: SnapshotEntry | None, after: SnapshotEntry | None) -> list[Change]:
    if before is None:
        return [Change(path=path, kind="added", before=None, after=after)]
    if after is None:
        return [Change(path=path, kind="removed", before=before, after=None)]
    if before.type != after.type:
        return [Change(path=path, kind="type-swapped", before=before, after=after)]
    found: list[Change] = []
    if before.type == "symlink":
        if before.link_target != after.link_target:
            found.append(Change(path=path, kind="symlink-retargeted", before=before, after=after))
        return found
    if before.sha256 != after.sha256:
        found.append(Change(path=path, kind="changed", before=before, after=after))
    if before.mode != after.mode:
        found.append(Change(path=path, kind="permission-modified", before=before, after=after))
    return found


def _diff_rows(before: Sequence[Row], after: Sequence[Row]) -> list[Change]:
    """Every change from rows `before` to rows `after`, sorted by path then kind (models built for changes only)."""
    old = {r[0]: r for r in before}
    new = {r[0]: r for r in after}
    changes: list[Change] = []
    for path in sorted(old.keys() | new.keys()):
        a, b = old.get(path), new.get(path)
        if a != b:
            changes.extend(_changes(path, None if a is None else _entry(a), None if b is None else _entry(b)))
    changes.sort(key=lambda c: (c.path, c.kind))
    return changes


def audit(before: TreeSnapshot, after_root: Path, allowed_output_paths: Sequence[str],
          limits: AuditLimits | None = None) -> AuditReceipt:
    """Compare the finished tree at `after_root` with `before`; fail on any change outside the allowlist,
    and on a tree that crosses `limits` (default `AuditLimits()`), named in `limit_breach`.

    Raises:
        AuditError: an allowed path is not a portable relative path, or the tree cannot be read.
    """
    allowed: list[str] = []
    for value in allowed_output_paths:
        try:
            allowed.append(check_rel_path(value).rstrip("/"))
        except ValueError as error:
            raise AuditError(f"allowed_output_paths: {error}") from error
    allowed = sorted(set(allowed))
    try:
        after = _scan(after_root, None, _Budget(limits or AuditLimits()))
    except _OverLimit as over:
        return AuditReceipt(
            allowed_output_paths=tuple(allowed), before_digest=before.digest, after_digest=_row_digest(()),
            entries_before=len(before.entries), entries_after=0, violations=(), allowed_changes=(),
            limit_breach=over.breach, passed=False,
        )
    violations: list[Change] = []
    permitted: list[Change] = []
    for change in _diff_rows([_row(e) for e in before.entries], after):
        inside = _covered(change.path, allowed) or (
            change.kind == "added" and change.after is not None and change.after.type == "dir"
            and _ancestor_of_allowed(change.path, allowed)
        )
        (permitted if inside else violations).append(change)
    entries_before, entries_after = len(before.entries), len(after)
    return AuditReceipt(
        allowed_output_paths=tuple(allowed),
        before_digest=before.digest,
        after_digest=_row_digest(after),
        entries_before=entries_before,
        entries_after=entries_after,
        violations=tuple(violations),
        allowed_changes=tuple(permitted),
        passed=not violations and entries_before + entries_after > 0,
    )
