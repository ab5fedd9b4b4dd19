"""Limits on a sandboxed command's whole process tree: one cgroup per run, under a `memtrial` cgroup.

RLIMIT_AS and RLIMIT_NPROC bind one process (or one uid); an attempt that forks three 1 GiB
processes under a 2 GiB limit holds 3 GiB. A cgroup binds the tree: every process the command
starts, and every tmpfs page it writes, is charged to the run's cgroup.

Where the cgroup lives: under the runner's own cgroup (read from `/proc/self/cgroup`), in a child
named `memtrial`, one grandchild per run (`run-<random hex>`). Staying under the runner's own
cgroup keeps every limit the runner itself is under (a container's, a systemd unit's) in force,
and is what systemd delegation gives a non-root runner (`systemd-run --user --scope -p
Delegate=yes memtrial run ...`).

- **cgroup v2** (`/sys/fs/cgroup` or a hybrid's `unified` mount, with the controller listed in its
  `cgroup.controllers`): `memory.max`, `memory.swap.max=0`, `memory.oom.group=1`, `pids.max` and
  `cpu.max` in one folder. The controllers are switched on in the `subtree_control` of the
  runner's cgroup and of `memtrial`; the kernel refuses that in a cgroup that holds processes
  (other than the root), and that refusal is reported, not worked around.
- **cgroup v1** (one mount per controller, as hybrid hosts have): `memory.limit_in_bytes` and
  `memory.memsw.limit_in_bytes` (the same value: no swap), `pids.max`, `cpu.cfs_quota_us`, each in
  its controller's hierarchy. v1 has no group OOM kill: the sandbox watches `oom_kill` and kills
  the whole cgroup itself.

Each controller is taken from v2 when v2 offers it, else from v1, else it is not enforced and the
reason goes into the run's `unenforced` list (no cgroup mount, a controller bound nowhere, a
folder the runner may not write).

How the command joins its cgroup before anything of it runs: the runner starts a small launcher,
`/bin/sh -c 'echo $$ > .../cgroup.procs; ...; exec "$@"'`, which writes its own PID into the
run's cgroup(s) and then execs the rest of the argv (prlimit, taskset, bwrap, the command), so
the command's first instruction already runs inside the cgroup and every child inherits it. A
`preexec_fn` would do the same, but is unsafe in a threaded runner (Prefect's). The cgroup folders
belong to root (or the delegated runner) and are not mounted in the sandbox, so the command cannot
move itself out.

What is tested where. The machine the tests were written on is a v1/v2 hybrid whose memory, pids
and cpu controllers are bound to v1 (the v2 mount offers only hugetlb; a controller cannot be in two
hierarchies), so only the v1 path runs against the kernel (tests/test_sandbox_cgroups.py). The v2
path is tested against a plain folder standing in for a cgroup2 mount: which files are written with
which values, the subtree_control switches, the launcher's join, the reading of `memory.events`.
Untested against a kernel: that v2 accepts those writes (`memory.swap.max` without swap accounting,
`memory.oom.group`), the EBUSY refusal in a cgroup holding processes, the group OOM kill and
`cgroup.kill`, `memory.peak`, and a non-root runner's delegated cgroup (systemd `Delegate=yes`).
"""

from __future__ import annotations

import errno
import secrets
import shlex
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.sandbox.procs import kill_all

Controller = Literal["memory", "pids", "cpu"]
CONTROLLERS: tuple[Controller, ...] = ("memory", "pids", "cpu")
"""The controllers a run's cgroup uses, in the order they are set up."""

PARENT = "memtrial"
"""The cgroup under the runner's own that holds one child per sandboxed run."""
CPU_PERIOD_US = 100_000
"""The CPU quota period (the kernel's default)."""
REMOVE_SECONDS = 2.0
"""How long a killed run's cgroup gets to empty before it is left behind (and named)."""
LAUNCHER_FAILED = 125
"""Exit status of the launcher when it could not join the cgroup (the command never started)."""

MOUNTINFO = Path("/proc/self/mountinfo")
SELF_CGROUP = Path("/proc/self/cgroup")


class CgroupError(SandboxError):
    """A run's cgroup could not be made, limited or removed."""


