"""A provisioner's confinement: one bwrap sandbox per attempt that every verb and every server it starts runs in.

A provisioner is a third party's code, so it gets no more of the host than the agent does. When an
attempt first calls its provisioner, memtrial starts one sandbox for it (`ProvisionerJail.start`):
bwrap with new mount, PID, IPC, UTS and (unless the config says `network: true`) network
namespaces and no capabilities, whose first process only waits on a pipe from the runner. Each verb
then enters those namespaces (`nsenter`) and drops to the provisioner's uid (`setpriv`: no groups,
no capabilities, `no_new_privs`) before `<argv> <verb>` runs, so a server a verb leaves running
stays in the sandbox's PID namespace. `close` ends the waiting process and then SIGKILLs the
namespace's first process (the inner bwrap, held by a pidfd since `start`, so never a reused PID) and the
outer bwrap, and the kernel kills everything left in that namespace: a server whose `destroy` never ran (an interrupted attempt, a
killed runner: the pipe closes with the runner) is reaped with it, never reparented to the host's init.
A verb that stops the waiting shell (it runs as the provisioner's uid) only delays that by CLOSE_SECONDS.

What the sandbox sees (everything at its host path, so the protocol's absolute paths hold):

- read-only: the allow-listed toolchain of `hostview` (`/usr`, the top-level library folders,
  a few `/etc` files), the interpreter (`sys.prefix`, `sys.base_prefix`), the folders of the
  installed packages (`sys.path`, but never a checkout's root: only memtrial's own packages from
  it, not its corpus nor `.git`), the provisioner's executable, the npm package of the bundled
  mcp-memory server and the config's `read_paths`;
- read-write: its state folder (MEMTRIAL_PROVISIONER_STATE: the config's, else a fresh folder of
  the attempt), the fixture root it is handed, a fresh serving folder that is its TMPDIR (where a
  server's socket goes; the runner's delivery witness connects to it there) and the config's
  `write_paths`;
- private: `/tmp`, `/var/tmp`, `/dev/shm` and an empty HOME.

Nothing else exists inside: not the runner's HOME, its artifact root (the run secret, other runs),
the corpus's hidden tests, other attempts' folders. A root runner runs the provisioner as a uid of
its own, derived from its state folder (attempts sharing a state share the uid), and hands it the
state, fixture and serving folders and the `write_paths` (chowned to that uid, and left so); a runner
that is not root is mapped into a user namespace (that path is not exercised by the tests, which run as root).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from tasks_lib.errors import MemtrialError
from tasks_lib.sandbox.base import SANDBOX_HOME
from tasks_lib.sandbox.hostview import host_view_args, is_visible, parent_dirs, under
from tasks_lib.sandbox.identity import SETPRIV_CAPS, UID_BASE, UID_SPAN, RunIdentity, setpriv_argv
from tasks_lib.sandbox.local import bwrap_problem
from tasks_lib.settings import PROVISIONER_STATE

STATE_ENV = PROVISIONER_STATE.name
PROVISIONER_UID_BASE = UID_BASE - UID_SPAN
"""First uid of the range provisioner identities come from (below the agents' run identities)."""
START_SECONDS = 20.0
"""How long the sandbox may take to report its first process."""
CLOSE_SECONDS = 2.0
"""How long `close` lets the waiting shell end the sandbox itself before it kills the outer bwrap."""
READY = "memtrial-provisioner-sandbox-ready"
"""What the sandbox's waiting process prints once the view is built."""
OWN_PACKAGES = ("tasks_lib", "flows")
"""memtrial's packages: from a checkout on `sys.path`, only these folders are shown."""


class ProvisionerConfinementError(MemtrialError):
    """The provisioner's sandbox cannot be built or started here (no bwrap, a bad grant)."""


def provisioner_identity(state: Path) -> RunIdentity | None:
    """The uid a root runner runs the provisioner of `state` as (None for a runner that is not root)."""
    if os.geteuid() != 0:
        return None
    digest = int.from_bytes(hashlib.sha256(os.fsencode(str(state))).digest()[:8], "big")
    uid = PROVISIONER_UID_BASE + digest % UID_SPAN
    return RunIdentity(uid=uid, gid=uid)


def hand_over(root: Path, identity: RunIdentity | None) -> None:
    """lchown `root` and everything under it to `identity` (nothing to do without one); never follows a symlink."""
    if identity is None:
        return
    os.lchown(root, identity.uid, identity.gid)
    for folder, dirs, files in os.walk(root, followlinks=False):
        for name in (*dirs, *files):
            os.lchown(os.path.join(folder, name), identity.uid, identity.gid)


def package_roots(argv: Sequence[str]) -> list[str]:
    """Host folders the provisioner reads its interpreter, packages and own code from (its executable,
    and any file its argv names by absolute path, such as the script an interpreter runs).

    A `sys.path` entry that holds memtrial's own packages (a checkout, where the corpus and `.git`
    also live) contributes only those package folders."""
    own = {name: str(Path(sys.modules[name].__path__[0]).resolve()) for name in OWN_PACKAGES if _imported(name)}
    checkout_roots = {str(Path(path).parent) for path in own.values()}
    roots = {sys.prefix, sys.base_prefix, sys.exec_prefix, *own.values()}
    for entry in sys.path:
        if entry and os.path.isdir(entry) and not under(str(Path(entry).resolve()), checkout_roots):
            roots.add(entry)
    executable = shutil.which(argv[0]) if argv else None
    if executable is not None:
        roots.update({executable, str(Path(executable).resolve())})
    roots.update(arg for arg in argv[1:] if os.path.isabs(arg) and os.path.isfile(arg))  # a script the interpreter runs
    roots.update(bundled_servers())
    return sorted(roots)


def bundled_servers() -> list[str]:
    """Folders of the third-party servers memtrial runs for a bundled memory system that live outside the
    installed packages: the mcp-memory npm package (`node_modules`, in the checkout's `.memtrial/npm` or at
    MEMTRIAL_MCP_MEMORY_SERVER)."""
    from tasks_lib.memory.adapters.mcp_memory import server_script

    script = server_script()
    if not script.is_file():
        return []
    modules = next((parent for parent in script.parents if parent.name == "node_modules"), script.parent)
    return [str(modules)]


def _imported(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def _outermost(paths: Iterable[str]) -> list[str]:
    """`paths` without those below another of them (each folder is bound once)."""
    chosen: list[str] = []
    for path in sorted(set(paths), key=len):
        if not under(path, chosen):
            chosen.append(path)
    return sorted(chosen)


def end_namespace(pidfd: int | None) -> None:
    """SIGKILL the sandbox's first process through its pidfd (the kernel then kills its whole PID namespace) and close it."""
    if pidfd is None:
        return
    try:
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended already (the waiting shell ran its kill)
    finally:
        os.close(pidfd)


class ProvisionerJail:
    """One attempt's provisioner sandbox: `start` it, run verbs through `prefix` and `env`, always `close` it."""

    def __init__(self, argv: Sequence[str], fixture_root: Path, state: Path, *, read_paths: Sequence[str] = (),
                 write_paths: Sequence[str] = (), network: bool = False) -> None:
        self.argv = tuple(argv)
        self.fixture_root = fixture_root.absolute()
        self.state = state.absolute()
        self.read_paths = tuple(read_paths)
        self.write_paths = tuple(write_paths)
        self.network = network
        self.identity = provisioner_identity(self.state)
        self.serve_dir: Path | None = None
        self._holder: subprocess.Popen[bytes] | None = None
        self._target: int | None = None
        self._pidfd: int | None = None

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        """True between `start` and `close`."""
        return self._target is not None

    def start(self) -> None:
        """Create the folders, hand them to the provisioner's uid and start the sandbox's waiting process.

        Raises ProvisionerConfinementError when bwrap cannot run here, a granted path is missing, or
        the sandbox does not start.
        """
        bwrap = shutil.which("bwrap")
        problem = bwrap_problem(bwrap)
        nsenter = shutil.which("nsenter")
        if problem is None and nsenter is None:
            problem = "util-linux nsenter not found on PATH"
        if problem is not None:
            raise ProvisionerConfinementError(f"provisioner {' '.join(self.argv)}: cannot be confined here ({problem}); "
                                              "install bubblewrap and util-linux, or set provisioner.unconfined: true")
        for field, paths in (("read_paths", self.read_paths), ("write_paths", self.write_paths)):
            missing = [p for p in paths if not os.path.exists(p)]
            if missing:
                raise ProvisionerConfinementError(f"provisioner.{field}: {', '.join(missing)} does not exist; "
                                                  "create it or remove it from the config")
        self.state.mkdir(parents=True, exist_ok=True)
        self.fixture_root.mkdir(parents=True, exist_ok=True)
        self.serve_dir = Path(tempfile.mkdtemp(prefix="memtrial-prov-"))
        for folder in (self.state, self.fixture_root, self.serve_dir, *map(Path, self.write_paths)):
            hand_over(folder, self.identity)
        self._spawn(str(bwrap))

    def _spawn(self, bwrap: str) -> None:
        info_read, info_write = os.pipe()
        # says the view is built, waits for the runner's pipe to close, then kills every process of the
        # provisioner's uid in the sandbox (kill -1 reaches only its own PID namespace), so bwrap's init,
        # which waits for all its children, exits and the namespace ends
        wait = ["/bin/sh", "-c", f"echo {READY} && cat; kill -9 -1"]
        holder = wait if self.identity is None else [*setpriv_argv(str(shutil.which("setpriv")), self.identity), *wait]
        try:
            self._holder = subprocess.Popen(
                [bwrap, "--info-fd", str(info_write), *self.bwrap_args(), "--", *holder],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, pass_fds=(info_write,),
                env={"PATH": os.environ.get("PATH", "/usr/bin:/bin")})
        finally:
            os.close(info_write)
        with os.fdopen(info_read, "rb") as info:
            raw = info.read()
        assert self._holder.stdout is not None and self._holder.stderr is not None
        ready = self._holder.stdout.readline().strip() == READY.encode()
        try:
            self._target = int(json.loads(raw)["child-pid"]) if ready else None
        except (ValueError, KeyError, TypeError):
            self._target = None
        if self._target is not None:
            try:
                self._pidfd = os.pidfd_open(self._target)
            except OSError:
                self._target = None
        if self._target is None:
            self._holder.kill()
            stderr = self._holder.stderr.read().decode(errors="replace").strip()
            self.close()
            raise ProvisionerConfinementError(f"provisioner {' '.join(self.argv)}: its sandbox did not start "
                                              f"({stderr or 'bwrap reported nothing'})")

    def close(self) -> None:
        """End the sandbox: everything still running in it (a server destroy missed) is killed; remove the serving folder."""
        holder, self._holder, self._target = self._holder, None, None
        pidfd, self._pidfd = self._pidfd, None
        if holder is not None:
            if holder.stdin is not None:
                holder.stdin.close()  # the waiting process ends, and with it the PID namespace
            try:
                holder.wait(timeout=CLOSE_SECONDS)
            except subprocess.TimeoutExpired:
                pass  # the shell was stopped or killed by a verb (it runs as the provisioner's uid)
            end_namespace(pidfd)
            holder.kill()
            holder.wait()
            for stream in (holder.stdout, holder.stderr):
                if stream is not None:
                    stream.close()
        elif pidfd is not None:
            os.close(pidfd)
        if self.serve_dir is not None:
            shutil.rmtree(self.serve_dir, ignore_errors=True)
            self.serve_dir = None

    # ------------------------------------------------------------------ what the sandbox is

    def hidden(self) -> list[str]:
        """Host paths never shown, even below a granted path: the runner's HOME."""
        return [os.path.expanduser("~")]

    def bwrap_args(self) -> list[str]:
        """The sandbox: the allow-listed view, the read-only package roots and grants, the read-write folders."""
        args = ["--new-session", "--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try", "--cap-drop", "ALL"]
        if self.identity is not None:
            args += [a for cap in SETPRIV_CAPS for a in ("--cap-add", cap)]
        else:
            args.append("--unshare-user")
        if not self.network:
            args.append("--unshare-net")
        made: set[str] = set()
        args += host_view_args(SANDBOX_HOME, made, etc_extra=() if not self.network else ("resolv.conf", "ssl", "ca-certificates"))
        args += ["--perms", "01777", "--tmpfs", "/dev/shm"]  # POSIX semaphores (multiprocessing locks: txtai's thread pool)
        writable = [str(self.state), str(self.fixture_root), str(self.serve_dir), *self.write_paths]
        readable = [p for p in _outermost([*package_roots(self.argv), *self.read_paths]) if not is_visible(p)]
        for path in readable:
            args += [*parent_dirs(path, made), "--ro-bind", path, path]
        for path in _outermost(writable):
            args += [*parent_dirs(path, made), "--bind", path, path]
        for hidden in self.hidden():
            if any(under(hidden, [p]) and hidden != p for p in [*readable, *writable]):
                args += ["--size", "4096", "--tmpfs", hidden, "--remount-ro", hidden]
        return [*args, "--remount-ro", "/", "--chdir", str(self.state)]

    def prefix(self) -> list[str]:
        """The argv prefix that runs a command inside the started sandbox as the provisioner's uid."""
        if self._target is None:
            raise ProvisionerConfinementError(f"provisioner {' '.join(self.argv)}: its sandbox is not running")
        enter = [str(shutil.which("nsenter")), f"--target={self._target}", "--mount", "--pid", "--ipc", "--uts",
                 *(["--net"] if not self.network else []), "--root", "--wd"]
        if self.identity is None:
            return [*enter, "--user", "--preserve-credentials", "--"]
        return [*enter, "--", *setpriv_argv(str(shutil.which("setpriv")), self.identity)]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """`base` with the sandbox's own HOME, TMPDIR (the serving folder) and state folder."""
        return {**base, "HOME": SANDBOX_HOME, "TMPDIR": str(self.serve_dir), STATE_ENV: str(self.state)}
