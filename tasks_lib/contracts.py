"""The contracts: every artifact memtrial reads or writes is one of these models.

Strict on purpose. Unknown fields are rejected so a manifest cannot gain a field that older code
ignores; instances are frozen so an artifact cannot change after it was checked; a document's
`schema_version` is checked before any other field, so a future format fails with one clear line
instead of a dozen confusing ones. Paths are portable relative POSIX paths and digests are
validated patterns, so a frozen artifact means the same thing on any machine.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar, Final, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StringConstraints,
    ValidationError,
    model_validator,
)

from tasks_lib.conditions import CONDITION_PATTERN, FEED_CONDITIONS, HARM_VARIANTS, key_texts_of  # noqa: F401  (FEED_CONDITIONS re-exported)
from tasks_lib.errors import ContractError, Violation

SCHEMA_VERSION: Final = 1


# --------------------------------------------------------------------------- field types


def check_rel_path(value: str) -> str:
    """Return `value` if it is a portable relative POSIX path, else raise ValueError saying why."""
    if not value or not value.strip():
        raise ValueError("path is empty")
    if "\\" in value:
        raise ValueError(f"path {value!r} contains a backslash; use '/' separators")
    if "\x00" in value:
        raise ValueError(f"path {value!r} contains a NUL byte")
    if value.startswith("/"):
        raise ValueError(f"path {value!r} is absolute; give it relative to its root")
    if re.match(r"^[A-Za-z]:", value):
        raise ValueError(f"path {value!r} starts with a drive letter; give a relative POSIX path")
    parts = (value[:-1] if value.endswith("/") else value).split("/")
    if ".." in parts:
        raise ValueError(f"path {value!r} has a '..' component; it must stay inside its root")
    if all(p in ("", ".") for p in parts):
        raise ValueError(f"path {value!r} names no file (only '.' components)")
    if "" in parts or "." in parts:
        normal = "/".join(p for p in parts if p not in ("", "."))
        raise ValueError(f"path {value!r} is not in normal form; write {normal!r}")
    return value


RelPath = Annotated[str, AfterValidator(check_rel_path)]
"""A portable relative POSIX path: no absolute path, drive letter, backslash or '..'."""

Sha256 = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
"""A SHA-256 digest as 64 lowercase hex characters."""

GitOid = Annotated[str, StringConstraints(pattern=r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")]
"""A full git object id (SHA-1 or SHA-256 repository), lowercase hex."""

IDENTIFIER_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,127}$"
Identifier = Annotated[str, StringConstraints(pattern=IDENTIFIER_PATTERN)]
"""A stable lowercase identifier: letters, digits, '.', '_' and '-'."""

LaneName = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_-]{0,31}$")]
"""The name of a retrieval lane of a memory system (keyword, semantic, graph, ...)."""

Condition = Annotated[str, StringConstraints(pattern=CONDITION_PATTERN)]
"""A memory condition of an arm: one of `tasks_lib.conditions.CONDITIONS`, `ablate:<lane>` or `ablate:all`."""

NonEmptyText = Annotated[str, StringConstraints(min_length=1, strip_whitespace=False)]


# --------------------------------------------------------------------------- base classes


class ContractModel(BaseModel):
    """Strict base class so an artifact does not silently change its meaning."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class Document(ContractModel):
    """A top-level artifact: carries `schema_version`, checked before any other field."""

    KIND: ClassVar[str] = "document"

    schema_version: Literal[1] = SCHEMA_VERSION
    """Version of this artifact's format; memtrial reads version 1."""

    @model_validator(mode="before")
    @classmethod
    def _check_schema_version_first(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" in data:
            version = data["schema_version"]
            if version != SCHEMA_VERSION or isinstance(version, bool):
                raise ValueError(
                    f"schema_version {version!r} is not supported; this memtrial reads {cls.KIND} "
                    f"version {SCHEMA_VERSION}"
                )
        return data


# --------------------------------------------------------------------------- challenge


class ArtifactRef(ContractModel):
    """A file pinned by its digest, relative to the manifest's own folder."""

    path: RelPath
    """Where the file is, relative to the folder of the manifest that names it."""
    sha256: Sha256
    """SHA-256 of the file's bytes; a mismatch is an error, never a warning."""


class Environment(ContractModel):
    """Resource limits of the arm: part of the experiment, so part of the manifest."""

    network_mode: Literal["none", "loopback", "public"] = "none"
    """Network the agent's sandbox gets; `none` unless the task truly needs more."""
    cpus: float = Field(default=1.0, gt=0, le=64)
    """CPU cores the sandbox may use."""
    memory_mb: int = Field(default=2048, ge=64, le=262144)
    """Memory limit of the sandbox in MiB."""
    prebuild_argv: tuple[str, ...] = ()
    """Command run in the workspace before the agent starts (e.g. a dependency build); empty for none."""


class Verifier(ContractModel):
    """The runner-owned check: lives outside the agent-visible tree, never in the prompt."""

    kind: Literal["script"] = "script"
    """How the verifier runs; `script` is an executable asset run with the workspace as cwd."""
    runtime: Literal["posix-shell", "python", "node"]
    """Interpreter for the asset."""
    asset: ArtifactRef
    """The verifier file, pinned by SHA-256."""
    timeout_seconds: int = Field(default=300, ge=1, le=86400)
    """Wall-clock limit of one verifier run."""


class ChallengeManifest(Document):
    """A question put to the agent: prompt, allowed outputs, limits and a pinned verifier."""

    KIND: ClassVar[str] = "challenge manifest"

    challenge_id: Identifier
    """Stable id of the challenge."""
    prompt: NonEmptyText
    """The visible prompt, exactly as the agent receives it."""
    follow_up_prompts: tuple[NonEmptyText, ...] = ()
    """Further prompts sent into the same resumed session (continuity challenges); only the final step is scored."""
    allowed_output_paths: tuple[RelPath, ...]
    """Workspace paths (files or whole subtrees) the agent and its toolchain may change."""
    agent_timeout_seconds: int = Field(default=900, ge=1, le=86400)
    """Wall-clock limit of the agent's turn."""
    environment: Environment = Environment()
    """Resource limits of the sandbox."""
    verifier: Verifier
    """The runner-owned verifier."""
    answer_phrases: tuple[NonEmptyText, ...] = ()
    """Phrases that give the answer away; certification fails if any is already visible."""


# --------------------------------------------------------------------------- fixture


class CorpusSource(ContractModel):
    """Where a corpus comes from: a repository and a commit, optionally one subtree."""

    repository: NonEmptyText
    """A local path or URL git can reach."""
    commit: GitOid
    """The full commit id; a short or symbolic revision is not reproducible."""
    subdir: RelPath | None = None
    """Build only this subtree of the commit, or the whole tree when absent."""


class MemorySpec(ContractModel):
    """One memory to plant, written the way a memory system would have stored it."""

    text: NonEmptyText
    """The memory's text."""
    lane: LaneName
    """The retrieval lane expected to carry it (keyword, semantic, graph, corrections, ...)."""
    kind: Literal["convention", "fact", "decision", "procedure", "correction", "superseded"]
    """What sort of knowledge it is; `superseded` marks an old value that a `correction` replaces."""
    subject: Identifier | None = None
    """What the memory is about; a `correction` supersedes the `superseded` memories with the same subject."""


class Turn(ContractModel):
    """One turn of a recorded session transcript: one JSON object per line of the transcript file."""

    role: Literal["user", "assistant", "tool"]
    """Who produced the turn: the person, the agent, or a tool the agent ran."""
    text: NonEmptyText
    """What was said or printed, verbatim."""


class TranscriptRef(ContractModel):
    """A recorded session transcript of earlier work on the task's project (JSON Lines of turns), pinned."""

    path: RelPath
    """Where the transcript is, relative to the task folder (outside the fixture)."""
    sha256: Sha256
    """SHA-256 of its bytes: every memory system is fed the identical bytes."""
    key_turns: tuple[int, ...] = Field(min_length=1)
    """0-based indexes of the turns that mention the task's key fact in passing (runner-owned: the
    calibration agent knows the fact arrived when one of these turns reached it)."""

    @model_validator(mode="after")
    def _key_turns_are_distinct(self) -> TranscriptRef:
        if any(i < 0 for i in self.key_turns) or len(set(self.key_turns)) != len(self.key_turns):
            raise ValueError("key_turns must be distinct non-negative turn indexes")
        return self


class ArmArtifacts(ContractModel):
    """The memory state handed to one condition: graph and evidence artifacts, pinned."""

    arm: Identifier
    """Name of the graph arm."""
    graph: ArtifactRef | None = None
    """Graph/memory state restored for the arm, if any."""
    evidence: ArtifactRef | None = None
    """Evidence corpus (documents the memory was built from), if any."""


class FixtureManifest(Document):
    """The evidence side of a paired run: the frozen corpus and each arm's memory state."""

    KIND: ClassVar[str] = "fixture manifest"

    fixture_id: Identifier
    """Stable id of the fixture."""
    source: CorpusSource
    """The corpus, built from git objects."""
    memories: tuple[MemorySpec, ...] = ()
    """Memories planted under memory-on conditions."""
    arms: tuple[ArmArtifacts, ...] = ()
    """Per-arm graph and evidence artifacts."""


# --------------------------------------------------------------------------- task

PackageName = Annotated[str, StringConstraints(pattern=r"^(?:@[a-z0-9][a-z0-9._-]*/)?[A-Za-z0-9][A-Za-z0-9._-]{0,213}$")]
"""A PyPI project name or an npm package name (optionally `@scope/`)."""

PackageVersion = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,63}$")]
"""An exact release version (no range or specifier)."""


