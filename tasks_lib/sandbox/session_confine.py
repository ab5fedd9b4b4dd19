"""Confine a whole agent CLI session with bubblewrap, for agents that cannot use a per-command sandbox.

The `local` provider runs one command with a fresh private HOME and no network. An agent CLI such
as Claude Code needs more across its invocations: its arm's HOME (user-level hooks, the session
files a follow-up prompt resumes from) and its model endpoint on the network. `session_prefix`
gives it exactly that and nothing else of the host:

- the host root read-only, new PID/IPC/UTS namespaces, dies with its parent;
- `/tmp`, `/var/tmp`, `/home`, `/root` and every runner-owned path (the task corpus with its hidden
  tests and solutions, the checkout and its git history, the artifact root) behind empty tmpfs;
- then read-only the paths the CLI and its hooks must read (the CLI's install, the Python that runs
  the hooks, the memtrial package, the memory store's or socket's folder), even when they lie
  inside a hidden path;
- then writable the arm's own folders (workspace, HOME).

The network is shared: the CLI must reach its model endpoint (the paired runs' other arm differs
only in memory, so both see the same network).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path

MASKED = ("/tmp", "/var/tmp", "/home", "/root")
"""Host folders that are empty inside the session (scratch areas of other arms, users' files)."""


def bwrap_for_sessions() -> tuple[str | None, str | None]:
    """(path to a working bwrap, None) or (None, why a session cannot be confined here)."""
    path = shutil.which("bwrap")
    if path is None:
        return None, "bwrap not found on PATH; install bubblewrap (scripts/install_test_deps.sh)"
    try:
        done = subprocess.run([path, "--ro-bind", "/", "/", "--unshare-pid", "true"], capture_output=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return None, f"bwrap at {path} could not run: {error}"
    if done.returncode != 0:
        return None, f"bwrap at {path} cannot create namespaces here: {done.stderr.decode(errors='replace').strip()}"
    return path, None


def _existing(paths: Iterable[Path]) -> list[str]:
    """Absolute, existing, de-duplicated paths, parents before children."""
    unique = {str(Path(p).absolute()) for p in paths if os.path.lexists(p)}
    return sorted(unique, key=lambda p: (p.count("/"), p))


def session_prefix(bwrap: str, *, workdir: Path, writable: Iterable[Path], readable: Iterable[Path], hidden: Iterable[Path]) -> list[str]:
    """The argv prefix that runs a command confined as the module describes, in `workdir`."""
    args = [bwrap, "--die-with-parent", "--unshare-pid", "--unshare-ipc", "--unshare-uts",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"]
    for path in _existing([Path(p) for p in MASKED]):
        args += ["--tmpfs", path]
    for path in _existing(hidden):
        if any(path == m or path.startswith(m + "/") for m in MASKED):
            continue  # already behind an empty tmpfs
        args += ["--tmpfs", path] if Path(path).is_dir() and not Path(path).is_symlink() else ["--ro-bind", "/dev/null", path]
    for path in _existing(readable):
        args += ["--ro-bind", path, path]
    for path in _existing(writable):
        args += ["--bind", path, path]
    return [*args, "--chdir", str(Path(workdir).absolute()), "--"]
