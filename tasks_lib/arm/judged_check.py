"""The post-turn check of a judged-apart task: a judge process apart from the code it judges.

Two parties, both started by the runner in bwrap namespaces (`LocalSandbox.start`, the local
provider's one way to build a sandboxed command line; `tasks_lib.sandbox.party`), each with
network `none`, no capabilities, `no_new_privs`, the check's limits and a uid of its own when the
runner is root:

- the JAIL runs the runner-owned shim (`harness/shim.py`, or `harness/shim.cjs` for a task whose
  manifest says `jail: node`) as the attempt's uid over the
  workspace (`/workspace`, lent to that uid) and a scratch folder (`/scratch`) shared with the
  judge. Its only channel is its stdin/stdout: one end of a socketpair the runner made. Nothing of
  the post-turn tests, the nonce or the judge's stdout is in its view, argv, environment or
  descriptors.
- the JUDGE runs the harness's `judge.py` as a second uid over the pinned post-turn tests
  (read-only, its cwd), the harness and the scratch folder, holding the socketpair's other end
  (`JAIL_FD`). The workspace is not in its view: the tests reach the code only through the jail
  (`harness/jail.py`, the `jail` command), as JSON values and handles.

The two ends are joined directly: a socket carries only bytes, and the judge parses them as JSON,
so no runner thread needs to sit between them. The runner reads the verdict from the judge's stdout
alone (with the attempt's nonce, `post_turn.verdict`). The task's verifier, which runs the
fixture's own suite (the workspace's code and visible tests only, never the post-turn tests), runs
inside the jail's sandbox beside the shim (its uid and view: nothing there it could not reach from
the workspace already), with stdout and stderr pipes of its own to the runner; the jail's launcher
exits with its status, which is the check's, as before. The two sandboxes start together, so the
judge apart costs one more sandbox start, not a second check.

Different uids and PID namespaces put the judge out of the jail's reach: no /proc entry, no
ptrace or pidfd_getfd, no shared descriptor but the socket. A runner that is not root gets no
second uid (bwrap maps both into user namespaces of the runner's uid); the PID namespaces still
hide each from the other, and the record says so in `unenforced`.
"""

from __future__ import annotations

import os
import shlex
import socket
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path

from tasks_lib.arm.sandboxed_check import (
    CHECK_ENV,
    MAX_OUTPUT_BYTES,
    STORED_TAIL_CHARS,
    UNSANDBOXED_OPT_OUT,
    SandboxedCheck,
    check_limits,
    check_request,
)
from tasks_lib.corpus.post_turn import (
    HARNESS_DIR,
    HARNESS_TARGET,
    expected_cases,
    jail_argv,
    new_nonce,
    purge_bytecode,
    test_files,
    verdict,
)
from tasks_lib.corpus.tasks import LoadedTask
from tasks_lib.sandbox.base import ReadOnlyMount, SandboxLimits, SandboxRequest
from tasks_lib.sandbox.capture import BoundedSink, drain_file
from tasks_lib.sandbox.cgroups import make_run_cgroup
from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.sandbox.fstree import remove_tree
from tasks_lib.sandbox.identity import RunIdentity, lent_workspace, reap_uids, run_identities
from tasks_lib.sandbox.local import LocalSandbox
from tasks_lib.sandbox.party import Party, PartyProcess

JUDGE_DIR = "/judge"
"""Where the judge sees the pinned post-turn tests (its cwd)."""
SCRATCH_INSIDE = "/scratch"
"""Where both parties see the folder they share."""
JAIL_FD = 3
"""The judge's descriptor for its end of the channel to the jail."""
JUDGED_APART = "judged apart"
"""Appended to the check's sandbox label."""


class JudgeUnavailable(SandboxError):
    """The judge apart cannot run here (no working bwrap)."""


def _reap(identities: tuple[RunIdentity | None, ...], wait_seconds: float = 2.0) -> int:
    """SIGKILL every process of `identities`; how many are still alive after `wait_seconds`."""
    uids = {identity.uid for identity in identities if identity is not None}
    return reap_uids(uids, wait_seconds) if uids else 0