class UpstreamBase(ContractModel):
    """What every pinned upstream source may say besides where it comes from."""

    exclude: tuple[RelPath, ...] = ()
    """Files or folders of the upstream tree left out of the fixture (before the overlay is applied)."""


class PypiSdist(UpstreamBase):
    """A source distribution on PyPI, pinned by name, version and SHA-256."""

    kind: Literal["pypi-sdist"]
    """Discriminator."""
    name: PackageName
    """The PyPI project name."""
    version: PackageVersion
    """The exact release."""
    sha256: Sha256
    """SHA-256 of the sdist archive (`pip download --no-binary :all: --no-deps NAME==VERSION`)."""


class NpmTarball(UpstreamBase):
    """A package tarball on the npm registry, pinned by name, version and SHA-256."""

    kind: Literal["npm-tarball"]
    """Discriminator."""
    name: PackageName
    """The npm package name."""
    version: PackageVersion
    """The exact release."""
    sha256: Sha256
    """SHA-256 of the `.tgz` (`npm pack NAME@VERSION`)."""


class GitCommit(UpstreamBase):
    """A commit of a git repository, pinned by its full id (git's own content digest)."""

    kind: Literal["git"]
    """Discriminator."""
    url: NonEmptyText
    """A URL git can fetch from."""
    commit: GitOid
    """The full commit id; the fetched commit must have exactly this id."""


