"""The run configuration contract: what `memtrial run` and the nightly flow do, from one YAML/JSON file.

A config names the tasks, the agents (the calibration agent always runs; any other named agent
runs too), the memory conditions and trials, where artifacts and cached stage results live, the
task runner, and which suites run. `config_digest` hashes only the fields that change what an arm
measures, so moving the artifact root or switching runners never invalidates cached stages.
"""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, ClassVar, Literal, get_args

import yaml
from pydantic import BaseModel, Field, JsonValue, ValidationInfo, field_validator, model_validator

from tasks_lib.contracts import (
    Condition,
    ContractModel,
    Document,
    GitOid,
    Identifier,
    RelPath,
    parse_document,
)
from tasks_lib.corpus.packs import CorpusPack
from tasks_lib.errors import ContractError, Violation
from tasks_lib.memory.provisioner.client import ProvisionerSpec
from tasks_lib.run.layout import RUN_CONFIG_JSON  # noqa: F401 - where a nightly run keeps its resolved config
from tasks_lib.suites.options import SuiteOptions

CALIBRATION_AGENT = "calibration"
FREE_AGENTS = frozenset({CALIBRATION_AGENT})
"""Agents that cannot spend money; every other agent is paid and is gated by the budget guard."""
SUITES = ("recall", "retrieval", "external")


class AgentSpec(ContractModel):
    """One agent the paired matrix runs."""

    name: Identifier
    """Registered agent adapter name: calibration, claude-code, openai-chat, command."""
    options: dict[str, JsonValue] = Field(default_factory=dict)
    """Keyword options passed to the adapter's factory (model, base URL, argv...)."""

    @property
    def paid(self) -> bool:
        """True when this agent can spend money (anything but the calibration agent)."""
        return self.name not in FREE_AGENTS


class DockerSpec(ContractModel):
    """Which Docker engine and image `sandbox: docker` uses (read only with `sandbox: docker`)."""

    host: str | None = None
    """The engine's address (`unix:///var/run/docker.sock`, `tcp://HOST:2376`, `ssh://user@host`);
    default: `DOCKER_HOST` where the arm runs, else the default socket `unix:///var/run/docker.sock`."""
    image: str | None = None
    """A pinned image reference (`name@sha256:<64 hex digits>`) the commands run in, pulled when the
    engine lacks it; default: an image built on the engine from this machine's files, nothing pulled."""

    def sandbox_options(self) -> dict[str, str]:
        """The `docker` provider's keyword options (`DockerSandbox(base_url=..., image=...)`) this names."""
        return {k: v for k, v in (("base_url", self.host), ("image", self.image)) if v is not None}

    @field_validator("host")
    @classmethod
    def _an_engine_address(cls, host: str | None) -> str | None:
        if host is None:
            return host
        from tasks_lib.sandbox.docker import (
            ENGINE_URL_PATTERN,  # only when a host is named: loading a config stays light
        )

        if not re.match(ENGINE_URL_PATTERN, host):
            raise ValueError(f"{host!r} is not an engine address; use unix:///path/docker.sock, tcp://HOST:PORT or ssh://USER@HOST")
        return host

    @field_validator("image")
    @classmethod
    def _a_pinned_image(cls, image: str | None) -> str | None:
        if image is None:
            return image
        from tasks_lib.sandbox.docker import PINNED_IMAGE_PATTERN

        if not re.match(PINNED_IMAGE_PATTERN, image):
            raise ValueError(f"{image!r} is not pinned; use name@sha256:<64 hex digits> (a tag can move), or leave "
                             "image unset to build one from this machine's files")
        return image


class RunnerSpec(ContractModel):
    """Which Prefect task runner fans the arms out."""

    kind: Literal["thread", "dask"] = "thread"
    """`thread`: a local thread pool; `dask`: prefect-dask (a local cluster, or `address`)."""
    workers: int = Field(default=2, ge=1, le=256)
    """Parallel workers (threads, or Dask worker processes of a local cluster)."""
    address: str | None = None
    """Scheduler address of an existing Dask cluster (tcp://host:8786); only with kind dask."""
    no_workers_timeout: float = Field(default=120, gt=0, le=86400)
    """Seconds a Dask cluster may be left without any worker before the run fails (one line naming the
    scheduler; the records already stored are kept). memtrial watches the cluster itself, so any
    scheduler works with its defaults; a local cluster's scheduler is also started with it."""

    @field_validator("address")
    @classmethod
    def _address_scheme(cls, value: str | None) -> str | None:
        if value is not None and "://" not in value:
            raise ValueError(f"{value!r} is not a scheduler address; write tcp://HOST:PORT")
        return value


