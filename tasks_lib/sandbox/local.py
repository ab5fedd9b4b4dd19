"""The `local` provider: a subprocess in its own session, limited by prlimit, confined by bwrap.

With bubblewrap (`bwrap`) the command runs in new PID, IPC, UTS and (for network `none`) network
namespaces with no capabilities. What it sees of the host is an allow-list (see `hostview`): the
toolchain and a few `/etc` files read-only, private `/tmp`, `/var/tmp` and HOME, the workspace
read-write at `/workspace` and the request's read-only mounts; nothing else of the host exists
inside. A hidden path (the runner-owned area) that lies in the workspace or a mount is covered by
an empty tmpfs. The command never runs as root on the host: a root runner switches it to a uid
of its own for the run (see `identity`) and lends it the workspace; any other runner's uid is
mapped into a user namespace. The bwrap arguments travel through a pipe (`--args`), so host
paths do not show in the sandbox's process list. Isolation is `namespace`.

Without a working bwrap the command runs as a plain process in its own session (isolation
`process`): private HOME and TMPDIR directories and a scrubbed environment still hold, but the
host filesystem, `/tmp`, the network and the runner's uid are shared; each result lists that in
`unenforced`.

In both modes the whole process tree is limited by a cgroup of the run's own (`cgroups`: memory
with no swap, process count, CPU quota), joined by a launcher before anything of the command runs;
the private tmpfs folders are capped (`tmpfs_mb`, bwrap `--size`) and their pages count in the
cgroup's memory. The kernel's out-of-memory kill in that cgroup ends the whole run, reported as
`kill_reason: memory`. Where no cgroup can be made (no cgroup2 or v1 controller, a folder the
runner may not write), each limit it would have held is named in `unenforced`. util-linux
`prlimit` sets, per process, address space, CPU time, file size, process count and core size
besides, and `taskset` pins the command to whole cores. When the command ends (or times out) the
cgroup, the process group, the session, every descendant seen while it ran and every process of
the run's uid are killed; one still alive after that is counted in `survivors`.

A check made of several processes at once (the judged check's jail, judge and verifier) starts
each as a `Party` with `start`: the same command line (`_spawn` is the one place it is built, for
`run` too), plus shared folders, its own cwd and descriptors, returning a `PartyProcess` handle.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tasks_lib.sandbox.base import (
    DEFAULT_PATH,
    SANDBOX_HOME,
    Guarantee,
    Sandbox,
    SandboxCapabilities,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)
from tasks_lib.sandbox.capture import BoundedSink, drain_file
from tasks_lib.sandbox.cgroups import LAUNCHER_FAILED, RunCgroup, make_run_cgroup
from tasks_lib.sandbox.errors import (
    SandboxError,
    SandboxRequestError,
    SandboxUnavailable,
    SandboxUnsupported,
)
from tasks_lib.sandbox.fstree import remove_tree
from tasks_lib.sandbox.hostview import host_view_args, is_visible, parent_dirs, under
from tasks_lib.sandbox.identity import (
    SETPRIV_CAPS,
    RunIdentity,
    lent_workspace,
    run_identity,
    setpriv_argv,
)
from tasks_lib.sandbox.party import WORKSPACE_INSIDE, Party, PartyProcess
from tasks_lib.sandbox.procs import TreeWatcher, is_running, kill_tree, wait_exit

MAX_BWRAP_ARGS_BYTES = 60_000
"""Largest bwrap argument payload (it goes through a pipe written before the start: below 64 KiB)."""
READER_JOIN_SECONDS = 5.0
REAP_SECONDS = 2.0
"""How long killed processes get to disappear before they count as survivors."""
POLL_SECONDS = 0.05
"""How often a running command's cgroup is checked for an out-of-memory kill."""

PROCESS_ONLY: dict[Guarantee, str] = {
    "private-tmp": "no bwrap: /tmp is the host's shared /tmp (TMPDIR is private)",
    "hidden-paths": "no bwrap: the runner-owned area is readable by the command",
    "write-confinement": "no bwrap: the command can write anywhere its user can",
    "network-none": "no bwrap: the command shares the host network",
    "host-allowlist": "no bwrap: the command sees the whole host filesystem",
    "unprivileged": "no bwrap: the command runs as the runner's uid (root, when the runner is root)",
}