UpstreamSource = Annotated[PypiSdist | NpmTarball | GitCommit, Field(discriminator="kind")]
"""A pinned third-party source a task's fixture is built on."""

PLACEBO_LENGTH_TOLERANCE = 0.10
"""Placebo memories' total length may differ from the task's memories' by at most this share."""


class HarmVariants(ContractModel):
    """The planted state of each harm condition (`harm:<name>`), each a full memory set planted instead
    of the task's `memories`; the key memory is the one of a key kind (`tasks_lib.conditions.KEY_MEMORY_KINDS`)."""

    absent: tuple[MemorySpec, ...] = Field(min_length=1)
    """The task's memories with the key memory removed."""
    superseded: tuple[MemorySpec, ...] = Field(min_length=1)
    """Only the old value (a `superseded` memory), no correction and no key memory."""
    contradictory: tuple[MemorySpec, ...] = Field(min_length=1)
    """The old value (a `superseded` memory) and the new one (the key memory), no correction."""
    adjacent: tuple[MemorySpec, ...] = Field(min_length=1)
    """A similar memory about another component instead of the key memory; no key memory."""

    def problems(self, key_texts: tuple[str, ...]) -> list[tuple[str, str]]:
        """(field, problem) for each variant that does not hold the state its condition defines."""
        out = []
        for name in HARM_VARIANTS:
            memories: tuple[MemorySpec, ...] = getattr(self, name)
            texts, kinds = {m.text for m in memories}, [m.kind for m in memories]
            has_key = bool(texts & set(key_texts))
            if "correction" in kinds:
                out.append((name, "a harm variant plants no correction; drop the correction memory"))
            if name == "contradictory" and not ("superseded" in kinds and has_key):
                out.append((name, "must hold the old value (a superseded memory) and the task's key memory (the new value)"))
            elif name != "contradictory" and has_key:
                out.append((name, "must not hold the task's key memory; that is the on arm"))
            if name == "superseded" and "superseded" not in kinds:
                out.append((name, "must hold the old value as a memory of kind superseded"))
        return out