class BudgetSpec(ContractModel):
    """The money fence in front of paid agents."""

    config: str | None = None
    """Path of the budget guard's configuration (relative to the run config's folder); required
    when a paid agent runs."""


class RunConfig(Document):
    """A run of the nightly flow (matrix, suites, report)."""

    KIND: ClassVar[str] = "run config"

    name: Identifier = "default"
    """Label of this configuration (used in run ids and reports)."""
    tasks_root: RelPath = "corpora/tasks"
    """Task corpus folder, relative to the checkout whose git objects build the fixtures."""
    tasks: list[Identifier] | None = None
    """Task ids to run, each once (default, or the field left out: every task in the corpus; an empty
    list is refused, never read as every task)."""
    revision: str = "HEAD"
    """Commit of the checkout whose git objects the fixtures are built from."""
    agents: list[AgentSpec] = Field(default_factory=list)
    """Agents besides the calibration agent, which always runs first."""
    conditions: list[Condition] = Field(default_factory=lambda: ["off", "on", "ablate:all"], min_length=1)
    """Memory conditions of every task, interleaved within each task."""
    trials: int = Field(default=1, ge=1, le=100)
    """Trials per task and condition."""
    memory_system: Literal["reference", "provisioner"] = "reference"
    """Memory system under test in the paired matrix: the embedded reference system, or the one
    `provisioner` reaches."""
    provisioner: ProvisionerSpec | None = None
    """The memory system's provisioner (restore, snapshot, destroy); required with
    `memory_system: provisioner`, not allowed otherwise."""
    embedder: Literal["hashed", "minilm"] = "hashed"
    """Embedder of the reference memory system (`hashed` is offline and needs no model)."""
    sandbox: Literal["local", "docker"] = "local"
    """Where the agent's commands run."""
    docker: DockerSpec = Field(default_factory=DockerSpec)
    """The engine and image of `sandbox: docker` (default: the user's engine, an image built from this machine's files)."""
    artifact_root: str | None = None
    """Artifact root: a folder or s3://bucket/prefix (default $MEMTRIAL_ARTIFACT_ROOT or .memtrial/artifacts)."""
    result_root: str | None = None
    """Where Prefect persists stage results (the cache): default `<artifact_root>/prefect-results`."""
    runner: RunnerSpec = Field(default_factory=RunnerSpec)
    """Task runner for the arm fan-out."""
    suites: list[Literal["recall", "retrieval", "external", "write-path"]] = Field(default_factory=list)
    """Suites the nightly flow runs besides the paired matrix, each once."""
    suite_options: SuiteOptions = Field(default_factory=SuiteOptions, validate_default=True)
    """Each listed suite's typed options (`tasks_lib.suites.options`), e.g. the data files of `external`."""
    budget: BudgetSpec = Field(default_factory=BudgetSpec)
    """Budget guard settings (used when a paid agent runs)."""
    flow_retries: int = Field(default=0, ge=0, le=5)
    """Prefect retries of the whole flow run; completed stages come from cache on a retry."""

    @model_validator(mode="after")
    def _provisioner_names_the_system(self) -> RunConfig:
        if (self.memory_system == "provisioner") != (self.provisioner is not None):
            raise ValueError("memory_system: 'provisioner' needs a provisioner: {argv: [...]}, and a provisioner "
                             "needs memory_system: provisioner; set both or neither")
        return self

    @model_validator(mode="after")
    def _docker_needs_the_docker_sandbox(self) -> RunConfig:
        if self.sandbox != "docker" and self.docker != DockerSpec():
            raise ValueError(f"docker: is read only with sandbox: docker (this config has sandbox: {self.sandbox}); "
                             "set sandbox: docker or remove docker:")
        return self

    @field_validator("tasks")
    @classmethod
    def _unique_tasks(cls, tasks: list[str] | None) -> list[str] | None:
        if tasks == []:
            raise ValueError("an empty list names no task; name the tasks to run, or leave tasks out to run every task")
        _named_once(tasks or [], "task", "each task")
        return tasks

    @field_validator("suites")
    @classmethod
    def _unique_suites(cls, suites: list[str]) -> list[str]:
        _named_once(suites, "suite", "each suite")
        return suites

    @field_validator("suite_options")
    @classmethod
    def _options_of_listed_suites(cls, options: SuiteOptions, info: ValidationInfo) -> SuiteOptions:
        suites = info.data.get("suites", [])
        unlisted = [name for name in options.named() if name not in suites]
        if unlisted:
            raise ValueError(f"sets options of {', '.join(unlisted)}, which suites does not list (suites: {suites}); "
                             "add it to suites or remove its options")
        if "external" in suites and not options.external.files():
            raise ValueError("suites lists external, whose data is not bundled; name its files: "
                             "suite_options: {external: {locomo: FILE, longmemeval: [FILES]}}")
        return options

    @field_validator("agents")
    @classmethod
    def _unique_agents(cls, agents: list[AgentSpec]) -> list[AgentSpec]:
        names = [a.name for a in agents]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"agent(s) {', '.join(duplicated)} named twice; name each agent once")
        return agents

    @property
    def all_agents(self) -> list[AgentSpec]:
        """The calibration agent, then every other named agent."""
        rest = [a for a in self.agents if a.name != CALIBRATION_AGENT]
        named = next((a for a in self.agents if a.name == CALIBRATION_AGENT), AgentSpec(name=CALIBRATION_AGENT))
        return [named, *rest]

    @property
    def paid(self) -> bool:
        """True when any configured agent can spend money."""
        return any(a.paid for a in self.all_agents)

    def config_digest(self) -> str:
        """SHA-256 of the fields that change what an arm measures (not where results are stored)."""
        fields = {"agents", "conditions", "memory_system", "embedder", "sandbox", "revision"}
        identity = self.model_dump(mode="json", include=fields | ({"provisioner"} if self.provisioner else set()))
        if self.docker.image is not None:  # what the commands run in; the engine's address is a location
            identity["docker_image"] = self.docker.image
        return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _named_once(names: list[str], what: str, fix: str) -> None:
    """Raise ValueError naming every name listed more than once."""
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ValueError(f"{what}(s) {', '.join(twice)} listed more than once; name {fix} once")


