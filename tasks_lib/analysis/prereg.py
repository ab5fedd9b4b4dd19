"""Preregistration: freeze prompts, verifier, model, budget and analysis plan before any paid run.

A preregistration is a document stored under `preregistrations/<name>/v<version>.json` in the
artifact store; its identity is the sha256 of its canonical JSON (`prereg_digest`). Admission
refuses a record whose inputs differ from the preregistration it is admitted against, and says
which input differs. A preregistration is never edited: an apparatus correction is a new version
that names the digest it supersedes and why (see `tasks_lib.analysis.admission.apply_correction`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import ClassVar

from pydantic import AwareDatetime, Field, ValidationError, model_validator

from tasks_lib.arm.comparability import (
    digest_of,
    manifest_digest,
    prompts_digest,
    source_commit_of,
    verifier_digest,
)
from tasks_lib.artifacts import ArtifactStore, check_key
from tasks_lib.conditions import NO_MEMORY_SYSTEM
from tasks_lib.contracts import (
    Condition,
    ContractModel,
    Document,
    GitOid,
    Identifier,
    NonEmptyText,
    RunRecord,
    Sha256,
    violations_of,
)
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.errors import MemtrialError

PREREGS = "preregistrations"
"""Folder of preregistration documents under the artifact root."""
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,127}")
_VERSION_KEY = re.compile(r"^preregistrations/([a-z0-9][a-z0-9._-]*)/v([1-9][0-9]*)\.json$")


class PreregError(MemtrialError):
    """A preregistration cannot be created, found or applied."""


class TaskFreeze(ContractModel):
    """One task's inputs as frozen by a preregistration."""

    task_id: Identifier
    """The task."""
    prompts_digest: Sha256
    """sha256 of the visible prompt and follow-up prompts."""
    manifest_digest: Sha256
    """sha256 of the task manifest as canonical JSON."""
    verifier_digest: Sha256
    """sha256 of the check command, the verifier and the hidden tests."""
    source_commit: GitOid
    """Last commit that changed the task's folder."""


class AnalysisPlan(ContractModel):
    """What will be run and how it will be analysed, decided before the data exists."""

    conditions: tuple[Condition, ...] = Field(min_length=1)
    """Memory conditions of the matrix."""
    trials: int = Field(ge=1, le=1000)
    """Trials per task and condition."""
    primary: NonEmptyText
    """The primary analysis, in words (e.g. pass rate on vs off per task, exact McNemar)."""


class Preregistration(Document):
    """A frozen plan: tasks' prompts and verifiers, the model, the budget and the analysis."""

    KIND: ClassVar[str] = "preregistration"

    name: Identifier
    """Name of the preregistered study."""
    version: int = Field(ge=1)
    """Version; a new version is an apparatus correction."""
    created_at: AwareDatetime
    """When it was frozen (UTC); a run that started earlier cannot be admitted against it."""
    model: NonEmptyText
    """Agent adapter and model name the runs must use (`<agent>/<model>` or the agent alone)."""
    budget_usd: float = Field(gt=0)
    """Most a run may spend in total."""
    tasks: tuple[TaskFreeze, ...] = Field(min_length=1)
    """Every task's frozen inputs."""
    analysis: AnalysisPlan
    """The analysis plan."""
    supersedes: Sha256 | None = None
    """Digest of the version this one corrects (versions above 1 only)."""
    correction: NonEmptyText | None = None
    """Why the apparatus was corrected (versions above 1 only)."""

    @model_validator(mode="after")
    def _correction_iff_later_version(self) -> Preregistration:
        later = self.version > 1
        if later != (self.supersedes is not None) or later != (self.correction is not None):
            raise ValueError("version 1 has no supersedes/correction; a later version must give both")
        ids = [t.task_id for t in self.tasks]
        if len(ids) != len(set(ids)):
            raise ValueError("tasks: a task is listed twice")
        return self


def prereg_digest(prereg: Preregistration) -> str:
    """The preregistration's identity: sha256 of its canonical JSON."""
    return digest_of(prereg.model_dump(mode="json"))


def prereg_key(name: str, version: int) -> str:
    """Where version `version` of preregistration `name` is stored."""
    return check_key(f"{PREREGS}/{name}/v{version}.json")


def freeze_task(task: LoadedTask) -> TaskFreeze:
    """Freeze one task's inputs; PreregError when its folder is not committed (nothing to pin)."""
    commit = source_commit_of(task.root)
    if commit is None:
        raise PreregError(f"{task.root}: task {task.task_id} is not committed to git; commit it before preregistering")
    return TaskFreeze(
        task_id=task.task_id,
        prompts_digest=prompts_digest(task.manifest),
        manifest_digest=manifest_digest(task.manifest),
        verifier_digest=verifier_digest(task.manifest, task.hidden_dir),
        source_commit=commit,
    )


def check_name(name: str) -> str:
    """Return `name` if it is a valid study name, else PreregError saying what one looks like."""
    if not _NAME.fullmatch(name):
        raise PreregError(f"study name {name!r} is not allowed; use lowercase letters, digits, '.', '_' and '-' (e.g. memory-v1)")
    return name