TaskKind = Literal["convention", "deducible", "cross-file", "investigation", "continuity", "tare", "stale-trap"]


class TaskManifest(Document):
    """A paired coding task (SMRITI style): fixture, instruction, check command, memories."""

    KIND: ClassVar[str] = "task manifest"

    task_id: Identifier
    """Stable id of the task; equals its folder name."""
    kind: TaskKind
    """What the task measures (see corpora/tasks/README.md)."""
    fixture: RelPath = "fixture"
    """Folder of the repository fixture, relative to the task folder; built from git objects."""
    instruction: NonEmptyText
    """The visible work request the agent receives."""
    follow_up_prompts: tuple[NonEmptyText, ...] = ()
    """Follow-up prompts for continuity tasks, sent into the same resumed session."""
    check_command: tuple[NonEmptyText, ...] = Field(min_length=1)
    """argv run with the workspace as cwd after hidden/ is applied; `{verifier}` stands for the
    runner-owned verifier's absolute path; exit 0 is a pass."""
    verifier: Verifier
    """The runner-owned verifier asset, pinned by SHA-256."""
    memories: tuple[MemorySpec, ...] = ()
    """Memories to plant under memory-on conditions."""
    placebo_memories: tuple[MemorySpec, ...] = ()
    """The placebo arm's state: as many true but irrelevant memories as `memories`, of the same total
    length within PLACEBO_LENGTH_TOLERANCE; empty when the task has no placebo cell."""
    harm: HarmVariants | None = None
    """The planted state of each harm condition; absent when the task has no harm cells."""
    solution_dir: RelPath = "solution"
    """Files that, copied over the fixture, make the check pass."""
    hidden_dir: RelPath = "hidden"
    """Tests applied only after the agent's turn; never visible to the agent."""
    judge: Literal["apart", "in-process"] = "in-process"
    """How the post-turn tests under `hidden_dir` are judged. `apart`: in a judge process of its own
    uid that never sees the workspace and reaches the code only through a jail of the attempt's uid
    (the tests use the harness's `jail` module or command; `hidden/` is never copied into the
    workspace). `in-process`: copied into the workspace and run in the sandbox of the code they
    judge, which can read or forge them; the report counts such tasks."""
    jail: Literal["python", "node"] = "python"
    """The runtime of a judged-apart task's jail shim: `python` (`harness/shim.py` imports the
    workspace's Python modules) or `node` (`harness/shim.cjs` requires its Node modules). The
    post-turn tests are Python (or shell) either way: they run in the judge."""
    answer_terms: tuple[NonEmptyText, ...] = ()
    """Terms that reveal the answer; none may appear in a visible file or prompt."""
    transcripts: tuple[TranscriptRef, ...] = ()
    """Recorded sessions of earlier work on the project (the experience feed); empty for a task the
    `feed` and `grep` conditions cannot run (they refuse it by name)."""
    answer_path: RelPath | None = None
    """Investigation tasks: the declared output file the grounded answer is written to."""
    allowed_output_paths: tuple[RelPath, ...] = Field(min_length=1)
    """Workspace paths the agent and its toolchain may change."""
    agent_timeout_seconds: int = Field(default=900, ge=1, le=86400)
    """Wall-clock limit of the agent's turn."""
    environment: Environment = Environment()
    """Resource limits of the sandbox."""
    upstream: UpstreamSource | None = None
    """A pinned upstream source (PyPI sdist, npm tarball or git commit) the fixture is built on: the
    fixture folder then holds only the task's overlay, copied over the fetched tree."""

    @model_validator(mode="after")
    def _answer_path_fits(self) -> TaskManifest:
        if self.kind == "investigation" and self.answer_path is None:
            raise ValueError("an investigation task must declare answer_path, the file its answer is written to")
        if self.answer_path is not None and not any(
            self.answer_path == p.rstrip("/") or self.answer_path.startswith(p.rstrip("/") + "/") for p in self.allowed_output_paths
        ):
            raise ValueError(f"answer_path {self.answer_path!r} is not inside allowed_output_paths; add it there")
        return self

    @model_validator(mode="after")
    def _placebo_and_harm_fit(self) -> TaskManifest:
        if self.placebo_memories:
            size, placebo = sum(len(m.text) for m in self.memories), sum(len(m.text) for m in self.placebo_memories)
            if len(self.placebo_memories) != len(self.memories):
                raise ValueError(f"placebo_memories: {len(self.placebo_memories)} memories; give exactly as many as memories ({len(self.memories)})")
            if abs(placebo - size) > PLACEBO_LENGTH_TOLERANCE * size:
                raise ValueError(f"placebo_memories: {placebo} characters in all; keep within {PLACEBO_LENGTH_TOLERANCE:.0%} of "
                                 f"the memories' {size}")
            if {m.text for m in self.placebo_memories} & {m.text for m in self.memories}:
                raise ValueError("placebo_memories: repeats one of the task's memories; a placebo is irrelevant to the task")
            if any(m.kind in ("superseded", "correction") for m in self.placebo_memories):
                raise ValueError("placebo_memories: a placebo memory is a true fact, never superseded or a correction")
        if self.harm is not None:
            problems = self.harm.problems(tuple(key_texts_of(self.memories)))
            if problems:
                raise ValueError("; ".join(f"harm.{field}: {problem}" for field, problem in problems))
        return self


