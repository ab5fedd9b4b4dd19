"""An attempt's post-turn check, in a fresh sandbox of the same kind as the agent's.

The post-turn tests import what the agent wrote, so the check runs code the agent controls: it
never runs on the host. It runs in a fresh sandbox of the attempt's provider (`local` = bwrap,
`docker` = a container) with network `none`, only PATH, LANG and PYTHONDONTWRITEBYTECODE in its
environment, the host seen through the provider's allow-list (the toolchain read-only, the
workspace read-write, the verifier read-only at the neutral path `/verifier/<name>`, the post-turn
harness read-only at `/harness`), unprivileged
with every capability dropped, and limits on time, processes, memory and output. Every process of
the check is killed when it ends, and the provider counts any that outlived the kill.

The check is the runner-owned harness (`post_turn`), which runs the post-turn tests and then the
verifier, and prints its result with the attempt's nonce; every `__pycache__` and `.pyc` of the
workspace is removed first and the check's Python keeps its bytecode under a private prefix.

The result (`SandboxedCheck`) says which sandbox ran the check and what it could not enforce; the
attempt's record carries both (`check_sandbox`, `check_unenforced`).

A check that cannot be sandboxed (no working bwrap for `local`, no daemon or image for `docker`)
is not run and the attempt is `ungradable`, unless the environment variable
`MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1` says otherwise: the check then runs in the provider as it is
(a plain process group; `local` without bwrap when the provider cannot start), and the record names it
`... (unsandboxed: MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1)`, never silently clean. A process that
outlived the check's kill makes the attempt `ungradable` too.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import Literal

from tasks_lib.contracts import ContractModel
from tasks_lib.corpus.post_turn import (
    HARNESS_DIR,
    HARNESS_TARGET,
    PostTurnVerdict,
    expected_cases,
    harness_argv,
    new_nonce,
    purge_bytecode,
    verdict,
)
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.sandbox.base import (
    DEFAULT_PATH,
    ReadOnlyMount,
    Sandbox,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)
from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.sandbox.local import LocalSandbox
from tasks_lib.sandbox.registry import get_sandbox
from tasks_lib.settings import ALLOW_UNSANDBOXED_CHECK

UNSANDBOXED_OPT_OUT = ALLOW_UNSANDBOXED_CHECK.name
VERIFIER_DIR = "/verifier"
"""Where the verifier appears inside the sandbox (a neutral path: no host path leaks in)."""
CHECK_ENV = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPYCACHEPREFIX": "/tmp/.pycache"}
"""The check's whole environment (the provider adds a private HOME and TMPDIR); bytecode is never
read from the workspace, only from the sandbox's private /tmp."""
MAX_PROCESSES = 256
"""Processes the check may run at once."""
MAX_OUTPUT_BYTES = 1 << 20
"""Bytes of the check's stdout and of its stderr kept."""
STORED_TAIL_CHARS = 8000
"""Characters of the check's stderr and of its stdout kept (stored as the attempt's `check.txt`)."""


class SandboxedCheck(ContractModel):
    """What the sandboxed post-turn check of one attempt did."""

    exit_code: int | None = None
    """Exit status (negative: the signal that ended it); None when it timed out or did not run."""
    ran: bool = False
    """True when the check ran to an exit status or a timeout."""
    output_tail: str = ""
    """The last characters of its stderr (with `[timed out]` appended on a timeout)."""
    stdout_tail: str = ""
    """The last characters of its stdout (the harness's nonce-carrying result comes last)."""
    sandbox: str | None = None
    """`<provider>/<isolation>` that ran it (`local/namespace`, `docker/container`), with
    `(unsandboxed: MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1)` appended under the opt-out; None when none could."""
    unenforced: tuple[str, ...] = ()
    """What that sandbox could not enforce for this check, the opt-out first when it was used."""
    problem: str | None = None
    """Why the result cannot be graded (not sandboxable, could not start, a process survived)."""
    post_turn: PostTurnVerdict | None = None
    """The harness's verdict on the post-turn cases (None when the check did not run)."""
    judge: Literal["apart", "in-process"] = "in-process"
    """How the post-turn tests were judged: `apart` (a judge process of its own uid reaching the code
    only through the jail, `judged_check`) or `in-process` (in the sandbox of the code they judge)."""


def check_limits(task: LoadedTask) -> SandboxLimits:
    """The check's limits: the task's CPUs and memory, the verifier's timeout, network none."""
    environment = task.manifest.environment
    return SandboxLimits(cpus=environment.cpus, memory_mb=environment.memory_mb,
                         timeout_seconds=task.manifest.verifier.timeout_seconds, network="none",
                         max_processes=MAX_PROCESSES, max_output_bytes=MAX_OUTPUT_BYTES)