def versions(store: ArtifactStore, name: str) -> list[int]:
    """Stored versions of preregistration `name`, ascending."""
    check_name(name)
    found = []
    for key in store.list_keys(f"{PREREGS}/{name}"):
        match = _VERSION_KEY.match(key)
        if match and match.group(1) == name:
            found.append(int(match.group(2)))
    return sorted(found)


def load_prereg(store: ArtifactStore, ref: str) -> Preregistration:
    """Load `name` (its latest version) or `name@vN`."""
    name, _, version_text = ref.partition("@")
    known = versions(store, name)
    if not known:
        raise PreregError(f"no preregistration named {name!r} in {store.uri}; create it with 'memtrial prereg {name} ...'")
    if version_text:
        if not re.fullmatch(r"v[1-9][0-9]*", version_text) or int(version_text[1:]) not in known:
            raise PreregError(f"{ref!r}: no such version; {name} has v{', v'.join(map(str, known))}")
        version = int(version_text[1:])
    else:
        version = known[-1]
    return store.get_json(prereg_key(name, version), Preregistration)


def find_by_digest(store: ArtifactStore, digest: str) -> tuple[str, Preregistration]:
    """(key, document) of the stored preregistration whose digest is `digest`."""
    for key in store.list_keys(PREREGS):
        if _VERSION_KEY.match(key):
            prereg = store.get_json(key, Preregistration)
            if prereg_digest(prereg) == digest:
                return key, prereg
    raise PreregError(f"no preregistration with digest {digest[:12]} in {store.uri}")


def create_prereg(
    store: ArtifactStore,
    name: str,
    tasks: Sequence[LoadedTask],
    *,
    model: str,
    budget_usd: float,
    conditions: Sequence[str],
    trials: int,
    primary: str,
    correction: str | None = None,
    now: datetime | None = None,
) -> Preregistration:
    """Freeze and store a preregistration (version 1, or the next version when `correction` is given).

    Refuses to replace an existing preregistration silently: a study that exists needs a
    `correction` reason, which makes a new version superseding the latest one.
    """
    existing = versions(store, name)
    if existing and not correction:
        raise PreregError(
            f"preregistration {name!r} exists (v{existing[-1]}); it cannot be changed. "
            "An apparatus correction makes a new version: give a correction reason"
        )
    if correction and not existing:
        raise PreregError(f"preregistration {name!r} does not exist yet; a correction needs a version to supersede")
    if not tasks:
        raise PreregError("name at least one task to preregister")
    previous = store.get_json(prereg_key(name, existing[-1]), Preregistration) if existing else None
    fields = {
        "name": name,
        "version": (existing[-1] + 1) if existing else 1,
        "created_at": now or datetime.now(UTC),
        "model": model,
        "budget_usd": budget_usd,
        "tasks": tuple(freeze_task(t) for t in tasks),
        "analysis": {"conditions": tuple(conditions), "trials": trials, "primary": primary},
        "supersedes": prereg_digest(previous) if previous else None,
        "correction": correction,
    }
    try:
        prereg = Preregistration.model_validate(fields)
    except ValidationError as error:
        raise PreregError("; ".join(str(v) for v in violations_of(error, f"preregistration {name!r}"))) from None
    key = prereg_key(name, prereg.version)
    if store.exists(key):
        raise PreregError(f"{store.uri}/{key} appeared while freezing; another process is preregistering {name!r}")
    store.put_json(key, prereg)
    return prereg


def _short(value: str | None) -> str:
    return "none" if value is None else value[:12]


def record_mismatches(prereg: Preregistration, record: RunRecord) -> list[str]:
    """Every input of `record` that differs from `prereg`, one phrase each (empty when it matches)."""
    freeze = next((t for t in prereg.tasks if t.task_id == record.task_id), None)
    if freeze is None:
        return [f"task {record.task_id} is not preregistered"]
    problems = []
    if record.model != prereg.model:
        problems.append(f"model: ran {record.model or 'unrecorded'!r}, preregistered {prereg.model!r}")
    if record.condition not in prereg.analysis.conditions:
        problems.append(f"condition {record.condition!r} is not in the preregistered {', '.join(prereg.analysis.conditions)}")
    if record.trial >= prereg.analysis.trials:
        problems.append(f"trial {record.trial} is beyond the preregistered {prereg.analysis.trials} trial(s)")
    for label, field in (("prompt", "prompts_digest"), ("manifest", "manifest_digest"),
                         ("verifier", "verifier_digest"), ("source commit", "source_commit")):
        ran, frozen = getattr(record, field), getattr(freeze, field)
        if ran != frozen:
            problems.append(f"{label}: ran {_short(ran)}, preregistered {_short(frozen)}")
    if record.memory_config_digest is None and record.condition not in NO_MEMORY_SYSTEM:
        problems.append("memory config: unrecorded (made before memtrial recorded it), so no comparison can hold it")
    return problems