# --------------------------------------------------------------------------- corpus artifacts


class TreeEntry(ContractModel):
    """One file of a packaged tree."""

    path: RelPath
    """Path inside the tree."""
    mode: Literal["100644", "100755", "120000"]
    """Git file mode: regular, executable or symlink."""
    sha256: Sha256
    """SHA-256 of the content (of the link target for a symlink)."""
    size: int = Field(ge=0)
    """Size in bytes."""


class CorpusBuild(Document):
    """Receipt of a corpus built from git objects."""

    KIND: ClassVar[str] = "corpus build receipt"

    corpus_id: Sha256
    """Identity of the corpus: derived from the git tree, the same on any machine."""
    source: CorpusSource
    """What the corpus was built from."""
    tree_oid: GitOid
    """The git tree the files came from."""
    files: tuple[TreeEntry, ...]
    """Every file written, sorted by path."""
    skipped_submodules: tuple[RelPath, ...] = ()
    """Submodule entries (gitlinks) that have no content in this repository."""


class RemovedPath(ContractModel):
    """One path removed by redaction."""

    path: RelPath
    """Path inside the tree."""
    sha256: Sha256
    """SHA-256 of the removed content (of the link target for a symlink)."""
    rule: NonEmptyText
    """The redaction rule that matched."""


class RedactionReceipt(Document):
    """What redaction removed from a packaged tree, identically for every arm."""

    KIND: ClassVar[str] = "redaction receipt"

    corpus_id: Sha256
    """The corpus that was redacted."""
    rules_digest: Sha256
    """SHA-256 of the rule list applied, so a changed list is visible."""
    removed: tuple[RemovedPath, ...]
    """Every removed file, sorted by path."""
    tree_digest_before: Sha256
    """Digest of the tree listing before redaction."""
    tree_digest_after: Sha256
    """Digest of the tree listing after redaction."""