def _known_fields(model: type[BaseModel], loc: tuple[int | str, ...]) -> list[str]:
    """The field names (aliases where set) of the model found at `loc` inside `model`, or [] when
    `loc` leads through something other than a model's field."""
    for part in loc:
        field = model.model_fields.get(str(part)) or next(
            (f for f in model.model_fields.values() if f.alias == part), None)
        inner = next((t for t in (field.annotation, *get_args(field.annotation)) if isinstance(t, type)
                      and issubclass(t, BaseModel)), None) if field else None
        if inner is None:
            return []
        model = inner
    return [f.alias or name for name, f in model.model_fields.items()]


def _with_known_names(error: ContractError) -> ContractError:
    """`error` with every unknown-field violation listing the names that are known there."""
    out = []
    for violation in error.violations:
        loc = tuple(violation.field.split("."))
        known = _known_fields(RunConfig, loc[:-1]) if violation.problem.startswith("unknown field") else []
        if known:
            what = "suite" if loc[:-1] == ("suite_options",) else "field"
            violation = Violation(violation.source, violation.field,
                                  f"unknown {what} {loc[-1]!r}; known: {', '.join(known)}")
        out.append(violation)
    return ContractError(out)


def parse_run_config(data: Any, source: str) -> RunConfig:
    """Validate a parsed config; a missing schema_version is read as version 1 (configs are hand-written)."""
    if isinstance(data, dict):
        data = {"schema_version": 1, **data}
        conditions = data.get("conditions")
        if isinstance(conditions, list) and any(isinstance(c, bool) for c in conditions):
            raise ContractError([Violation(source, "conditions", 'YAML reads bare off/on as booleans; quote them: ["off", "on", "ablate:all"]')])
    try:
        return parse_document(RunConfig, data, source)
    except ContractError as error:
        raise _with_known_names(error) from None


