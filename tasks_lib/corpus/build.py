"""Build a corpus from git objects only.

The evaluated tree is read out of the object database of a commit: no `.git`, no history, no
ignored files, no build output and never the caller's work tree. `.gitattributes` export rules do
not apply (unlike `git archive`), so the corpus is exactly the committed tree. The corpus id is a
digest of the git tree id, so the same commit gives the same id on any machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.contracts import CorpusBuild, CorpusSource, TreeEntry, check_rel_path, dump_document
from tasks_lib.errors import CorpusError, UnknownCommitError
from tasks_lib.trees import sha256_bytes

CORPUS_ID_PREFIX = b"memtrial-corpus/1\0"
TREE_DIR = "tree"
RECEIPT_NAME = "corpus.json"
WRITE_THREADS = 4


def corpus_id_of(tree_oid: str) -> str:
    """The corpus id of a git tree: sha256 over a version prefix and the tree id."""
    return hashlib.sha256(CORPUS_ID_PREFIX + tree_oid.encode()).hexdigest()


def _git(repo: Path, *args: str, input: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, env=env, check=False)


@contextmanager
def reachable_repository(repository: str | Path) -> Iterator[Path]:
    """Yield a local git directory for `repository`: a path as is, a URL as a temporary bare clone."""
    local = Path(repository)
    if local.exists():
        probe = _git(local, "rev-parse", "--git-dir")
        if probe.returncode != 0:
            raise CorpusError(f"{repository}: not a git repository; give a path or URL that git can read")
        yield local
        return
    if "://" not in str(repository) and not str(repository).startswith("git@"):
        raise CorpusError(f"{repository}: no such repository path; give a local path or a URL that git can reach")
    with tempfile.TemporaryDirectory(prefix="memtrial-clone-") as tmp:
        clone = subprocess.run(
            ["git", "clone", "--bare", "--quiet", str(repository), tmp],
            capture_output=True,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
            check=False,
        )
        if clone.returncode != 0:
            reason = clone.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["git clone failed"]
            raise CorpusError(f"{repository}: cannot clone ({reason[0]})")
        yield Path(tmp)


def resolve_commit(repo: Path, revision: str, label: str) -> str:
    """Full commit id of `revision`, or UnknownCommitError naming the repository."""
    if not revision or revision.startswith("-"):
        raise UnknownCommitError(f"{label}: {revision!r} is not a revision; give a commit id, tag or branch")
    out = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", f"{revision}^{{commit}}")
    if out.returncode != 0:
        raise UnknownCommitError(
            f"{label}: revision {revision!r} does not resolve to a commit; check the id or fetch it first"
        )
    return out.stdout.decode().strip()


def resolve_tree(repo: Path, commit: str, subdir: str | None, label: str) -> str:
    """The tree id of `commit` (or of `subdir` in it)."""
    spec = f"{commit}^{{tree}}" if not subdir else f"{commit}:{subdir}"
    out = _git(repo, "rev-parse", "--verify", "--quiet", "--end-of-options", spec)
    if out.returncode != 0:
        raise CorpusError(f"{label}: commit {commit[:12]} has no directory {subdir!r}; check the subdir")
    oid = out.stdout.decode().strip()
    kind = _git(repo, "cat-file", "-t", oid).stdout.decode().strip()
    if kind != "tree":
        raise CorpusError(f"{label}: {subdir!r} in commit {commit[:12]} is a {kind}, not a directory")
    return oid


@dataclass(frozen=True)
class _Blob:
    path: str
    mode: str
    oid: str


def _list_blobs(repo: Path, tree: str) -> tuple[list[_Blob], list[str]]:
    out = _git(repo, "ls-tree", "-r", "-z", "--full-tree", tree)
    if out.returncode != 0:
        raise CorpusError(f"{repo}: cannot list tree {tree}: {out.stderr.decode(errors='replace').strip()}")
    blobs: list[_Blob] = []
    gitlinks: list[str] = []
    for record in out.stdout.split(b"\0"):
        if not record:
            continue
        meta, _, raw_path = record.partition(b"\t")
        mode, kind, oid = meta.decode().split(" ")
        try:
            path = raw_path.decode("utf-8")
            check_rel_path(path)
        except (UnicodeDecodeError, ValueError) as error:
            raise CorpusError(f"{repo}: tree {tree[:12]} has a path memtrial cannot package safely: {raw_path!r} ({error})") from None
        if kind == "commit":
            gitlinks.append(path)
        elif mode in ("100644", "100755", "120000"):
            blobs.append(_Blob(path, mode, oid))
        else:
            raise CorpusError(f"{repo}: {path} has unsupported git mode {mode}")
    return blobs, gitlinks


def _read_blobs(repo: Path, oids: list[str]) -> Iterator[tuple[str, bytes]]:
    """Stream blob contents from one `git cat-file --batch` process."""
    proc = subprocess.Popen(
        ["git", "-C", str(repo), "cat-file", "--batch", "--buffer"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        bufsize=1 << 20,
    )
    assert proc.stdin is not None and proc.stdout is not None

    def feed() -> None:
        try:
            proc.stdin.write("".join(f"{oid}\n" for oid in oids).encode())  # type: ignore[union-attr]
            proc.stdin.close()  # type: ignore[union-attr]
        except BrokenPipeError:
            pass

    writer = threading.Thread(target=feed, daemon=True)
    writer.start()
    try:
        for oid in oids:
            header = proc.stdout.readline().decode().split()
            if len(header) != 3 or header[1] != "blob":
                raise CorpusError(f"{repo}: object {oid} is missing or not a blob ({' '.join(header)})")
            size = int(header[2])
            data = proc.stdout.read(size)
            proc.stdout.read(1)
            yield header[0], data
    finally:
        writer.join()
        proc.stdout.close()
        proc.wait()


def _make_directories(repo: Path, blobs: list[_Blob], dest: Path) -> None:
    """Create every parent folder up front, refusing any path that lies under a symlink entry."""
    links = {b.path for b in blobs if b.mode == "120000"}
    folders: set[str] = set()
    for blob in blobs:
        parent = blob.path.rpartition("/")[0]
        while parent and parent not in folders:
            if parent in links:
                raise CorpusError(f"{repo}: {blob.path} lies under the symlink {parent}; refusing to write through it")
            folders.add(parent)
            parent = parent.rpartition("/")[0]
    for folder in sorted(folders):
        os.mkdir(dest / folder)


def _write_one(dest: Path, blob: _Blob, data: bytes) -> None:
    target = os.path.join(dest, blob.path)
    if blob.mode == "120000":
        os.symlink(data, target)
        return
    mode = 0o755 if blob.mode == "100755" else 0o644
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view):]
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


def _write_files(repo: Path, blobs: list[_Blob], dest: Path) -> list[TreeEntry]:
    """Stream blobs out of git and write them with a small thread pool (file creation releases the GIL)."""
    _make_directories(repo, blobs, dest)
    by_oid: dict[str, list[_Blob]] = {}
    for blob in blobs:
        by_oid.setdefault(blob.oid, []).append(blob)
    entries: list[TreeEntry] = []
    with ThreadPoolExecutor(max_workers=WRITE_THREADS) as pool:
        pending = []
        for oid, data in _read_blobs(repo, list(by_oid)):
            digest = sha256_bytes(data)
            for blob in by_oid[oid]:
                pending.append(pool.submit(_write_one, dest, blob, data))
                # Paths were checked by check_rel_path when listed; skip re-validating them here.
                entries.append(TreeEntry.model_construct(path=blob.path, mode=blob.mode, sha256=digest, size=len(data)))
        for future in pending:
            future.result()
    return sorted(entries, key=lambda e: e.path)


@contextmanager
def staged_directory(dest: Path) -> Iterator[Path]:
    """Yield a fresh sibling of `dest` and rename it to `dest` on success; remove it on failure."""
    if dest.exists() or dest.is_symlink():
        raise CorpusError(f"{dest}: already exists; choose a new output folder or remove it")
    dest.parent.mkdir(parents=True, exist_ok=True)
    staging = dest.parent / f".{dest.name}.partial-{uuid.uuid4().hex[:8]}"
    staging.mkdir()
    try:
        yield staging
        os.rename(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise


def build_tree(repository: str | Path, revision: str, dest: Path, subdir: str | None = None) -> CorpusBuild:
    """Materialise `revision` (or its `subdir`) from git objects into `dest`, which must not exist.

    Raises UnknownCommitError when the revision does not resolve, CorpusError for an unreadable
    repository, a missing subdir, an existing `dest` or an unsafe path. Nothing half-written is
    left at `dest` on failure.
    """
    label = str(repository)
    if subdir is not None:
        check_rel_path(subdir)
    with reachable_repository(repository) as repo:
        commit = resolve_commit(repo, revision, label)
        tree = resolve_tree(repo, commit, subdir, label)
        blobs, gitlinks = _list_blobs(repo, tree)
        with staged_directory(dest) as staging:
            entries = _write_files(repo, blobs, staging)
    return CorpusBuild(
        corpus_id=corpus_id_of(tree),
        source=CorpusSource(repository=label, commit=commit, subdir=subdir),
        tree_oid=tree,
        files=tuple(entries),
        skipped_submodules=tuple(sorted(gitlinks)),
    )


def package_corpus(repository: str | Path, revision: str, out: Path, subdir: str | None = None) -> CorpusBuild:
    """Build a packaged corpus folder: `out/tree/` plus the receipt `out/corpus.json`, atomically."""
    with staged_directory(out) as staging:
        build = build_tree(repository, revision, staging / TREE_DIR, subdir)
        (staging / RECEIPT_NAME).write_bytes(dump_document(build))
    return build