def check_request(task: LoadedTask, workspace: Path, nonce: str, *, moved: bool = True, post_turn: bool = True) -> SandboxRequest:
    """The check as a sandbox request: the harness (with `nonce`) over the post-turn files, then the
    verifier; `moved=False` keeps both at their host paths (process isolation); `post_turn=False`
    runs the verifier alone (a judged-apart task's post-turn tests run in the judge)."""
    verifier = task.verifier_path.resolve()
    inside = f"{VERIFIER_DIR}/{PurePosixPath(task.manifest.verifier.asset.path).name}" if moved else str(verifier)
    harness = HARNESS_TARGET if moved else str(HARNESS_DIR)
    verifier_argv = tuple(arg.replace("{verifier}", inside) for arg in task.manifest.check_command)
    verifier_mount = ReadOnlyMount(source=verifier, target=inside if moved else None)
    if not post_turn:
        return SandboxRequest(argv=verifier_argv, workspace=workspace.resolve(), env=dict(CHECK_ENV),
                              limits=check_limits(task), mounts=(verifier_mount,))
    return SandboxRequest(argv=harness_argv(nonce, task.hidden_dir, verifier_argv, harness), workspace=workspace.resolve(),
                          env=dict(CHECK_ENV), limits=check_limits(task),
                          mounts=(verifier_mount, ReadOnlyMount(source=HARNESS_DIR, target=harness if moved else None)))


def sandbox_options_of(agent_options: Mapping[str, object] | None) -> dict[str, object]:
    """The agent's `sandbox_options` (how its provider is built), for a check of the same kind."""
    options = (agent_options or {}).get("sandbox_options")
    return dict(options) if isinstance(options, Mapping) else {}


def open_check_sandbox(name: str, options: Mapping[str, object]) -> tuple[Sandbox | None, str | None]:
    """(the provider, None) when it isolates the check here; else (the provider when it can run at
    all, why it does not isolate the check)."""
    try:
        sandbox = get_sandbox(name, **options)
    except SandboxError as error:
        return None, f"sandbox {name!r} is unavailable: {error}"
    if sandbox.capabilities().isolation == "process":
        return sandbox, f"sandbox {name!r} cannot isolate the check here: {getattr(sandbox, 'bwrap_reason', None) or 'process isolation only'}"
    return sandbox, None


def check_sandbox_problem(name: str, options: Mapping[str, object], env: Mapping[str, str] | None = None) -> str | None:
    """Why no post-turn check could run in sandbox `name` (built with `options`) here, or None when one
    can: isolated, or under the opt-out at all (as `run_sandboxed_check` would run it). Never raises;
    every provider it opens is closed again. Preflight asks this before any arm."""
    opted_out = ALLOW_UNSANDBOXED_CHECK.flag(env)
    try:
        provider, problem = open_check_sandbox(name, options)
    except TypeError as error:  # the provider's constructor refused the options it was given
        return f"sandbox {name!r} cannot be built from its options {dict(options)}: {error}"
    if provider is not None:
        provider.close()
    if problem is None or (opted_out and provider is not None):
        return None
    if not opted_out:
        return problem
    try:
        LocalSandbox(bwrap=False).close()
    except SandboxError as error:
        return f"{problem}; {error}"
    return None


def _exit_code(result: SandboxResult) -> int | None:
    """The exit status, a signal as its negative (as subprocess reports it), None on a timeout."""
    if result.timed_out:
        return None
    if result.exit_code is not None:
        return result.exit_code
    return -result.signal if result.signal else None


def run_sandboxed_check(task: LoadedTask, workspace: Path, sandbox: str = "local",
                        options: Mapping[str, object] | None = None) -> SandboxedCheck:
    """Run the task's check in a fresh `sandbox` over `workspace` (hidden/ already applied); never raises.
    A judged-apart task's check is `judged_check.run_judged_check`."""
    provider, problem = open_check_sandbox(sandbox, options or {})
    notes: tuple[str, ...] = ()
    if problem is not None:
        if not ALLOW_UNSANDBOXED_CHECK.flag():
            if provider is not None:
                provider.close()
            return SandboxedCheck(problem=f"the post-turn check could not be sandboxed: {problem} "
                                          f"(set {UNSANDBOXED_OPT_OUT}=1 only to run it unsandboxed, recorded as such)")
        notes = (f"{UNSANDBOXED_OPT_OUT}=1: the check ran without the attempt's sandbox ({problem})",)
        if provider is None:
            try:
                provider = LocalSandbox(bwrap=False)
            except SandboxError as error:
                return SandboxedCheck(problem=f"the post-turn check could not run at all: {problem}; {error}")
    assert provider is not None, "open_check_sandbox gives a sandbox or a problem"
    purge_bytecode(workspace)
    nonce = new_nonce()
    with provider:
        caps = provider.capabilities()
        label = f"{caps.provider}/{caps.isolation}" + (f" (unsandboxed: {UNSANDBOXED_OPT_OUT}=1)" if notes else "")
        try:
            result = provider.run(check_request(task, workspace, nonce, moved=caps.isolation != "process"))
        except SandboxError as error:
            return SandboxedCheck(sandbox=label, unenforced=notes, problem=f"the check could not start in {label}: {error}")
    tail = (result.stderr.text + ("\n[timed out]" if result.timed_out else ""))[-STORED_TAIL_CHARS:]
    survived = f"{result.survivors} process(es) of the check outlived the sandbox's kill" if result.survivors else None
    return SandboxedCheck(exit_code=_exit_code(result), ran=True, output_tail=tail,
                          stdout_tail=result.stdout.text[-STORED_TAIL_CHARS:], sandbox=label,
                          unenforced=notes + result.unenforced, problem=survived,
                          post_turn=verdict(result.stdout.text, nonce, expected_cases(task.hidden_dir)))
