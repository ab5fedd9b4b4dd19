"""A run's evidence sealed by a digest manifest when the run ends, and checked before anything reads it.

When a run's records are stored, `seal_run` writes `runs/<run_id>/manifest.json`: the SHA-256 and
size of every piece of evidence (the records table and everything under `attempts/`). `verify_run`
(called by `report`, `compare` and `publish`) refuses a run whose manifest is missing, whose
evidence changed or vanished, or that holds evidence added since. Derived outputs (grades, summary,
report, admissions) are not sealed: they are regenerated from the evidence, or, for admissions, are
a later recorded decision pinned to its preregistration's digest. The run's status marker
(`status.json`, `tasks_lib.run.status`) is not evidence either: it is rewritten when the run ends, after
the seal. What a record's outcome needs
from that evidence is `tasks_lib.analysis.evidence`.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from tasks_lib.artifacts import ArtifactStore, read_concurrently, run_key
from tasks_lib.contracts import ContractModel, Document, Identifier, RelPath, Sha256
from tasks_lib.errors import ArtifactError, ContractError, MemtrialError
from tasks_lib.run.layout import MANIFEST_JSON, RECORDS_TABLE, SEALED_PARTS, is_attempt_record
from tasks_lib.trees import sha256_bytes


class TamperedRunError(MemtrialError):
    """A run's stored evidence does not match its manifest (or it has none): nothing is read from it."""


class EvidenceFile(ContractModel):
    """One sealed file of a run."""

    key: RelPath
    """Key under the artifact root (`runs/<run_id>/...`)."""
    sha256: Sha256
    """SHA-256 of its bytes when the run was sealed."""
    bytes: int = Field(ge=0)
    """Its size in bytes."""


class RunManifest(Document):
    """`runs/<run_id>/manifest.json`: the digest of every piece of a run's evidence."""

    KIND: ClassVar[str] = "run manifest"

    run_id: Identifier
    """The run."""
    files: tuple[EvidenceFile, ...]
    """Every sealed file, sorted by key."""


def manifest_key(run_id: str) -> str:
    """Where a run's manifest goes."""
    return run_key(run_id, MANIFEST_JSON)


def evidence_keys(store: ArtifactStore, run_id: str) -> list[str]:
    """The run's evidence now in the store: its records table and every file under `attempts/`."""
    prefix = run_key(run_id) + "/"
    keys = []
    for key in store.list_keys(run_key(run_id)):
        rest = key.removeprefix(prefix)
        if rest == RECORDS_TABLE or rest.startswith(SEALED_PARTS):
            keys.append(key)
    return sorted(keys)


def seal_run(store: ArtifactStore, run_id: str) -> RunManifest:
    """Write the run's manifest over the evidence stored now; return it. Call it once the records are stored."""
    files = []
    for key in evidence_keys(store, run_id):
        data = store.get_bytes(key)
        files.append(EvidenceFile(key=key, sha256=sha256_bytes(data), bytes=len(data)))
    manifest = RunManifest(run_id=run_id, files=tuple(files))
    store.put_json(manifest_key(run_id), manifest)
    return manifest


def verify_run(store: ArtifactStore, run_id: str) -> RunManifest:
    """The run's manifest, after checking every sealed file; TamperedRunError names the first problem,
    how many there are, and what to do."""
    where = f"{store.uri.rstrip('/')}/{manifest_key(run_id)}"
    if not store.exists(manifest_key(run_id)):
        raise TamperedRunError(f"{where}: missing; a run's evidence is read only with the manifest its run wrote "
                               "(runs stored before memtrial sealed them, or whose manifest was removed, must be run again)")
    try:
        manifest = store.get_json(manifest_key(run_id), RunManifest)
    except (ArtifactError, ContractError) as error:
        raise TamperedRunError(f"{error}; the manifest is unreadable, so the run cannot be trusted") from None
    if manifest.run_id != run_id:
        raise TamperedRunError(f"{where}: field 'run_id' is {manifest.run_id!r}, not {run_id!r}; it was copied from another run")
    problems = []
    sealed = {f.key: f for f in manifest.files}
    folder = run_key(run_id) + "/"
    if run_key(run_id, RECORDS_TABLE) not in sealed and not any(is_attempt_record(k.removeprefix(folder)) for k in sealed):
        problems.append("it seals no records")
    for key in evidence_keys(store, run_id):
        if key not in sealed:
            problems.append(f"{key} was added after the run was sealed")
    def digest(key: str) -> str | None:
        try:
            return sha256_bytes(store.get_bytes(key))
        except ArtifactError:
            return None

    for (key, entry), found in zip(sealed.items(), read_concurrently(digest, list(sealed))):
        if found is None:
            problems.append(f"{key} is sealed but missing")
        elif found != entry.sha256:
            problems.append(f"{key} changed after the run (sha256 {found[:12]}..., sealed {entry.sha256[:12]}...)")
    if problems:
        more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
        raise TamperedRunError(f"run {run_id}: {problems[0]}{more}; its stored results no longer match {where}: "
                               "restore the original artifacts or run it again")
    return manifest
