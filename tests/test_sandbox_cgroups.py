"""The local sandbox's cgroup per run (`tasks_lib.sandbox.cgroups`): limits that hold for the whole
process tree, folders that go away after the run, and limits a machine cannot enforce named in the
result instead of assumed."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from tasks_lib.sandbox import cgroups
from tasks_lib.sandbox.base import SandboxLimits, SandboxRequest
from tasks_lib.sandbox.cgroups import make_run_cgroup
from tasks_lib.sandbox.local import LocalSandbox


def _cgroups_here() -> bool:
    probe = make_run_cgroup(64 << 20, 16, 1.0)
    try:
        return {"memory", "pids", "cpu"} <= set(probe.folders)
    finally:
        probe.remove()


needs_cgroups = pytest.mark.skipif(not _cgroups_here(), reason="no writable cgroup with memory, pids and cpu controllers here")
TWO_CHILDREN = """
import os, time
for _ in range(2):
    if os.fork() == 0:
        block = bytearray(b"\\x01") * (160 << 20)
        time.sleep(30)
        os._exit(0)
time.sleep(30)
print("both held")
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    folder.mkdir()
    folder.chmod(0o755)
    return folder


@needs_cgroups
def test_two_processes_each_under_the_limit_but_together_over_it_are_killed_for_memory(workspace: Path) -> None:
    """Regression: RLIMIT_AS bound each process alone, so a tree of processes each under the limit held more than it."""
    limits = SandboxLimits(memory_mb=256, timeout_seconds=25)
    result = LocalSandbox().run(SandboxRequest(argv=("python3", "-c", TWO_CHILDREN), workspace=workspace, limits=limits))
    assert result.killed and result.kill_reason == "memory" and not result.timed_out, result
    assert "both held" not in result.stdout.text
    assert not any("RLIMIT_AS" in note for note in result.unenforced)


@needs_cgroups
def test_a_run_leaves_no_cgroup_folder_behind() -> None:
    """A run's cgroup folders are removed with it, even with a process still inside when it ends."""
    run = make_run_cgroup(64 << 20, 16, 0.5)
    # the launcher the sandbox uses (never os.fork in a threaded test process: a forked child can
    # deadlock on a lock another thread held, never join, and hang the wait below: seen in CI)
    proc = subprocess.Popen([*run.enter_argv(), "sleep", "30"])
    try:
        deadline = time.monotonic() + 10
        while proc.pid not in run.pids() and time.monotonic() < deadline:
            time.sleep(0.01)
        assert proc.pid in run.pids(), "the command joined its cgroup"
        assert run.remove() is None
        assert not any(folder.exists() for folder in run.distinct)
        assert proc.wait(timeout=10) == -9, "removing the cgroup killed what was inside"
    finally:
        proc.kill()
        proc.wait()


def test_a_machine_without_cgroups_names_every_tree_limit_unenforced(workspace: Path, tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a limit the machine could not enforce went unrecorded. Simulated host without cgroup
    mounts (a mock: the mount table read is an empty file); the run still works and says what did not hold."""
    empty = tmp_path / "mountinfo"
    empty.write_text("")
    monkeypatch.setattr(cgroups, "MOUNTINFO", empty)
    result = LocalSandbox().run(SandboxRequest(argv=("true",), workspace=workspace, limits=SandboxLimits(cpus=0.5, timeout_seconds=20)))
    assert result.ok
    notes = " | ".join(result.unenforced)
    for words in ("memory limit of the whole process tree", "process limit of the whole process tree", "CPU quota",
                  "per process (RLIMIT_AS)", "tmpfs pages are not counted"):
        assert words in notes, notes


@needs_cgroups
def test_pages_written_to_the_private_tmp_count_against_the_attempt_memory(workspace: Path) -> None:
    """Regression: /tmp was a tmpfs of host RAM counted in no limit; with a tmpfs cap above the memory
    limit, writing past the memory limit into /tmp must end the run for memory, not take host memory."""
    limits = SandboxLimits(memory_mb=128, tmpfs_mb=1024, timeout_seconds=25)
    script = ("f = open('/tmp/fill', 'wb', buffering=0)\nfor _ in range(400):\n    f.write(b'x' * (1 << 20))\n"
              "print('wrote 400 MiB')\n")
    result = LocalSandbox().run(SandboxRequest(argv=("python3", "-c", script), workspace=workspace, limits=limits))
    assert result.killed and result.kill_reason == "memory", result
    assert "wrote 400 MiB" not in result.stdout.text


def test_the_cgroup_v2_path_writes_every_limit_into_one_folder_and_the_launcher_joins_it(tmp_path: Path,
                                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The v2 branch had never run (this host's memory, pids and cpu controllers are bound to v1, and a
    controller cannot be in two hierarchies). A mock: a plain folder stands in for a cgroup2 mount (the
    mount table and /proc/self/cgroup are files naming it), so this holds the file protocol only: the
    controllers switched on in the runner's and `memtrial`'s subtree_control, memory.max,
    memory.swap.max=0, memory.oom.group=1, pids.max and cpu.max in one run folder, every controller
    on v2, and the launcher writing its PID there once. The kernel's enforcement through v2 is untested here."""
    mount = tmp_path / "cg2"
    own = mount / "runner.scope"
    (own / cgroups.PARENT).mkdir(parents=True)
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma misc\n")
    (own / "cgroup.subtree_control").write_text("")
    (own / cgroups.PARENT / "cgroup.subtree_control").write_text("")  # the kernel makes it with the folder
    mountinfo, self_cgroup = tmp_path / "mountinfo", tmp_path / "cgroup"
    mountinfo.write_text(f"41 23 0:38 / {mount} rw,relatime - cgroup2 cgroup2 rw\n")
    self_cgroup.write_text("0::/runner.scope\n")
    monkeypatch.setattr(cgroups, "MOUNTINFO", mountinfo)
    monkeypatch.setattr(cgroups, "SELF_CGROUP", self_cgroup)

    run = make_run_cgroup(256 << 20, 64, 0.5)

    assert run.unenforced == [] and run.missing == {}, run.unenforced
    assert run.versions == {"memory": 2, "pids": 2, "cpu": 2}
    (folder,) = run.distinct
    assert folder.parent == own / cgroups.PARENT and folder.name.startswith("run-")
    for switched in (own, own / cgroups.PARENT):
        assert set((switched / "cgroup.subtree_control").read_text().split()) == {"+memory", "+pids", "+cpu"}
    written = {name: (folder / name).read_text() for name in ("memory.max", "memory.swap.max", "memory.oom.group", "pids.max", "cpu.max")}
    assert written == {"memory.max": str(256 << 20), "memory.swap.max": "0", "memory.oom.group": "1", "pids.max": "64",
                       "cpu.max": f"50000 {cgroups.CPU_PERIOD_US}"}
    done = subprocess.run([*run.enter_argv(), "sh", "-c", "echo $PPID; echo $$"], capture_output=True, text=True, check=True)
    assert (folder / "cgroup.procs").read_text().split() == [done.stdout.split()[1]]  # the launcher exec'd into the command
    (folder / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 1\noom_kill 1\n")
    assert run.oom_kills() == 1
