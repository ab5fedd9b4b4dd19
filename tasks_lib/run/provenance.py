"""Where a run's numbers come from: `runs/<run_id>/provenance.json`, written when the run's records are stored.

The report opens with it, so a published figure names the memtrial build, the memory system, the
agent, the corpus revision, the run config and the machine that produced it. The records already
carry per-attempt facts (the memory build, the model, the corpus id, the task's source commit);
this document holds the run-level ones they do not: the memtrial version and commit, the config's
name and digest, the embedder, the sandbox, the conditions and trials, when and on which host the
records were stored, and the nightly run whose suites belong to it.

It is not sealed evidence (it is not under `attempts/`): it describes the run, it backs no
outcome. A run stored before memtrial wrote it has none, and the report says `not recorded` for
every fact only it holds, never a guess.
"""

from __future__ import annotations

import hashlib
import json
import platform
import socket
import subprocess
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import ClassVar

from pydantic import Field

from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.contracts import (
    Condition,
    Document,
    GitOid,
    Identifier,
    NonEmptyText,
    RelPath,
    Sha256,
)
from tasks_lib.memory.adapter_config import AdapterConfig
from tasks_lib.run.layout import PROVENANCE_JSON
from tasks_lib.settings import CHECKOUT_ROOT

CODE_ROOT = CHECKOUT_ROOT
"""The checkout (or installed tree) memtrial's own code runs from."""


class RunProvenance(Document):
    """What produced a run's records: the apparatus, the memory system, the config, the machine."""

    KIND: ClassVar[str] = "run provenance"

    run_id: Identifier
    """The run."""
    parent_run_id: Identifier | None = None
    """The nightly run this run is one agent's matrix of (its config and suite results live there);
    None for a run made on its own (`memtrial paired`)."""
    recorded_at: NonEmptyText
    """When the run's records were stored (ISO 8601, UTC)."""
    hostname: NonEmptyText
    """The machine the flow ran on."""
    platform: NonEmptyText
    """Its operating system, architecture and Python version."""
    memtrial_version: NonEmptyText
    """memtrial's package version."""
    memtrial_commit: GitOid | None = None
    """The commit of the memtrial checkout that ran, None when it does not run from a git checkout."""
    memtrial_dirty: bool | None = None
    """True when that checkout had uncommitted changes to tracked files; None when unknown."""
    agent: NonEmptyText
    """The agent adapter of the run."""
    memory_system: NonEmptyText
    """`reference` (memtrial's embedded store) or `provisioner` (a third party's, reached through its provisioner)."""
    provisioner_argv: tuple[NonEmptyText, ...] = ()
    """The provisioner's command, when a provisioner held the memories."""
    provisioner_grants: NonEmptyText | None = None
    """How the provisioner was confined and what it was granted beyond its default view (`ProvisionerSpec.grants`:
    `confined, network none, read /x`, or `unconfined: ...`); None without a provisioner."""
    memory_config_digest: Sha256
    """sha256 of what configures the memory system (memory system, embedder, provisioner command, adapter config)."""
    adapter_config: AdapterConfig | None = None
    """The frozen, reviewable config of the memory system measured (packages, settings, note), when memtrial
    knows it: the reference store, or a bundled system through `memtrial-system-provisioner`."""
    embedder: NonEmptyText
    """Embedder of the reference memory system."""
    sandbox: NonEmptyText
    """Where the agent's commands ran."""
    conditions: tuple[Condition, ...] = Field(min_length=1)
    """The memory conditions of the matrix."""
    trials: int = Field(ge=1)
    """Trials per task and condition."""
    corpus_commit: GitOid
    """The commit whose git objects the task fixtures were built from."""
    tasks_root: RelPath
    """The task corpus folder inside that commit."""
    config_name: Identifier | None = None
    """The run config's name; None when the run had no run config (the library's `run_matrix`)."""
    config_digest: Sha256 | None = None
    """`RunConfig.config_digest()`: the fields that change what an arm measures; None without a config."""
    config_key: RelPath | None = None
    """Where the resolved run config is stored (`runs/<nightly run>/run-config.json`), when it is."""


def provenance_key(run_id: str) -> str:
    """Where a run's provenance goes."""
    return run_key(run_id, PROVENANCE_JSON)