@functools.lru_cache(maxsize=8)
def bwrap_problem(path: str | None) -> str | None:
    """Why bwrap at `path` cannot confine a command here, or None when it can (for a root runner:
    including the switch to an unprivileged uid)."""
    if path is None:
        return "bwrap not found on PATH; install bubblewrap (scripts/install_test_deps.sh)"
    probe = [path, "--die-with-parent", "--unshare-pid", "--unshare-net", "--ro-bind", "/", "/",
             "--proc", "/proc", "--dev", "/dev", "--cap-drop", "ALL"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return "util-linux setpriv not found on PATH; a root runner needs it to drop the command to an unprivileged uid"
        probe += [*(a for cap in SETPRIV_CAPS for a in ("--cap-add", cap)), "--",
                  *setpriv_argv(setpriv, RunIdentity(uid=65534, gid=65534))]
    else:
        probe.append("--")
    try:
        done = subprocess.run([*probe, "/bin/true"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap at {path} could not run: {error}"
    if done.returncode != 0:
        return f"bwrap at {path} cannot create namespaces here: {done.stderr.decode(errors='replace').strip()}"
    return None


def _process_only() -> dict[Guarantee, str]:
    """What process isolation cannot enforce here (running as the runner's uid only matters for root)."""
    return {k: v for k, v in PROCESS_ONLY.items() if k != "unprivileged" or os.geteuid() == 0}


class LocalSandbox(Sandbox):
    """Run commands on this machine: bwrap namespaces when available, else a plain process group."""

    name = "local"

    def __init__(self, *, bwrap: bool | None = None, bwrap_path: str | None = None) -> None:
        """`bwrap=None` uses bwrap when it works here; True requires it; False never uses it.

        Raises:
            SandboxUnavailable: `bwrap=True` and bwrap cannot run here, or util-linux
                `prlimit`/`taskset` is missing.
        """
        self._prlimit = shutil.which("prlimit")
        self._taskset = shutil.which("taskset")
        if self._prlimit is None or self._taskset is None:
            raise SandboxUnavailable("the local sandbox needs util-linux prlimit and taskset on PATH")
        path = bwrap_path or shutil.which("bwrap")
        self.bwrap_reason = "disabled by the caller (bwrap=False)" if bwrap is False else bwrap_problem(path)
        if bwrap is True and self.bwrap_reason is not None:
            raise SandboxUnavailable(self.bwrap_reason)
        self._bwrap = path if self.bwrap_reason is None else None
        self._setpriv = shutil.which("setpriv") if self._bwrap and os.geteuid() == 0 else None

    # ------------------------------------------------------------------ interface

    def capabilities(self) -> SandboxCapabilities:
        if self._bwrap:
            return SandboxCapabilities(provider=self.name, isolation="namespace", network_modes=("none", "loopback"))
        reasons: dict[str, str] = {k: f"{v} ({self.bwrap_reason})" for k, v in _process_only().items()}
        return SandboxCapabilities(
            provider=self.name, isolation="process", unenforceable=reasons, network_modes=("none", "loopback")
        )

    def run(self, request: SandboxRequest) -> SandboxResult:
        request.validate_host_paths()
        limits = request.limits
        cgroup = make_run_cgroup(limits.memory_mb << 20, limits.max_processes, limits.cpus)
        unenforced = self.unenforced(request, cgroup)
        scratch = Path(tempfile.mkdtemp())  # neutral name: the command sees it as HOME
        try:
            identity = run_identity() if self._setpriv else None
            if self._bwrap:
                home, tmpdir, workspace_path = SANDBOX_HOME, "/tmp", WORKSPACE_INSIDE
                bwrap_args: list[str] | None = self.view_args(request, identity)
            else:
                self._check_process_mounts(request)
                (scratch / "home").mkdir()
                (scratch / "tmp").mkdir()
                home, tmpdir, workspace_path = str(scratch / "home"), str(scratch / "tmp"), str(request.workspace)
                bwrap_args = None
            env = {"PATH": DEFAULT_PATH, **request.env, "HOME": home, "TMPDIR": tmpdir}
            with lent_workspace(request.workspace, identity):
                return self._execute(request, env, bwrap_args, workspace_path, unenforced, identity, cgroup)
        finally:
            cgroup.remove()  # a folder that would not go holds no live process of ours (killed) and is only a name
            try:
                remove_tree(scratch)  # by descriptor: the command may have left a tree too deep for shutil.rmtree
            except OSError:
                pass  # our own scratch; a leftover is only disk

    # ------------------------------------------------------------------ parties and what a run cannot hold

    def start(self, party: Party, cgroup: RunCgroup) -> PartyProcess:
        """Start `party` confined as `run` confines a command (the same command line: `cgroup` joined,
        prlimit and taskset, bwrap with this provider's view plus the party's shared folders, setpriv
        to its identity) and return at once with its handle. The caller lends the workspace to the
        party's uid, waits, kills, reaps the uid and removes `cgroup`; `unenforced` says which of the
        request's limits `cgroup` cannot hold.

        Raises:
            SandboxUnavailable: no working bwrap here (a party is always namespaced), or an identity
                is given and the runner is not root with setpriv.
            SandboxRequestError: the workspace or a mount source does not exist, the view is too large.
            SandboxUnsupported: a mount target lies inside the workspace.
            SandboxError: the process could not be started.
        """
        if self._bwrap is None:
            raise SandboxUnavailable(f"a confined party needs bwrap: {self.bwrap_reason}")
        request = party.request
        request.validate_host_paths()
        view = self.view_args(request, party.identity, chdir=party.chdir, shared=party.shared)
        env = {"PATH": DEFAULT_PATH, **request.env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}
        popen = self._spawn(request, cgroup, party.identity, env, view, stdin=party.stdin, stdout=party.stdout,
                            pass_fds=party.pass_fds)
        return PartyProcess(popen, party)

    def unenforced(self, request: SandboxRequest, cgroup: RunCgroup) -> list[str]:
        """Each of `request`'s limits and guarantees that this provider with `cgroup` cannot enforce
        here, with the reason (a run's `SandboxResult.unenforced`, before anything it met running)."""
        limits = request.limits
        notes = list(cgroup.unenforced)
        if "memory" not in cgroup.folders:
            notes.append(f"{limits.memory_mb} MiB memory applies per process (RLIMIT_AS), not to the process tree")
            notes.append(f"tmpfs_mb={limits.tmpfs_mb}: private tmpfs pages are not counted in any memory limit")
        cores = self._cores(limits)
        if len(cores) != limits.cpus and "cpu" not in cgroup.folders:
            notes.append(f"cpus={limits.cpus}: pinned to {len(cores)} whole core(s); a fractional quota is not enforced")
        if os.geteuid() == 0 and not self._bwrap and "pids" not in cgroup.folders:
            notes.append("max_processes: RLIMIT_NPROC does not bind root")
        if limits.network == "loopback":
            notes.append("network=loopback: the host network is shared; egress beyond loopback is not blocked")
        if not self._bwrap:
            notes.extend(f"{k}: {v}" for k, v in _process_only().items())
        return notes

    # ------------------------------------------------------------------ pieces

    @staticmethod
    def _cores(limits: SandboxLimits) -> list[int]:
        available = sorted(os.sched_getaffinity(0))
        return available[: max(1, min(len(available), math.ceil(limits.cpus)))]

    @staticmethod
    def _check_process_mounts(request: SandboxRequest) -> None:
        for mount in request.mounts:
            if mount.inside != str(mount.source):
                raise SandboxUnsupported(
                    f"mount {mount.source} -> {mount.inside}: without bwrap a mount cannot be moved; "
                    "drop the target or install bubblewrap"
                )

    def view_args(self, request: SandboxRequest, identity: RunIdentity | None, *, chdir: str = WORKSPACE_INSIDE,
                  shared: tuple[tuple[Path, str], ...] = ()) -> list[str]:
        """The bwrap arguments of `request`'s view (the module docstring), keeping the capabilities
        setpriv needs when `identity` is given, with `shared` (host folder, path inside) bound
        read-write and `chdir` as the working directory.

        Raises:
            SandboxRequestError: the workspace lies inside a hidden path.
            SandboxUnsupported: a mount target lies inside the workspace.
        """
        workspace = str(request.workspace)
        for hidden in request.hidden_paths:
            if under(workspace, [str(hidden)]):
                raise SandboxRequestError(f"workspace {workspace} lies inside hidden path {hidden}; it would be masked")
        args = ["--die-with-parent", "--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
                "--unshare-cgroup-try", "--cap-drop", "ALL"]
        if identity is not None:
            args += [a for cap in SETPRIV_CAPS for a in ("--cap-add", cap)]
        if request.limits.network == "none":
            args.append("--unshare-net")
        made: set[str] = set()
        args += host_view_args(SANDBOX_HOME, made, tmpfs_bytes=request.limits.tmpfs_mb << 20)
        args += ["--perms", "0755", "--dir", WORKSPACE_INSIDE, "--bind", workspace, WORKSPACE_INSIDE]
        for mount in request.mounts:
            if under(mount.inside, [WORKSPACE_INSIDE]):
                raise SandboxUnsupported(
                    f"mount target {mount.inside} lies inside {WORKSPACE_INSIDE}; its mount point would be "
                    "created in the workspace and show up as a mutation"
                )
            args += [*parent_dirs(mount.inside, made), "--ro-bind", str(mount.source), mount.inside]
        for hidden in request.hidden_paths:
            text = str(hidden)
            inside = self._inside_path(text, request)
            if not os.path.lexists(text) or (inside is None and not is_visible(text)):
                continue  # nothing to hide, or outside the view already (a mount point would reveal its name)
            target = inside or text
            if hidden.is_dir() and not hidden.is_symlink():
                args += ["--size", "4096", "--tmpfs", target, "--remount-ro", target]  # an empty, read-only mask
            else:
                args += ["--ro-bind", "/dev/null", target]
        for host, inside in shared:
            args += ["--bind", str(host), inside]
        return [*args, "--remount-ro", "/", "--chdir", chdir]

    @staticmethod
    def _inside_path(host: str, request: SandboxRequest) -> str | None:
        """Where host path `host` appears inside bwrap when it lies in the workspace or a mount."""
        pairs = [(str(request.workspace), WORKSPACE_INSIDE), *((str(m.source), m.inside) for m in request.mounts)]
        for source, inside in pairs:
            if under(host, [source]):
                return inside + host[len(source.rstrip("/")):]
        return None

    def _limit_prefix(self, limits: SandboxLimits) -> list[str]:
        cpu_seconds = math.ceil(limits.timeout_seconds * max(1.0, limits.cpus)) + 1
        return [
            str(self._prlimit),
            f"--as={limits.memory_mb * 1024 * 1024}",
            f"--cpu={cpu_seconds}",
            f"--fsize={limits.max_file_mb * 1024 * 1024}",
            f"--nproc={limits.max_processes}",
            "--core=0",
            "--",
            str(self._taskset),
            "--cpu-list",
            ",".join(str(c) for c in self._cores(limits)),
        ]

    def _execute(
        self,
        request: SandboxRequest,
        env: dict[str, str],
        bwrap_args: list[str] | None,
        workspace_path: str,
        unenforced: list[str],
        identity: RunIdentity | None,
        cgroup: RunCgroup,
    ) -> SandboxResult:
        limits = request.limits
        stdout, stderr = BoundedSink(limits.max_output_bytes), BoundedSink(limits.max_output_bytes)
        started = time.monotonic()
        proc = self._spawn(request, cgroup, identity, env, bwrap_args, stdin=None, stdout=None, pass_fds=())
        watcher = TreeWatcher(proc.pid).start() if bwrap_args is None else None
        readers = [drain_file(proc.stdout, stdout), drain_file(proc.stderr, stderr)]  # type: ignore[arg-type]
        try:
            timed_out = self._wait(proc, started + limits.timeout_seconds, cgroup)
        finally:
            wall = time.monotonic() - started
            if watcher is not None:
                watcher.stop()
            cgroup.kill()
            kill_tree(proc.pid, watcher)  # leftovers of a finished command die with it too
            proc.wait()
            survivors = self._reap(identity, watcher, cgroup)
        out_of_memory = not timed_out and cgroup.oom_kills() > 0
        for reader in readers:
            reader.join(READER_JOIN_SECONDS)
        if any(r.is_alive() for r in readers):
            unenforced.append("an escaped process kept an output pipe open; capture stopped early")
        code = proc.returncode
        if code == LAUNCHER_FAILED and cgroup.folders and "cgroup.procs" in stderr.result().text:
            raise SandboxError(f"local sandbox: the command could not join its cgroup ({', '.join(map(str, cgroup.distinct))}); "
                               "it never started")
        signal_number = -code if code < 0 else None
        killed = timed_out or out_of_memory or signal_number is not None
        return SandboxResult(
            provider=self.name,
            isolation="namespace" if bwrap_args is not None else "process",
            exit_code=None if signal_number is not None else code,
            signal=signal_number,
            stdout=stdout.result(),
            stderr=stderr.result(),
            wall_seconds=round(wall, 6),
            timed_out=timed_out,
            killed=killed,
            kill_reason="timeout" if timed_out else "memory" if out_of_memory else ("signal" if killed else None),
            workspace_path=workspace_path,
            unenforced=tuple(unenforced),
            survivors=survivors,
        )

    def _spawn(self, request: SandboxRequest, cgroup: RunCgroup, identity: RunIdentity | None, env: dict[str, str],
               view: list[str] | None, *, stdin: int | None, stdout: int | None, pass_fds: tuple[int, ...]) -> subprocess.Popen[bytes]:
        """The one place a sandboxed command line is built and started: `cgroup`'s launcher, prlimit
        and taskset, then (with `view`, bwrap's arguments, passed through a pipe) bwrap and setpriv
        to `identity`, then the request's argv; in its own session, stderr a pipe, stdin/stdout the
        given descriptors (None: empty stdin, a stdout pipe), only `pass_fds` inherited."""
        argv = [*cgroup.enter_argv(), *self._limit_prefix(request.limits)]
        read_end = -1
        if view is not None:
            if identity is not None and self._setpriv is None:
                raise SandboxUnavailable("a party with an identity of its own needs a root runner and util-linux setpriv")
            read_end = _args_pipe(view)
            argv += [str(self._bwrap), "--args", str(read_end), "--"]
            if identity is not None:
                argv += setpriv_argv(str(self._setpriv), identity)
        argv += list(request.argv)
        try:
            return subprocess.Popen(
                argv, cwd=request.workspace, env=env, stdin=subprocess.DEVNULL if stdin is None else stdin,
                stdout=subprocess.PIPE if stdout is None else stdout, stderr=subprocess.PIPE, start_new_session=True,
                close_fds=True, pass_fds=(*((read_end,) if read_end >= 0 else ()), *pass_fds),
            )
        except OSError as error:
            raise SandboxError(f"local sandbox could not start {argv[0]}: {error}") from error
        finally:
            if read_end >= 0:
                os.close(read_end)

    @staticmethod
    def _wait(proc: subprocess.Popen[bytes], deadline: float, cgroup: RunCgroup) -> bool:
        """Wait for the command until `deadline`; True when it timed out. Wakes when the command exits
        (`wait_exit`, on a pidfd), not at the next poll. An out-of-memory kill in the run's cgroup ends
        the whole tree at once (cgroup v1 has no group kill of its own)."""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return True
            if wait_exit(proc, min(POLL_SECONDS, left)):
                return False
            if cgroup.oom_kills() > 0:
                cgroup.kill()
                proc.wait()
                return False

    @staticmethod
    def _reap(identity: RunIdentity | None, watcher: TreeWatcher | None, cgroup: RunCgroup) -> int:
        """Kill every process of the run's uid and cgroup; return how many of the run's processes are still alive.

        Under bwrap the PID namespace ends with the command (the kernel kills what is left in it);
        a root runner's run also owns a uid of its own, so a process that escaped is found by uid.
        """
        if identity is not None:
            for pid in identity.survivors():
                try:
                    os.kill(pid, signal.SIGKILL)
                except (ProcessLookupError, PermissionError):
                    pass
        deadline = time.monotonic() + REAP_SECONDS
        while True:
            cgroup.kill()
            alive = (set(identity.survivors()) if identity is not None else set()) | cgroup.pids()
            if watcher is not None:
                alive |= {pid for pid, start in watcher.seen.items() if is_running(pid, start)}
            if not alive or time.monotonic() > deadline:
                return len(alive)
            time.sleep(0.02)


def _args_pipe(args: list[str]) -> int:
    """A pipe holding `args` NUL-separated (bwrap `--args FD`); its read end, which the caller closes.

    Raises:
        SandboxRequestError: the arguments do not fit the pipe (too many mounts or hidden paths).
    """
    payload = b"".join(a.encode() + b"\0" for a in args)
    if len(payload) > MAX_BWRAP_ARGS_BYTES:
        raise SandboxRequestError(f"bwrap arguments are {len(payload)} bytes; too many mounts or hidden paths")
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, payload)
    except OSError:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    return read_end