@dataclass(frozen=True)
class Hierarchy:
    """Where one controller is: its version, the folder of the runner's cgroup in it."""

    version: Literal[1, 2]
    own: Path
    """The runner's own cgroup folder in this hierarchy."""


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, filesystem type, super options) of every cgroup mount."""
    found = []
    try:
        lines = MOUNTINFO.read_text().splitlines()
    except OSError:
        return []
    for line in lines:
        left, _, right = line.partition(" - ")
        fields, tail = left.split(), right.split()
        if len(fields) >= 5 and len(tail) >= 3 and tail[0] in ("cgroup", "cgroup2"):
            found.append((fields[4].replace("\\040", " "), tail[0], set(tail[2].split(","))))
    return found


def _own_paths() -> dict[str, str]:
    """Controller (or '' for v2) -> the runner's cgroup path in that hierarchy."""
    paths: dict[str, str] = {}
    try:
        lines = SELF_CGROUP.read_text().splitlines()
    except OSError:
        return paths
    for line in lines:
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        for name in parts[1].split(",") if parts[1] else [""]:
            paths[name] = parts[2]
    return paths


def locate() -> tuple[dict[Controller, Hierarchy], dict[Controller, str]]:
    """(controller -> where it is, controller -> why it cannot be used) for this runner."""
    own = _own_paths()
    found: dict[Controller, Hierarchy] = {}
    missing: dict[Controller, str] = {}
    mounts = _mounts()
    v2 = [point for point, kind, _ in mounts if kind == "cgroup2"]
    for controller in CONTROLLERS:
        for point in v2:
            try:
                offered = Path(point, "cgroup.controllers").read_text().split()
            except OSError:
                continue
            if controller in offered and "" in own:
                found[controller] = Hierarchy(2, Path(point + own[""]))
                break
        else:
            for point, kind, options in mounts:
                if kind == "cgroup" and controller in options and controller in own:
                    found[controller] = Hierarchy(1, Path(point + own[controller]))
                    break
            else:
                missing[controller] = (f"no cgroup hierarchy offers the {controller} controller here "
                                       "(mount cgroup2 with it, or a cgroup v1 hierarchy)" if mounts else
                                       "no cgroup filesystem is mounted (/sys/fs/cgroup)")
    return found, missing


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


def _enable_v2(own: Path, controllers: Iterable[Controller]) -> None:
    """Switch `controllers` on for the children of `own` and of `own/memtrial` (made if missing)."""
    wanted = " ".join(f"+{c}" for c in controllers)
    parent = own / PARENT
    for folder in (own, parent):
        if folder == parent:
            parent.mkdir(exist_ok=True)
        enabled = set((folder / "cgroup.subtree_control").read_text().split())
        if not {w[1:] for w in wanted.split()} <= enabled:
            try:
                _write(folder / "cgroup.subtree_control", wanted)
            except OSError as error:
                if error.errno == errno.EBUSY:
                    raise CgroupError(
                        f"cgroup {folder} holds processes, so its children cannot get controllers; run memtrial in a "
                        "cgroup of its own (systemd-run --scope -p Delegate=yes ...)") from None
                raise