def load_run_config(path: Path) -> RunConfig:
    """Read a YAML or JSON run config; ContractError names the file and every wrong field."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ContractError([Violation(str(path), "", "file does not exist; pass an existing --config")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError([Violation(str(path), "", f"cannot be read as UTF-8 text ({error})")]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark else ""
        raise ContractError([Violation(str(path), "", f"invalid YAML{where}: {getattr(error, 'problem', error)}")]) from None
    if data is None:
        data = {}
    return parse_run_config(data, str(path))


class ArmSpec(ContractModel):
    """One arm of the paired matrix as a stage input: what it runs and the digests that identify it."""

    run_id: str
    """Run the arm belongs to (its artifacts go under runs/<run_id>/)."""
    task_id: Identifier
    """Task the arm runs."""
    task_folder: RelPath
    """The task's folder inside `tasks_subdir` (not part of the arm's identity)."""
    condition: Condition
    """Memory condition."""
    trial: int = Field(ge=0)
    """Trial number (0-based)."""
    order: int = Field(ge=0)
    """Position of the arm in its task's interleaved schedule."""
    agent: AgentSpec
    """The agent."""
    sandbox: Literal["local", "docker"]
    """Where the agent's commands run."""
    docker: DockerSpec | None = None
    """The engine and image of `sandbox: docker` (None for `local`); its `host` is a location, not part of the identity."""
    embedder: Literal["hashed", "minilm"]
    """Embedder of the reference memory system."""
    provisioner: ProvisionerSpec | None = None
    """The provisioner that holds the arm's memories instead of the embedded store, if any."""
    corpus_pack: CorpusPack
    """The corpus revision's task tree in the artifact store, where the arm's fixture and runner-owned
    files come from (`tasks_lib.corpus.packs`): no path of the flow's machine reaches the worker."""
    commit: str
    """Commit of the corpus checkout the pack was made from (provenance; not part of the identity)."""
    source_commit: GitOid | None = None
    """The last commit of the checkout that changed the task's folder (copied into the record)."""
    tasks_subdir: RelPath
    """Corpus folder inside the checkout."""
    artifact_root: str
    """Artifact root the arm's transcript, receipt and record go to (not part of the identity: the
    result storage is per root already, and a local path must not key a cache another machine reads)."""
    corpus_id: str
    """Content id of the task's prepared fixture."""
    task_tree_oid: str
    """Git tree id of the whole task folder (manifest, verifier, hidden tests, solution, memories)."""
    manifest_sha256: str
    """SHA-256 of task.json."""
    verifier_sha256: str
    """SHA-256 of the runner-owned verifier."""
    config_digest: str
    """RunConfig.config_digest() of the run."""
    code_digest: str
    """Digest of the stage code (tasks_lib) that runs the arm."""

    def cache_identity(self) -> str:
        """SHA-256 of every field that defines the arm's result: content digests, not the commit (an
        unrelated commit leaves the task's tree, and so the arm, unchanged), the pack (it holds every
        task; `task_tree_oid` is this task's content) nor any location (folder, artifact root)."""
        identity = self.model_dump(mode="json", exclude={"task_folder", "commit", "corpus_pack", "source_commit", "artifact_root"}
                                   | (set() if self.provisioner else {"provisioner"})
                                   | (set() if self.docker and self.docker.image else {"docker"}))
        return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

    @property
    def label(self) -> str:
        """Short human label: task/condition/trial/agent."""
        return f"{self.task_id} {self.condition} t{self.trial} ({self.agent.name})"


def provisioner_warnings(config: RunConfig) -> list[str]:
    """The run-level distrust warning of an unconfined provisioner (none for a confined one or no provisioner):
    its code ran with the runner's view, so it could have read the run's realm secret and named each arm."""
    if config.provisioner is None or not config.provisioner.unconfined:
        return []
    return [f"provisioner {' '.join(config.provisioner.argv)} ran unconfined (provisioner.unconfined: true): the memory "
            "system's own code saw the whole host as the runner's user, including the run's realm secret, so it could "
            "tell the arms apart; confine it (bubblewrap) before publishing these numbers"]
