"""A confined party: one sandboxed process the runner starts and keeps a handle on.

`LocalSandbox.run` runs one command to completion. A check made of several processes that run at
the same time and talk to each other (the judged check: a jail, a judge and a verifier) starts
each of them as a `Party` with `LocalSandbox.start`, which builds the same command line as `run`
(the cgroup launcher, prlimit and taskset, bwrap with the provider's view of the request, setpriv
to the party's uid), plus what only parties need: folders bound read-write besides the workspace,
a working directory of their own, descriptors for stdin and stdout, and descriptors to inherit.

The caller owns what the parties share: the cgroup (one for all of them, or one each), their
identities (`tasks_lib.sandbox.identity.run_identity`), the workspace lent to a party's uid, and
the final reap by uid. The handle (`PartyProcess`) waits, kills and exposes the party's pipes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tasks_lib.sandbox.base import SandboxRequest
from tasks_lib.sandbox.identity import RunIdentity

WORKSPACE_INSIDE = "/workspace"
"""Where the workspace appears under bwrap."""


@dataclass(frozen=True)
class Party:
    """What one party is: its command and view, the uid it runs as, what it shares with the others."""

    request: SandboxRequest
    """The command, its workspace (bound read-write at `WORKSPACE_INSIDE`), environment (the provider
    adds HOME and TMPDIR), read-only mounts, hidden paths and limits."""
    identity: RunIdentity | None = None
    """The host uid it runs as (a root runner's, from `run_identity`); None: the runner's own uid,
    mapped into a user namespace."""
    chdir: str = WORKSPACE_INSIDE
    """Its working directory inside the sandbox."""
    shared: tuple[tuple[Path, str], ...] = ()
    """(host folder, path inside) pairs bound read-write besides the workspace: a folder parties share."""
    stdin: int | None = None
    """A descriptor its stdin reads from; None: empty (`/dev/null`)."""
    stdout: int | None = None
    """A descriptor its stdout writes to; None: a pipe, read through `PartyProcess.stdout`."""
    pass_fds: tuple[int, ...] = ()
    """Further descriptors it inherits under the same numbers (a channel end); nothing else is inherited."""


class PartyProcess:
    """A started party: wait for it, kill it, read its pipes. Its stderr is always a pipe."""

    def __init__(self, popen: subprocess.Popen[bytes], party: Party) -> None:
        self.popen = popen
        """The launcher process (the cgroup launcher, then prlimit, taskset and bwrap by exec)."""
        self.party = party
        """What was started."""

    @property
    def pid(self) -> int:
        """The launcher's PID, which is also its process group and session id."""
        return self.popen.pid

    @property
    def returncode(self) -> int | None:
        """Its exit status once waited for (a signal as its negative), else None."""
        return self.popen.returncode

    @property
    def stdout(self) -> IO[bytes] | None:
        """Its stdout pipe (None when `Party.stdout` named a descriptor)."""
        return self.popen.stdout

    @property
    def stderr(self) -> IO[bytes]:
        """Its stderr pipe."""
        assert self.popen.stderr is not None
        return self.popen.stderr

    def wait(self, deadline: float) -> bool:
        """Wait until `deadline` (`time.monotonic()` seconds); True when it ended by then, False when not."""
        try:
            self.popen.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            return False
        return True

    def kill(self) -> None:
        """SIGKILL its process group (bwrap, and with bwrap its PID namespace) and reap it. Never raises."""
        try:
            os.killpg(self.popen.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.popen.wait()
