"""Preflight: refuse a run configuration that would fail inside a flow, before any flow starts.

Unknown agent or task names, duplicate conditions and lanes the memory system lacks are each one line naming the
field, the value and the names that are known, in well under a second: nobody waits for Prefect
to start to learn about a typo. A pinned upstream release missing from this machine's cache is refused
the same way (runs never download; `memtrial corpus fetch` is the set-up that does).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from tasks_lib.agents.registry import agent_names
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.corpus.upstream import FETCH_COMMAND, describe, is_fetched, upstream_cache_root
from tasks_lib.errors import ContractError, Violation
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.runconfig import RunConfig


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
    return problems


def upstream_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """The run's upstream tasks whose pinned release is not in this machine's upstream cache, as one
    violation naming each task, its source and `memtrial corpus fetch` (only reads the cache)."""
    chosen = [t for t in load_tasks(project_root / config.tasks_root)
              if t.manifest.upstream is not None and (config.tasks is None or t.task_id in config.tasks)]
    if not chosen:
        return []
    cache = upstream_cache_root()
    missing = [f"task {t.task_id} ({describe(t.manifest.upstream)})" for t in chosen
               if t.manifest.upstream is not None and not is_fetched(t.manifest.upstream, cache)]
    if not missing:
        return []
    return [Violation(source, "tasks", f"pinned upstream release(s) not in the upstream cache {cache}: {', '.join(missing)}; "
                                       f"run `{FETCH_COMMAND}` once with the network (set-up): runs never download")]


def preflight(config: RunConfig, project_root: Path, source: str) -> None:
    """Raise ContractError listing every problem `config_problems` and `upstream_problems` find; return when there is none."""
    problems = config_problems(config, project_root, source)
    if not problems:
        problems = upstream_problems(config, project_root, source)
    if problems:
        raise ContractError(problems)