FindingKind = Literal[
    "auto-loaded-context", "suspicious-metadata", "benchmark-awareness", "patch-or-diff", "solution-leak"
]
Surface = Literal["source", "evidence", "graph", "challenge", "home"]


class Finding(ContractModel):
    """One thing certification found."""

    kind: FindingKind
    """Which of the five kinds of leak it is."""
    surface: Surface
    """Which agent-visible surface it is on."""
    path: NonEmptyText
    """File (relative to its surface root) or challenge field where it was found."""
    line: int | None = Field(default=None, ge=1)
    """1-based line of the match, when it is in file content."""
    rule: NonEmptyText
    """The rule that fired."""
    detail: NonEmptyText
    """What was found, in one line."""


class SurfaceScan(ContractModel):
    """How much of one surface certification read."""

    surface: Surface
    """The surface."""
    name: NonEmptyText
    """Which one (a corpus, an artifact name, a challenge id)."""
    files_scanned: int = Field(ge=0)
    """Files (or text fields) read."""
    bytes_scanned: int = Field(ge=0)
    """Bytes read."""


class CertificationReport(Document):
    """Result of the static, model-free, fail-closed certification gate."""

    KIND: ClassVar[str] = "certification report"

    verdict: Literal["clean", "findings", "unchecked"]
    """`clean` only when every surface was read and nothing was found."""
    scans: tuple[SurfaceScan, ...]
    """What was read, per surface."""
    findings: tuple[Finding, ...]
    """Everything found, sorted."""
    unchecked: tuple[NonEmptyText, ...] = ()
    """Surfaces that were missing and skipped under the explicit opt-out variable."""

    @model_validator(mode="after")
    def _verdict_matches(self) -> CertificationReport:
        expected = "findings" if self.findings else ("unchecked" if self.unchecked else "clean")
        if self.verdict != expected:
            raise ValueError(f"verdict {self.verdict!r} contradicts the report; it must be {expected!r}")
        if self.verdict == "clean" and sum(s.files_scanned for s in self.scans) == 0:
            raise ValueError("a clean verdict over zero scanned files is not allowed: the gate checked nothing")
        return self


class PreparedCorpus(Document):
    """The preparation phase of one corpus: built from git, redacted, certified."""

    KIND: ClassVar[str] = "prepared corpus"

    name: Identifier
    """What was prepared (a task id or a corpus name)."""
    build: CorpusBuild
    """The build receipt (files before redaction)."""
    redaction: RedactionReceipt
    """What redaction removed."""
    certification: CertificationReport
    """The certification of the redacted tree and the challenge text."""


# --------------------------------------------------------------------------- runs and grades


ATTEMPT_ERROR = "attempt error in "
"""How a record's `failure_reason` starts when an error of the attempt's own step (materialise, the
agent step's workspace, audit, check, record) made it ungradable (`tasks_lib.arm.steps`)."""


RECORD_JSON = "record.json"
"""An attempt's record file (`tasks_lib.run.layout` places it: `runs/<run_id>/attempts/.../record.json`)."""


