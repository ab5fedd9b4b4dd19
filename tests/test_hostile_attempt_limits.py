"""Hostile class: limits that did not hold for the whole attempt. Memory was limited per process
(RLIMIT_AS), so three processes held 3 GiB against a 2 GiB limit and none was killed; the sandbox's
`/tmp` was a tmpfs of host RAM with no cap (1 GiB written to it took 1 GiB of host memory). Through
the real paired flow with a hostile `command` agent running unprivileged: the attempt's process tree
is killed for memory (`kill_reason: memory`), a write past the `/tmp` cap fails inside the sandbox,
and a fork bomb stays held with nothing of it left on the host."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from hostile_flow import run_hostile
from tasks_lib.agents.base import Transcript
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord
from tasks_lib.sandbox.base import SandboxLimits
from tasks_lib.sandbox.cgroups import make_run_cgroup
from tasks_lib.sandbox.procs import pids_matching

MARK = "memtrial-hostile-limits-3f1c"


def _cgroup_memory_here() -> bool:
    probe = make_run_cgroup(64 << 20, 16, 1.0)
    try:
        return "memory" in probe.folders and "pids" in probe.folders
    finally:
        probe.remove()


pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the command agent runs unprivileged only under a root runner"),
    pytest.mark.skipif(os.geteuid() == 0 and not _cgroup_memory_here(),
                       reason="no writable cgroup with the memory and pids controllers on this machine"),
]

HOSTILE = f"""
import os, time
MARK = "{MARK}"
if os.path.isdir("logship"):  # three processes of 1 GiB each under a 2 GiB attempt limit
    held_r, held_w = os.pipe()
    for i in range(3):
        if os.fork() == 0:
            block = bytearray(b"\\x01") * (1 << 30)
            os.write(held_w, b"1")
            time.sleep(60)
            os._exit(0)
    held = 0
    while held < 3:
        held += len(os.read(held_r, 3))
    print("held 3 GiB in three processes", flush=True)
elif os.path.isdir("tabmill"):  # 1 GiB written to the private /tmp
    written, refused = 0, None
    with open("/tmp/fill", "wb", buffering=0) as f:
        try:
            for _ in range(1024):
                f.write(b"x" * (1 << 20))
                written += 1
        except OSError as error:
            refused = error.errno
    print(f"wrote {{written}} MiB to /tmp; refused errno {{refused}}", flush=True)
else:  # a fork bomb: every child sleeps, the parent forks until the kernel refuses
    forks = 0
    try:
        while forks < 5000:
            if os.fork() == 0:
                time.sleep(60)
                os._exit(0)
            forks += 1
    except OSError as error:
        print(f"fork refused after {{forks}} ({{error.errno}})", flush=True)
"""
TASKS = ("alertfan-sms-channel", "logship-partial-exit", "tabmill-delimiter")


@pytest.fixture(scope="module")
def limited_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, tuple[RunRecord, str]]]:
    tmp_path = tmp_path_factory.mktemp("attempt-limits")
    with pytest.MonkeyPatch.context() as monkeypatch:
        records = run_hostile(tmp_path, monkeypatch, HOSTILE, TASKS, conditions=["off"], run_id="limits")
    store = open_store(tmp_path / "artifacts")
    texts = {}
    for record in records:
        transcript = store.get_json(record.transcript or "", Transcript)
        texts[record.task_id] = (record, "\n".join(step.text for step in transcript.steps))
    return tmp_path, texts


def test_three_processes_past_the_attempt_memory_limit_kill_the_attempt(limited_run: tuple[Path, dict[str, tuple[RunRecord, str]]]) -> None:
    """Regression: memory was limited per process, so 3 x 1 GiB under a 2 GiB limit all survived."""
    _, texts = limited_run
    record, text = texts["logship-partial-exit"]
    assert "killed (memory)" in text, (record.agent_unenforced, text[-3000:])
    assert "held 3 GiB" not in text
    assert record.outcome != "pass"
    assert not any("RLIMIT_AS" in note for note in record.agent_unenforced), record.agent_unenforced


def test_writing_past_the_tmp_cap_fails_inside_the_sandbox(limited_run: tuple[Path, dict[str, tuple[RunRecord, str]]]) -> None:
    """Regression: /tmp was an uncapped tmpfs of host RAM; 1 GiB written there took 1 GiB of the host."""
    _, texts = limited_run
    _, text = texts["tabmill-delimiter"]
    cap = SandboxLimits().tmpfs_mb
    line = next(line for line in text.splitlines() if line.startswith("wrote "))
    written = int(line.split()[1])
    assert written <= cap and line.endswith("refused errno 28"), line


def test_a_fork_bomb_stays_held_and_leaves_nothing_behind(limited_run: tuple[Path, dict[str, tuple[RunRecord, str]]]) -> None:
    """Keep held: a fork bomb is refused at the attempt's process limit and none of its processes survive the run."""
    _, texts = limited_run
    _, text = texts["alertfan-sms-channel"]
    line = next(line for line in text.splitlines() if line.startswith("fork refused after "))
    assert int(line.split()[3]) < SandboxLimits().max_processes, line
    assert not pids_matching(MARK)