def memtrial_build(code_root: Path = CODE_ROOT) -> tuple[str, str | None, bool | None]:
    """(package version, commit of the checkout, dirty) of the memtrial that runs; the commit and
    dirty flag are None when the code does not run from a git checkout."""
    try:
        release = version("memtrial")
    except PackageNotFoundError:
        release = "unknown"
    try:
        commit = subprocess.run(["git", "-C", str(code_root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(code_root), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return release, None, None
    return release, commit, bool(dirty)


def memory_config_digest(memory_system: str, embedder: str, provisioner_argv: Sequence[str] = (),
                         adapter: AdapterConfig | None = None) -> str:
    """sha256 of the memory system's configuration as canonical JSON, including the frozen adapter
    config's digest (package versions and settings, `memory.adapter_config`): given, or a registered
    system's own."""
    from tasks_lib.memory.adapter_config import adapter_config
    from tasks_lib.memory.registry import MEMORY_SYSTEMS

    identity: dict[str, object] = {"memory_system": memory_system, "embedder": embedder, "provisioner_argv": list(provisioner_argv)}
    if adapter is None and memory_system in MEMORY_SYSTEMS:
        adapter = adapter_config(memory_system, embedder)
    if adapter is not None:
        identity["adapter_config"] = adapter.digest
    return hashlib.sha256(json.dumps(identity, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def measured_adapter_config(embedder: str, provisioner_argv: Sequence[str], provisioner_env: Mapping[str, str]) -> AdapterConfig | None:
    """The adapter config of what a run measures: the reference store's, or the bundled system the
    system provisioner serves (MEMTRIAL_PROVISIONER_SYSTEM, MEMTRIAL_PROVISIONER_EMBEDDER); None for any other provisioner."""
    from tasks_lib.memory.adapter_config import adapter_config
    from tasks_lib.memory.registry import MEMORY_SYSTEMS
    from tasks_lib.settings import PROVISIONER_EMBEDDER, PROVISIONER_SYSTEM

    if not provisioner_argv:
        return adapter_config("reference", embedder)
    system = PROVISIONER_SYSTEM.text(provisioner_env)
    runs_system_provisioner = any(a.endswith(("memtrial-system-provisioner", "tasks_lib.memory.provisioner.system")) for a in provisioner_argv)
    if not runs_system_provisioner or system not in MEMORY_SYSTEMS:
        return None
    return adapter_config(system, PROVISIONER_EMBEDDER.text(provisioner_env, default="hashed"))


def arm_memory_config(embedder: str, provisioner_argv: Sequence[str] = (),
                      provisioner_env: Mapping[str, str] | None = None) -> tuple[str, AdapterConfig | None]:
    """(memory config digest, adapter config) of the memory system an arm with memory measures: the
    embedded reference store with `embedder`, or the provisioner `provisioner_argv` run with
    `provisioner_env`. The run's provenance and every record of an arm with memory carry this digest."""
    memory_system = "provisioner" if provisioner_argv else "reference"
    adapter = measured_adapter_config(embedder, provisioner_argv, provisioner_env or {})
    return memory_config_digest(memory_system, embedder, provisioner_argv, adapter), adapter


def run_provenance(
    run_id: str,
    *,
    agent: str,
    conditions: Sequence[str],
    trials: int,
    corpus_commit: str,
    tasks_root: str,
    embedder: str,
    sandbox: str,
    provisioner_argv: Sequence[str] = (),
    provisioner_env: Mapping[str, str] | None = None,
    provisioner_grants: str | None = None,
    config_name: str | None = None,
    config_digest: str | None = None,
    config_key: str | None = None,
    parent_run_id: str | None = None,
) -> RunProvenance:
    """The provenance of `run_id` as recorded now, on this machine, by this memtrial."""
    release, commit, dirty = memtrial_build()
    memory_system = "provisioner" if provisioner_argv else "reference"
    digest, adapter = arm_memory_config(embedder, provisioner_argv, provisioner_env)
    return RunProvenance(
        run_id=run_id, parent_run_id=parent_run_id, recorded_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        hostname=socket.gethostname() or "unknown", platform=f"{platform.system()} {platform.release()} {platform.machine()}, "
        f"Python {platform.python_version()}", memtrial_version=release, memtrial_commit=commit, memtrial_dirty=dirty,
        agent=agent, memory_system=memory_system, provisioner_argv=tuple(provisioner_argv), provisioner_grants=provisioner_grants,
        memory_config_digest=digest, adapter_config=adapter,
        embedder=embedder,
        sandbox=sandbox, conditions=tuple(dict.fromkeys(conditions)), trials=trials, corpus_commit=corpus_commit,
        tasks_root=tasks_root, config_name=config_name, config_digest=config_digest, config_key=config_key,
    )


def write_provenance(store: ArtifactStore, provenance: RunProvenance) -> str:
    """Store `provenance` under its run (replacing an earlier one: a rerun records where it ran); return its key."""
    key = provenance_key(provenance.run_id)
    store.put_json(key, provenance)
    return key


def load_provenance(store: ArtifactStore, run_id: str) -> RunProvenance | None:
    """The run's provenance, or None for a run stored before memtrial wrote one. ContractError names a bad file."""
    key = provenance_key(run_id)
    if not store.exists(key):
        return None
    return store.get_json(key, RunProvenance)