class RunRecord(Document):
    """One attempt: a task under one condition, one trial."""

    KIND: ClassVar[str] = "run record"

    run_id: Identifier
    """The run (matrix) this attempt belongs to."""
    task_id: Identifier
    """The task."""
    task_kind: TaskKind | None = None
    """The task's kind, for per-kind views."""
    condition: Condition
    """The memory condition."""
    trial: int = Field(ge=0)
    """Trial number within the condition."""
    order: int = Field(default=0, ge=0)
    """Position of this attempt in its task's interleaved schedule."""
    agent: NonEmptyText = "unknown"
    """The agent adapter that ran the attempt."""
    calibration: bool = False
    """True for the calibration agent: an instrument of the runner, never admissible to a published cohort."""
    corpus_id: Sha256 | None = None
    """The corpus the workspace was built from."""
    outcome: Literal["pass", "fail", "ungradable"]
    """Verifier result; missing evidence is `ungradable`, never a pass."""
    infra_failure: bool = False
    """True when the apparatus, not the agent, failed."""
    failure_reason: str | None = None
    """Why the attempt did not pass (audit violation, check failed, agent infra failure, ...)."""
    check_exit_code: int | None = None
    """Exit status of the check command (None when it did not run or timed out)."""
    audit_passed: bool | None = None
    """Whether the mutation audit passed (None when it did not run)."""
    input_tokens: int = Field(ge=0)
    """Input tokens the agent used."""
    output_tokens: int = Field(ge=0)
    """Output tokens the agent used."""
    cost_usd: float = Field(ge=0)
    """Cost reported by the agent's provider."""
    wall_seconds: float = Field(ge=0)
    """Wall time of the agent's turn."""
    transcript: RelPath | None = None
    """Transcript, relative to the artifact root."""
    injection: Literal["yes", "no", "unknown"]
    """Whether the runner's delivery witness served one of the task's planted memories (`yes`); an arm
    without memory has no witness and is always `no` (see tasks_lib/arm/injection.py)."""
    injection_channel: str | None = None
    """The channel the transcript shows delivering (prompt-time retrieval, session start, ...)."""
    planted_ids: tuple[str, ...] = ()
    """Memory ids planted for this attempt, under the ids the delivery witness serves them by (each
    witness keys its own, see tasks_lib/memory/delivery/witness.py); the memory system's own ids when
    no witness ran."""
    delivered_ids: tuple[str, ...] = ()
    """Planted memories the delivery witness served, by the ids it served them under."""
    served_ids: tuple[str, ...] = ()
    """Every memory the delivery witness served, planted or not (a system serving only others delivered
    none of the planted ones)."""
    unwitnessed_ids: tuple[str, ...] = ()
    """Ids a non-agent transcript step shows delivered that the witness never served: a forged hook
    line or a leak around the witness; never counted as delivery."""
    delivery_receipt: RelPath | None = None
    """The delivery witness's receipt, relative to the artifact root (None in an arm without memory)."""
    delivery_nonce: str | None = Field(default=None, pattern=r"^[0-9a-f]{32}$")
    """The nonce the runner drew for the witness; the receipt carries the same value."""
    witness_flooded: bool = False
    """Whether the attempt's delivery witness turned connections or requests away (its receipt's `flooded`):
    the agent flooded its own memory; the attempt is graded as usual and the report's delivery table says so."""
    audit_receipt: RelPath | None = None
    """Mutation-audit receipt, relative to the artifact root."""
    check_output: RelPath | None = None
    """The post-turn check's stored output (`check.txt`: exit status, sandbox, verdict, stderr and
    stdout tails), relative to the artifact root; None when no check was attempted or on records made
    before memtrial stored it."""
    check_sandbox: NonEmptyText | None = None
    """Where the post-turn check ran (`local/namespace`, `docker/container`; marked `unsandboxed`
    under the explicit opt-out); None when it did not run in any."""
    check_unenforced: tuple[str, ...] = ()
    """What the check's sandbox could not enforce for this attempt (the opt-out first, when it was used)."""
    agent_unenforced: tuple[str, ...] = ()
    """Each limit or guarantee the agent's sandbox could not enforce for this attempt (e.g. no cgroup:
    memory per process only), as its provider named it; empty when it enforced all of them."""
    judge: Literal["apart", "in-process"] | None = None
    """How the post-turn tests were judged (`apart`: a judge process the code under test cannot reach;
    `in-process`: beside the code they judge, which could read or forge them); None when no check ran."""
    build_under_test: NonEmptyText
    """The memory-system build measured; recorded per data point, not in the comparability key."""
    memory_config_digest: Sha256 | None = None
    """Comparability: the configuration of the memory system the arm measured (system, embedder,
    provisioner command, frozen adapter config; the run provenance's `memory_config_digest`). None in
    an arm that reaches no memory system (`off`, `ablate:all`, `notes`, `grep`), and on records made
    before memtrial recorded it (an arm with memory is then incomparable)."""
    model: NonEmptyText | None = None
    """Comparability: the agent adapter and the model it ran (`<agent>/<model>`, or the agent alone
    when it takes no model); None on records made before memtrial recorded it."""
    manifest_digest: Sha256 | None = None
    """Comparability: sha256 of the task manifest as canonical JSON (see tasks_lib/arm/comparability.py)."""
    verifier_digest: Sha256 | None = None
    """Comparability: sha256 of the check command, the pinned verifier and every hidden test file."""
    prompts_digest: Sha256 | None = None
    """Preregistration: sha256 of the visible prompt and follow-up prompts as canonical JSON."""
    source_commit: GitOid | None = None
    """Comparability: the last commit of the task's checkout that changed the task's folder."""
    worker: NonEmptyText | None = None
    """`<host>:<pid>` of the process that ran the arm (where a fanned-out arm ran); None on records
    made before memtrial recorded it. Not part of any comparison."""


