"""The publication test: build a run's release folder and refuse it unless it is sound.

`publish_run` copies every stored artifact of a run (records, transcripts, receipts, tables,
admission decisions; admitted and excluded alike) and the preregistrations its decisions name
into a staging folder next to the destination, writes `MANIFEST.json` (path, size and sha256 of
every other file), and runs `check_release` over it. The staging folder is renamed to the
destination only when no problem was found; otherwise it is removed, so nothing half-written is
ever left behind. `check_release` can also be run alone over an existing release folder.

A release is sound when: its records can be read (`tasks_lib.run.records`: the table and the
per-attempt records agree); every admission decision has a durable record (and every record a
decision); every decision's preregistration is in the release; the manifest covers every file and
every digest matches; and no file contains a host path or a secret-shaped string.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import uuid
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import Field, ValidationError

from tasks_lib.analysis.admission import ADMISSIONS_TABLE, AdmissionDecision, load_decisions
from tasks_lib.analysis.prereg import (
    PREREGS,
    PreregError,
    Preregistration,
    find_by_digest,
    prereg_digest,
)
from tasks_lib.artifacts import RUNS, ArtifactStore, LocalStore, check_key
from tasks_lib.contracts import (
    ContractModel,
    Document,
    Identifier,
    RelPath,
    Sha256,
    dump_document,
    load_document,
    parse_document,
)
from tasks_lib.errors import ContractError, MemtrialError
from tasks_lib.run.layout import RECORD_JSON, attempt_file
from tasks_lib.run.records import cell_of, read_records
from tasks_lib.run.seal import TamperedRunError, verify_run
from tasks_lib.trees import sha256_file

MANIFEST = "MANIFEST.json"
"""The release manifest's file name, at the release root (the one file it does not cover)."""

