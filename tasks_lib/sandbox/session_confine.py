"""Confine a whole agent CLI session with bubblewrap, for agents that cannot use a per-command sandbox.

The `local` provider runs one command with a fresh private HOME and no network. An agent CLI such
as Claude Code needs more across its invocations: its arm's HOME (user-level hooks, the session
files a follow-up prompt resumes from) and its model endpoint on the network. `session_prefix`
gives it exactly that and nothing else of the host:

- new PID/IPC/UTS namespaces, dies with its parent; its private tmpfs folders capped (`tmpfs_bytes`);
- the host seen through the same allow-list as the `local` provider (`hostview`: the toolchain and
  a few `/etc` files read-only, plus name resolution and TLS roots for the network; private
  `/tmp`, `/var/tmp` and `/home`): nothing else exists inside, not another checkout, another
  arm's scratch folder or an artifact root;
- read-only the paths the CLI and its hooks must read (the CLI's install, the Python that runs
  the hooks and its library folders, the memtrial package, the memory store's or socket's folder);
- writable the arm's own folders (workspace, HOME);
- every runner-owned path (the task corpus with its hidden tests and solutions, the checkout and
  its git history, the artifact root) that lies inside one of those behind an empty tmpfs, and a
  readable or writable path inside such a mask bound again on top.

The network is shared: the CLI must reach its model endpoint (the paired runs' other arm differs
only in memory, so both see the same network).

A root runner never hands the session root: given a `RunIdentity`, bwrap keeps only the
capabilities `setpriv` needs and the command starts as that uid, with no groups, no capabilities
and no new privileges (see `tasks_lib.sandbox.identity`; the caller lends it the writable folders).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

from tasks_lib.sandbox.errors import SandboxUnavailable
from tasks_lib.sandbox.hostview import NETWORK_ETC, host_view_args, parent_dirs, under
from tasks_lib.sandbox.identity import SETPRIV_CAPS, RunIdentity, setpriv_argv

SETPRIV_MISSING = "util-linux setpriv not found on PATH; a root runner needs it to run the session as an unprivileged uid"


def bwrap_for_sessions() -> tuple[str | None, str | None]:
    """(path to a working bwrap, None) or (None, why a session cannot be confined here); for a root
    runner this includes dropping to an unprivileged uid with `setpriv`."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bwrap not found on PATH; install bubblewrap (scripts/install_test_deps.sh)"
    probe = [path, "--ro-bind", "/", "/", "--unshare-pid"]
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            return None, SETPRIV_MISSING
        probe += [*_setpriv_caps(), "--", *setpriv_argv(setpriv, RunIdentity(uid=65534, gid=65534))]
    try:
        done = subprocess.run([*probe, "true"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bwrap at {path} could not run: {error}"
    if done.returncode != 0:
        return None, f"bwrap at {path} cannot create namespaces here: {done.stderr.decode(errors='replace').strip()}"
    return path, None


def _setpriv_caps() -> list[str]:
    """bwrap arguments keeping only the capabilities `setpriv` needs to switch uid."""
    return ["--cap-drop", "ALL", *(a for cap in SETPRIV_CAPS for a in ("--cap-add", cap))]


def _existing(paths: Iterable[Path]) -> list[str]:
    """Absolute, existing, de-duplicated paths, parents before children."""
    unique = {str(Path(p).absolute()) for p in paths if os.path.lexists(p)}
    return sorted(unique, key=lambda p: (p.count("/"), p))


def python_paths() -> list[Path]:
    """This interpreter's prefixes and library folders (stdlib, site- and dist-packages on sys.path),
    never a plain folder that sys.path happens to hold (the current directory, a checkout)."""
    libraries = [Path(p) for p in sys.path if p and (p.endswith(".zip") or Path(p).name in ("site-packages", "dist-packages")
                                                    or Path(p).name.startswith("python3") or Path(p).name == "lib-dynload")]
    return [Path(sys.prefix), Path(sys.base_prefix), *libraries]


def session_prefix(bwrap: str, *, workdir: Path, writable: Iterable[Path], readable: Iterable[Path], hidden: Iterable[Path],
                   identity: RunIdentity | None = None, tmpfs_bytes: int | None = None) -> list[str]:
    """The argv prefix that runs a command confined as the module describes, in `workdir`, as
    `identity` when given (a root runner's), each private tmpfs (`/tmp`, `/var/tmp`, `/home`)
    capped at `tmpfs_bytes` when given (its pages count in the memory cgroup the caller puts the
    session in).

    Raises:
        SandboxUnavailable: `identity` is given and setpriv is not on PATH.
    """
    run_as: list[str] = []
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts"]
    if identity is not None:
        setpriv = shutil.which("setpriv")
        if setpriv is None:
            raise SandboxUnavailable(SETPRIV_MISSING)
        args += _setpriv_caps()
        run_as = setpriv_argv(setpriv, identity)
    made: set[str] = set()
    args += host_view_args(None, made, etc_extra=NETWORK_ETC, tmpfs_bytes=tmpfs_bytes)
    binds = [("--ro-bind", p) for p in _existing(readable)] + [("--bind", p) for p in _existing(writable)]
    for flag, path in binds:
        args += [*parent_dirs(path, made), flag, path, path]
    bound = [path for _, path in binds]
    for mask in _existing(hidden):
        if mask in bound or not under(mask, bound):
            continue  # outside every bound path it is not visible; a path asked for by name stays
        args += ["--tmpfs", mask] if Path(mask).is_dir() and not Path(mask).is_symlink() else ["--ro-bind", "/dev/null", mask]
        for flag, path in binds:
            if path != mask and under(path, [mask]):
                args += [flag, path, path]  # readable or writable even inside a hidden path
    return [*args, "--chdir", str(Path(workdir).absolute()), "--", *run_as]
