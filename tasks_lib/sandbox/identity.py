"""An unprivileged identity for one sandboxed command, and the workspace handed over to it.

A runner that is not root already runs every sandboxed command unprivileged (bwrap maps it into
a user namespace; the host sees the runner's own uid). A root runner must not hand root to the
command, not even root without capabilities: each run then gets a uid of its own from a high
range no account uses (`RunIdentity`), the command is switched to it before it starts
(`setpriv_argv`), the workspace is lent to it for the run (`lent_workspace`: every entry is
chowned to the run's uid, and back to the runner's afterwards), and every process still owned by
that uid after the run is found by uid alone (`survivors`), so no escaped daemon goes unseen.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.sandbox.procs import PROC, all_pids, is_running, kill_all

UID_BASE = 0x7E000000
"""First uid of the range run identities are drawn from (far above any account or subuid range)."""
UID_SPAN = 1 << 24
"""How many uids the range holds."""
SETPRIV_CAPS = ("CAP_SETUID", "CAP_SETGID", "CAP_SETPCAP")
"""The only capabilities a root runner's bwrap keeps, so `setpriv` can switch uid and clear the
bounding set; the uid switch itself clears them before the command starts."""


@dataclass(frozen=True)
class RunIdentity:
    """The uid and gid one sandboxed command runs as on the host."""

    uid: int
    gid: int

    def survivors(self) -> list[int]:
        """PIDs of every live process (not a zombie) whose real, effective or saved uid is this identity's."""
        return processes_of({self.uid})

    def reap(self, wait_seconds: float = 2.0) -> int:
        """SIGKILL every process of this identity; return how many are still alive after `wait_seconds`."""
        return reap_uids({self.uid}, wait_seconds)


def processes_of(uids: set[int]) -> list[int]:
    """PIDs of every live process (not a zombie) whose real, effective or saved uid is one of `uids`."""
    return [pid for pid in all_pids() if uids & set(_uids(pid) or ()) and is_running(pid)]


def reap_uids(uids: set[int], wait_seconds: float = 2.0) -> int:
    """SIGKILL every process of `uids` (one scan of /proc per round); how many are still alive after
    `wait_seconds`."""
    deadline = time.monotonic() + wait_seconds
    while True:
        alive = processes_of(uids)
        if not alive or time.monotonic() > deadline:
            return len(alive)
        kill_all(alive)
        time.sleep(0.02)


def run_identity() -> RunIdentity | None:
    """A fresh identity when the runner is root (none of its uids runs a process), else None."""
    identities = run_identities(1)
    return identities[0] if identities else None


def run_identities(count: int) -> tuple[RunIdentity, ...]:
    """`count` fresh identities, all different, when the runner is root (none of their uids runs a
    process: one scan of /proc for all of them), else ().

    Raises:
        SandboxError: no free uid was found (processes of earlier runs survive in the whole range).
    """
    if os.geteuid() != 0:
        return ()
    busy = uids_in_use()
    chosen: list[RunIdentity] = []
    for _ in range(16 * count):
        uid = UID_BASE + secrets.randbelow(UID_SPAN)
        if uid not in busy:
            busy.add(uid)
            chosen.append(RunIdentity(uid=uid, gid=uid))
            if len(chosen) == count:
                return tuple(chosen)
    raise SandboxError(f"no free uid found in {UID_BASE}..{UID_BASE + UID_SPAN}; processes of earlier runs survive")


def uids_in_use() -> set[int]:
    """Every real, effective or saved uid of a live process (not a zombie)."""
    busy: set[int] = set()
    for pid in all_pids():
        uids = _uids(pid)
        if uids and is_running(pid):
            busy.update(uids)
    return busy


def setpriv_argv(setpriv: str, identity: RunIdentity) -> list[str]:
    """The argv prefix that drops root to `identity`: no groups, no capabilities, no new privileges."""
    return [setpriv, f"--reuid={identity.uid}", f"--regid={identity.gid}", "--clear-groups", "--no-new-privs",
            "--inh-caps=-all", "--bounding-set=-all", "--"]


def _uids(pid: int) -> tuple[int, ...] | None:
    try:
        for line in (PROC / str(pid) / "status").read_text().splitlines():
            if line.startswith("Uid:"):
                return tuple(int(v) for v in line.split()[1:])
    except (FileNotFoundError, ProcessLookupError, PermissionError, ValueError):
        return None
    return None


DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How `_chown_tree` opens a folder: never through a symlink, never inherited."""


def _chown_tree(root: Path, uid: int, gid: int) -> None:
    """lchown `root` and every entry under it, never following a symlink.

    The walk is relative to folder descriptors (`dir_fd`), never by host path: a tree the command
    made deeper than PATH_MAX (25 folders with 200-byte names) is handed back like any other.
    One descriptor is held per level being walked, so only a tree deeper than the process's open
    file limit fails (OSError), and that fails its own attempt (`tasks_lib.arm.steps`).
    """
    os.chown(root, uid, gid, follow_symlinks=False)
    stack = [os.open(root, DIR_FLAGS)]
    pending: list[list[str]] = []
    try:
        while stack:
            if len(pending) < len(stack):
                with os.scandir(stack[-1]) as entries:
                    names = [(e.name, e.is_dir(follow_symlinks=False)) for e in entries]
                for name, _ in names:
                    os.chown(name, uid, gid, dir_fd=stack[-1], follow_symlinks=False)
                pending.append([name for name, is_dir in names if is_dir])
            if pending[-1]:
                stack.append(os.open(pending[-1].pop(), DIR_FLAGS, dir_fd=stack[-1]))
            else:
                pending.pop()
                os.close(stack.pop())
    finally:
        for fd in stack:
            os.close(fd)


@contextmanager
def lent_workspace(workspace: Path, identity: RunIdentity | None) -> Iterator[None]:
    """Lend `workspace` to `identity` for the run (nothing to do without one); always take it back.

    Only the workspace changes hands: a mount stays the runner's, and hard links cannot reach it
    from outside (a bind mount is its own mount, and link() never crosses mounts).
    """
    if identity is None:
        yield
        return
    owner = os.stat(workspace, follow_symlinks=False)
    try:
        _chown_tree(workspace, identity.uid, identity.gid)
        yield
    finally:
        _chown_tree(workspace, owner.st_uid, owner.st_gid)