HOST_PATH = re.compile(r"(?<![\w.~-])/(?:root|home|tmp|Users|var/folders|private/var)/")
"""Absolute paths that name a machine's users or scratch space."""
SECRET_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("Anthropic API key", re.compile(r"\bsk-ant-[A-Za-z0-9_-]{20,}")),
    ("OpenAI-style API key", re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-)?[A-Za-z0-9_-]{20,}")),
    ("AWS access key id", re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b")),
    ("AWS secret access key", re.compile(r"(?i)aws_secret_access_key[\"']?\s*[=:]\s*[\"']?[A-Za-z0-9/+=]{40}")),
    ("bearer token", re.compile(r"(?i)\bbearer\s+[A-Za-z0-9._~+/-]{16,}=*")),
    ("private key block", re.compile(r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----")),
    ("GitHub token", re.compile(r"\bgh[pousr]_[A-Za-z0-9]{36,}\b")),
)
"""Secret shapes a release must not contain, by name."""


class PublishError(MemtrialError):
    """A release cannot be built at all (destination exists, run not admitted, ...)."""


class ReleaseFile(ContractModel):
    """One file of a release."""

    path: RelPath
    """Path inside the release folder."""
    size: int = Field(ge=0)
    """Size in bytes."""
    sha256: Sha256
    """SHA-256 of the bytes."""


class ReleaseManifest(Document):
    """What a release folder holds: every file but the manifest itself, with its digest."""

    KIND: ClassVar[str] = "release manifest"

    run_id: Identifier
    """The run released."""
    files: tuple[ReleaseFile, ...]
    """Every file of the release except MANIFEST.json, sorted by path."""


@dataclass(frozen=True)
class PublishResult:
    """Outcome of `publish_run`: the problems found (empty = published) and the manifest written."""

    out_dir: Path
    problems: tuple[str, ...]
    manifest: ReleaseManifest | None

    @property
    def ok(self) -> bool:
        return not self.problems


def _release_files(root: Path) -> Iterator[tuple[str, Path]]:
    for path in sorted(root.rglob("*")):
        if path.is_file() or path.is_symlink():
            yield path.relative_to(root).as_posix(), path


def write_manifest(root: Path, run_id: str) -> ReleaseManifest:
    """Hash every file under `root` (but the manifest) and write MANIFEST.json."""
    files = tuple(
        ReleaseFile(path=rel, size=path.stat().st_size, sha256=sha256_file(path))
        for rel, path in _release_files(root) if rel != MANIFEST and not path.is_symlink()
    )
    manifest = ReleaseManifest(run_id=run_id, files=files)
    (root / MANIFEST).write_bytes(dump_document(manifest))
    return manifest


def _texts(rel: str, path: Path) -> Iterator[tuple[str, str]]:
    """(where, text) pieces of a file to scan: Parquet row by row, anything else as UTF-8 text by line.

    Raises pyarrow.ArrowInvalid or OSError for a Parquet file that cannot be read (a problem, never a pass).
    """
    if rel.endswith(".parquet"):
        table = pq.ParquetFile(path, pre_buffer=False).read(use_threads=False)
        yield f"{rel}: columns", " ".join(table.column_names)
        for index, row in enumerate(table.to_pylist()):
            yield f"{rel}: row {index}", json.dumps(row, default=str, ensure_ascii=False)
        return
    text = path.read_bytes().decode("utf-8", errors="replace")
    for number, line in enumerate(text.splitlines(), 1):
        yield f"{rel}: line {number}", line


def scan_text(where: str, text: str, forbidden: Sequence[str]) -> list[str]:
    """Problems for host paths, forbidden strings and secret shapes in `text` (secrets never echoed whole)."""
    problems = []
    for match in HOST_PATH.finditer(text):
        problems.append(f"{where}: host path {text[match.start():match.end() + 24].split()[0]!r}")
    for literal in forbidden:
        if literal and re.search(rf"(?<![\w.-]){re.escape(literal)}(?![\w.-])", text):
            problems.append(f"{where}: host path {literal!r} (this machine's artifact root or home)")
    for name, pattern in SECRET_PATTERNS:
        for match in pattern.finditer(text):
            problems.append(f"{where}: secret-shaped string ({name}, starts {match.group()[:7]!r}...)")
    return problems


def _admission_problems(root: Path) -> list[str]:
    problems: list[str] = []
    tables = sorted(root.glob(f"runs/*/{ADMISSIONS_TABLE}"))
    if not tables:
        return [f"runs/*/{ADMISSIONS_TABLE}: the release holds no admission decisions"]
    prereg_digests = set()
    for path in sorted(root.glob(f"{PREREGS}/*/v*.json")):
        try:
            prereg_digests.add(prereg_digest(load_document(path, Preregistration)))
        except ContractError as error:
            problems.append(f"{path.relative_to(root).as_posix()}: not a valid preregistration ({error})")
    for table_path in tables:
        run_dir = table_path.parent
        rel_table = table_path.relative_to(root).as_posix()
        try:
            stored = read_records(LocalStore(root), run_dir.name)
        except MemtrialError as error:  # unreadable, disagreeing or invalid records: ArtifactError, ContractError, ...
            problems.append(f"{run_dir.relative_to(root).as_posix()}: its records cannot be read ({error})")
            continue
        records = {cell_of(r): f"{RUNS}/{run_dir.name}/{attempt_file(*cell_of(r), RECORD_JSON)}" for r in stored}
        try:
            rows = pq.ParquetFile(table_path, pre_buffer=False).read(use_threads=False).to_pylist()
            decisions = [AdmissionDecision(**row) for row in rows]
        except (pa.ArrowInvalid, OSError, TypeError, ValidationError) as error:
            problems.append(f"{rel_table}: unreadable admission decisions ({type(error).__name__}: {error})")
            continue
        decided = set()
        for d in decisions:
            cell = (d.task_id, d.condition, d.trial)
            decided.add(cell)
            if cell not in records:
                problems.append(f"{rel_table}: {d.decision} {'/'.join(map(str, cell))} has no durable record.json in the release")
            if d.prereg_digest not in prereg_digests:
                problems.append(f"{rel_table}: {'/'.join(map(str, cell))} was decided against preregistration {d.prereg_digest[:12]}, which is not in the release")
        for cell, rel in sorted(records.items()):
            if cell not in decided:
                problems.append(f"{rel}: record {'/'.join(map(str, cell))} has no admission decision in {rel_table}")
    return problems


def _manifest_problems(root: Path) -> list[str]:
    try:
        manifest = parse_document(ReleaseManifest, json.loads((root / MANIFEST).read_bytes()), MANIFEST)
    except FileNotFoundError:
        return [f"{MANIFEST}: missing; every release needs a manifest covering its files"]
    except (ValueError, ContractError) as error:
        return [f"{MANIFEST}: invalid ({error})"]
    problems = []
    listed = {f.path: f for f in manifest.files}
    on_disk = {rel: path for rel, path in _release_files(root) if rel != MANIFEST}
    for rel, path in on_disk.items():
        if path.is_symlink():
            problems.append(f"{rel}: is a symlink; a release holds regular files only")
        elif rel not in listed:
            problems.append(f"{rel}: not covered by {MANIFEST}")
        elif sha256_file(path) != listed[rel].sha256 or path.stat().st_size != listed[rel].size:
            problems.append(f"{rel}: content differs from its sha256 in {MANIFEST}")
    for rel in sorted(set(listed) - set(on_disk)):
        problems.append(f"{rel}: listed in {MANIFEST} but missing from the release")
    return problems


def check_release(root: Path, forbidden: Iterable[str] = ()) -> list[str]:
    """Every problem of the release folder `root`, one line each (empty when it may be published)."""
    if not root.is_dir():
        raise PublishError(f"{root}: not a folder; give a release folder made by 'memtrial publish'")
    forbidden = list(dict.fromkeys(f for f in forbidden if f and f != "/"))
    problems = _manifest_problems(root) + _admission_problems(root)
    for rel, path in _release_files(root):
        if path.is_symlink():
            continue
        try:
            for where, text in _texts(rel, path):
                problems.extend(scan_text(where, text, forbidden))
        except (pa.ArrowInvalid, OSError) as error:
            problems.append(f"{rel}: cannot be read as Parquet, so it cannot be checked ({error})")
    return problems


def host_markers(store: ArtifactStore) -> list[str]:
    """Strings that identify this machine: the local artifact root's absolute path and the user's home."""
    markers = [str(Path.home())]
    if isinstance(store, LocalStore):
        markers.append(str(store.root))
    return [m for m in markers if m not in ("", "/")]


def publish_run(store: ArtifactStore, run_id: str, out_dir: Path, forbidden: Iterable[str] = ()) -> PublishResult:
    """Build `out_dir` as the release of `run_id` if its evidence matches its manifest and it passes
    `check_release`; otherwise leave nothing and return the problems."""
    out_dir = out_dir.absolute()
    if out_dir.exists():
        raise PublishError(f"{out_dir}: already exists; a release is written once, into a new folder")
    try:
        verify_run(store, run_id)
    except TamperedRunError as error:
        return PublishResult(out_dir, (str(error),), None)
    decisions = load_decisions(store, run_id)
    staging = out_dir.with_name(f".{out_dir.name}.partial-{uuid.uuid4().hex[:8]}")
    try:
        out_dir.parent.mkdir(parents=True, exist_ok=True)
        staging.mkdir()
    except OSError as error:
        raise PublishError(f"{out_dir.parent}: cannot create the release here ({error.strerror}); choose a writable folder") from None
    try:
        problems = []
        for key in store.list_keys(check_key(f"{RUNS}/{run_id}")):
            target = staging / key
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(store.get_bytes(key))
        for digest in sorted({d.prereg_digest for d in decisions}):
            try:
                key, _ = find_by_digest(store, digest)
            except PreregError as error:
                problems.append(f"runs/{run_id}/{ADMISSIONS_TABLE}: {error}")
                continue
            (staging / key).parent.mkdir(parents=True, exist_ok=True)
            (staging / key).write_bytes(store.get_bytes(key))
        manifest = write_manifest(staging, run_id)
        problems += check_release(staging, [*host_markers(store), str(staging), *forbidden])
        if problems:
            shutil.rmtree(staging, ignore_errors=True)
            return PublishResult(out_dir, tuple(problems), None)
        if out_dir.exists():
            raise PublishError(f"{out_dir}: appeared while the release was being built; nothing was written there")
        os.rename(staging, out_dir)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return PublishResult(out_dir, (), manifest)