@dataclass
class RunCgroup:
    """The cgroup folder(s) of one sandboxed run, limited; `enter_argv` joins them before exec."""

    folders: dict[Controller, Path]
    """Controller -> the run's folder in that controller's hierarchy (one folder for all of v2)."""
    versions: dict[Controller, int]
    """Controller -> cgroup version it is enforced through."""
    unenforced: list[str] = field(default_factory=list)
    """Limits of the run that no cgroup enforces here, each with the reason."""
    missing: dict[Controller, str] = field(default_factory=dict)
    """Controller -> why no cgroup of the run holds it here (the bare reason, for a caller that words
    its own `unenforced` line)."""

    @property
    def distinct(self) -> list[Path]:
        """Each folder once, in controller order."""
        return list(dict.fromkeys(self.folders.values()))

    def enter_argv(self) -> list[str]:
        """The launcher prefix: join every folder of the run, then exec the rest of the argv."""
        if not self.folders:
            return []
        joins = "; ".join(f"echo $$ > {shlex.quote(str(f / 'cgroup.procs'))} || exit {LAUNCHER_FAILED}"
                          for f in self.distinct)
        return ["/bin/sh", "-c", f'{joins}; exec "$@"', "memtrial-cgroup"]

    def pids(self) -> set[int]:
        """Every process in the run's cgroup(s)."""
        found: set[int] = set()
        for folder in self.distinct:
            try:
                found |= {int(p) for p in (folder / "cgroup.procs").read_text().split()}
            except (OSError, ValueError):
                continue
        return found

    def oom_kills(self) -> int:
        """How many processes the kernel killed for the run's memory limit (0 without a memory cgroup)."""
        folder = self.folders.get("memory")
        if folder is None:
            return 0
        name = "memory.events" if self.versions["memory"] == 2 else "memory.oom_control"
        try:
            for line in (folder / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            return 0
        return 0

    def peak_bytes(self) -> int | None:
        """The most memory the run's cgroup held (None when the kernel does not say)."""
        folder = self.folders.get("memory")
        if folder is None:
            return None
        name = "memory.peak" if self.versions["memory"] == 2 else "memory.max_usage_in_bytes"
        try:
            return int((folder / name).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def kill(self) -> None:
        """SIGKILL every process in the run's cgroup(s) (`cgroup.kill` where the kernel has it)."""
        for folder in self.distinct:
            if (folder / "cgroup.kill").exists():
                try:
                    _write(folder / "cgroup.kill", "1")
                    continue
                except OSError:
                    pass
        for _ in range(50):  # v1: a process may fork while we kill; repeat until none is left
            alive = self.pids()
            if not alive:
                return
            kill_all(alive)
            time.sleep(0.01)

    def remove(self) -> str | None:
        """Kill what is left and remove the run's folders; a note naming a folder that would not go, else None."""
        self.kill()
        deadline = time.monotonic() + REMOVE_SECONDS
        left = self.distinct
        while left:
            still = []
            for folder in left:
                try:
                    folder.rmdir()
                except FileNotFoundError:
                    pass
                except OSError:
                    still.append(folder)
            left = still
            if not left or time.monotonic() > deadline:
                break
            self.kill()
            time.sleep(0.02)
        return f"cgroup {', '.join(map(str, left))} could not be removed (processes left in it)" if left else None


def _limit_values(version: int, controller: Controller, memory_bytes: int, processes: int, cpus: float) -> dict[str, str]:
    """File -> value that sets `controller`'s limit in a folder of cgroup `version`."""
    quota = max(1000, round(cpus * CPU_PERIOD_US))
    if version == 2:
        return {"memory": {"memory.max": str(memory_bytes), "memory.swap.max": "0", "memory.oom.group": "1"},
                "pids": {"pids.max": str(processes)},
                "cpu": {"cpu.max": f"{quota} {CPU_PERIOD_US}"}}[controller]
    return {"memory": {"memory.limit_in_bytes": str(memory_bytes), "memory.memsw.limit_in_bytes": str(memory_bytes)},
            "pids": {"pids.max": str(processes)},
            "cpu": {"cpu.cfs_period_us": str(CPU_PERIOD_US), "cpu.cfs_quota_us": str(quota)}}[controller]


OPTIONAL_FILES = frozenset({"memory.swap.max", "memory.memsw.limit_in_bytes", "memory.oom.group"})
"""Files a kernel may lack (no swap accounting, an older kernel): their absence is noted, not fatal."""


def make_run_cgroup(memory_bytes: int, processes: int, cpus: float) -> RunCgroup:
    """A fresh cgroup for one run with the three limits set, as far as this machine allows; every
    limit it could not set is in `unenforced` with the reason. Never raises for a missing or
    read-only cgroup: that is an unenforced limit, not an error."""
    found, missing = locate()
    run = RunCgroup(folders={}, versions={})
    name = f"run-{secrets.token_hex(8)}"
    try:
        v2 = [c for c in CONTROLLERS if c in found and found[c].version == 2]
        if v2:
            _enable_v2(found[v2[0]].own, v2)
    except (OSError, CgroupError) as error:
        for controller in v2:
            missing[controller] = f"cgroup v2 at {found[controller].own}: {error}"
            del found[controller]
    for controller in CONTROLLERS:
        if controller not in found:
            continue
        where = found[controller]
        folder = where.own / PARENT / name
        try:
            (where.own / PARENT).mkdir(exist_ok=True)
            folder.mkdir(exist_ok=True)
            for file, value in _limit_values(where.version, controller, memory_bytes, processes, cpus).items():
                try:
                    _write(folder / file, value)
                except FileNotFoundError:
                    if file not in OPTIONAL_FILES:
                        raise
                    run.unenforced.append(f"{controller}: {file} is missing in {folder} (the kernel lacks it)")
        except OSError as error:
            missing[controller] = f"cgroup v{where.version} folder {folder} could not be made or limited: {error.strerror or error}"
            if folder.is_dir() and folder not in run.folders.values():
                try:
                    folder.rmdir()
                except OSError:
                    pass
            continue
        run.folders[controller] = folder
        run.versions[controller] = where.version
    what = {"memory": "memory limit of the whole process tree (only RLIMIT_AS per process holds)",
            "pids": "process limit of the whole process tree (only RLIMIT_NPROC per uid holds)",
            "cpu": "CPU quota (only the pinning to whole cores holds)"}
    run.unenforced.extend(f"{what[c]}: {reason}" for c, reason in missing.items())
    run.missing = dict(missing)
    return run