def _identities() -> tuple[RunIdentity | None, RunIdentity | None]:
    """(jail, judge) uids of their own for a root runner, never equal (one /proc scan); (None, None) otherwise."""
    identities = run_identities(2)
    return (identities[0], identities[1]) if identities else (None, None)


def _exit_code(proc: PartyProcess, finished: bool) -> int | None:
    """The verifier's status (a signal as its negative, as subprocess reports it); None on a timeout."""
    return proc.returncode if finished else None


def _jail_and_verifier(jail: tuple[str, ...], verifier: tuple[str, ...], out: int, err: int) -> tuple[str, ...]:
    """The jail's argv: a `sh` that starts the verifier (`verifier`, stdin empty, stdout and stderr the
    runner's pipes `out` and `err`, reopened through /proc: dash names no descriptor above 9) in the
    background, runs the shim (`jail`) on the channel, then exits with the verifier's status. The
    verifier runs the workspace's code and visible tests with the jail's uid and view, so it may
    share the jail's sandbox; the judge's tests, nonce and verdict channel are in neither."""
    script = (f'"$@" </dev/null >/proc/self/fd/{out} 2>/proc/self/fd/{err} & verifier=$!\n'
              f"{shlex.join(jail)}\nwait \"$verifier\"\n")
    return ("sh", "-c", script, "verifier", *verifier)