# --------------------------------------------------------------------------- loading

D = TypeVar("D", bound=Document)

DOCUMENT_KINDS: dict[str, type[Document]] = {
    "challenge.json": ChallengeManifest,
    "fixture.json": FixtureManifest,
    "task.json": TaskManifest,
    "corpus.json": CorpusBuild,
    "redaction.json": RedactionReceipt,
    "certification.json": CertificationReport,
    "prepared.json": PreparedCorpus,
    RECORD_JSON: RunRecord,
}
"""File names memtrial writes and reads, mapped to their contract."""


def violations_of(error: ValidationError, source: str) -> list[Violation]:
    """Turn a pydantic error into violations naming the file, the field and the problem."""
    out = []
    for item in error.errors():
        field = ".".join(str(p) for p in item["loc"])
        problem = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            problem = "unknown field; remove it or check its spelling"
        elif item["type"] == "missing":
            problem = "required field is missing"
        elif item["type"] == "string_pattern_mismatch":
            problem = f"{item['input']!r} does not match the required pattern {item['ctx']['pattern']}"
        out.append(Violation(source, field, problem))
    return out


def parse_document(model: type[D], data: Any, source: str) -> D:
    """Validate `data` as `model`, raising ContractError that names `source` and each field.

    A stored document must state its schema_version (code may rely on the default).
    """
    if not isinstance(data, dict):
        raise ContractError([Violation(source, "", f"a {model.KIND} must be a JSON object, not {type(data).__name__}")])
    if "schema_version" not in data:
        raise ContractError([Violation(source, "schema_version", f"missing; a {model.KIND} must say \"schema_version\": {SCHEMA_VERSION}")])
    try:
        return model.model_validate(data)
    except ValidationError as error:
        violations = violations_of(error, source)
    unknown = sorted(v.field for v in violations if v.problem.startswith("unknown field"))
    if len(unknown) > 2 and 2 * len(unknown) > len(data):
        missing = sorted(v.field for v in violations if v.problem == "required field is missing")
        summary = f"does not look like a {model.KIND}: unknown fields {', '.join(unknown)}"
        if missing:
            summary += f"; missing {', '.join(missing)}"
        raise ContractError([Violation(source, "", summary + "; check the file or its kind")])
    raise ContractError(violations)


def load_document(path: Path, model: type[D] | None = None) -> D:
    """Read a JSON artifact from `path` and validate it (by file name when `model` is None)."""
    if model is None:
        model = DOCUMENT_KINDS.get(path.name)  # type: ignore[assignment]
        if model is None:
            known = ", ".join(sorted(DOCUMENT_KINDS))
            raise ContractError([Violation(str(path), "", f"cannot tell what kind of document this is; name it one of {known}")])
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractError([Violation(str(path), "", "file does not exist")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError([Violation(str(path), "", f"cannot be read as UTF-8 text ({error})")]) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as error:
        raise ContractError([Violation(str(path), "", f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}")]) from None
    return parse_document(model, data, str(path))


def dump_document(doc: Document) -> bytes:
    """Serialize a document deterministically (sorted keys, trailing newline)."""
    return (json.dumps(doc.model_dump(mode="json"), indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