def judge_apart(task: LoadedTask, workspace: Path, limits: SandboxLimits) -> SandboxedCheck:
    """The whole check of a judged-apart task: the judge over the pinned post-turn tests, driving a
    jail over `workspace`, and the task's verifier inside the jail's sandbox (the fixture's own
    suite: the workspace's code and visible tests only). Raises JudgeUnavailable
    without a working bwrap, SandboxError when a party cannot start."""
    sandbox = LocalSandbox()
    if sandbox.capabilities().isolation != "namespace":
        raise JudgeUnavailable(f"the judge apart needs bwrap: {sandbox.bwrap_reason}")
    nonce = new_nonce()
    jail_identity, judge_identity = _identities()
    scratch = Path(tempfile.mkdtemp(prefix="judged-"))
    empty = Path(tempfile.mkdtemp(prefix="judge-ws-"))
    os.chmod(scratch, 0o777)
    harness = ReadOnlyMount(source=HARNESS_DIR, target=HARNESS_TARGET)
    jail_end, judge_end = socket.socketpair()
    channel = judge_end.fileno()
    verifier_out, verifier_out_w = os.pipe()
    verifier_err, verifier_err_w = os.pipe()
    if jail_identity is not None:  # the verifier reopens its ends through /proc as the jail's uid
        for end in (verifier_out_w, verifier_err_w):
            os.fchown(end, jail_identity.uid, jail_identity.gid)
    verifier = check_request(task, workspace, nonce, post_turn=False)
    jail_request = SandboxRequest(argv=_jail_and_verifier(jail_argv(task.manifest.jail), verifier.argv, verifier_out_w, verifier_err_w),
                                  workspace=workspace.resolve(), env=dict(CHECK_ENV), limits=limits,
                                  mounts=(harness, *verifier.mounts))
    judge_request = SandboxRequest(argv=("python3", "-I", "-B", "-S", f"{HARNESS_TARGET}/judge.py", nonce, *test_files(task.hidden_dir)),
                                   workspace=empty, env={**CHECK_ENV, "JAIL_FD": str(channel)}, limits=limits,
                                   mounts=(harness, ReadOnlyMount(source=task.hidden_dir.resolve(), target=JUDGE_DIR)))
    shared = ((scratch, SCRATCH_INSIDE),)
    parties = (Party(jail_request, jail_identity, shared=shared, stdin=jail_end.fileno(), stdout=jail_end.fileno(),
                     pass_fds=(verifier_out_w, verifier_err_w)),
               Party(judge_request, judge_identity, chdir=JUDGE_DIR, shared=shared, pass_fds=(channel,)))
    # one cgroup holds the whole check (jail, judge and verifier): its memory, processes and CPU are the attempt's
    cgroup = make_run_cgroup(limits.memory_mb << 20, limits.max_processes, limits.cpus)
    unenforced = tuple(sandbox.unenforced(jail_request, cgroup)) + (() if jail_identity is not None else (
        "judge uid: the runner is not root, so judge and jail share its uid (each in its own PID and user namespace)",))
    sinks = {name: BoundedSink(MAX_OUTPUT_BYTES) for name in ("judge", "judge_err", "jail_err", "verifier", "verifier_err")}
    started: list[PartyProcess] = []
    readers: list[threading.Thread] = []
    try:
        with lent_workspace(workspace, jail_identity):
            try:
                for party in parties:  # started together: the check pays the slowest start, not their sum
                    started.append(sandbox.start(party, cgroup))
                jail, judge = started
                jail_end.close()  # the parties hold the channel now; the runner keeps no end of it
                judge_end.close()
                for end in (verifier_out_w, verifier_err_w):
                    os.close(end)
                verifier_out_w = verifier_err_w = -1
                readers = [drain_file(judge.stdout, sinks["judge"]), drain_file(judge.stderr, sinks["judge_err"]),  # type: ignore[arg-type]
                           drain_file(jail.stderr, sinks["jail_err"]),  # type: ignore[arg-type]
                           drain_file(os.fdopen(verifier_out, "rb"), sinks["verifier"]),
                           drain_file(os.fdopen(verifier_err, "rb"), sinks["verifier_err"])]
                verifier_out = verifier_err = -1  # the readers own them now
                deadline = time.monotonic() + limits.timeout_seconds
                judged = judge.wait(deadline)
                verified = jail.wait(deadline)  # the jail's launcher ends with the verifier's status, after the shim
            finally:
                cgroup.kill()
                for proc in started:
                    proc.kill()
                survivors = _reap((jail_identity, judge_identity))
                out_of_memory = cgroup.oom_kills() > 0
            for reader in readers:
                reader.join(5.0)
    finally:
        jail_end.close()
        judge_end.close()
        for end in (verifier_out, verifier_err, verifier_out_w, verifier_err_w):
            if end >= 0:
                os.close(end)
        cgroup.remove()
        for folder in (scratch, empty):  # whatever uid wrote in it: the runner removes it, by descriptor (any depth)
            try:
                remove_tree(folder)
            except OSError:
                pass  # our own scratch; a leftover is only disk
    text = {name: sink.result().text for name, sink in sinks.items()}
    tail = ("--- judge ---\n" + text["judge_err"] + ("" if judged else "\n[judge timed out]")
            + "\n--- jail ---\n" + text["jail_err"] + "\n--- verifier ---\n" + text["verifier_err"]
            + ("" if verified else "\n[timed out]")
            + ("\n[out of memory: the check's cgroup killed it]" if out_of_memory else ""))[-STORED_TAIL_CHARS:]
    return SandboxedCheck(exit_code=_exit_code(jail, verified), ran=True, output_tail=tail,
                          stdout_tail=(text["verifier"] + text["judge"])[-STORED_TAIL_CHARS:],
                          sandbox=f"local/namespace ({JUDGED_APART})", unenforced=unenforced,
                          problem=f"{survivors} process(es) of the judged check outlived its kill" if survivors else None,
                          post_turn=verdict(text["judge"], nonce, expected_cases(task.hidden_dir)), judge="apart")


def run_judged_check(task: LoadedTask, workspace: Path, sandbox: str = "local",
                     options: Mapping[str, object] | None = None) -> SandboxedCheck:
    """The check of a judged-apart task (hidden/ is never applied); never raises. It always runs in
    the `local` provider's namespaces, whatever the attempt's provider (`sandbox`, `options`), since
    the judge and the jail need two uids and a socketpair between them."""
    purge_bytecode(workspace)
    try:
        return judge_apart(task, workspace, check_limits(task))
    except SandboxError as error:
        return SandboxedCheck(problem=f"the post-turn judge could not run: {error} ({UNSANDBOXED_OPT_OUT} does not apply "
                                      "to a judged-apart task)", judge="apart")
