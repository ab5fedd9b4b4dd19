"""Attack F3 on #29 item 6: a provisioner must not keep processes alive after the runner releases it.

Before the fix, `ProvisionerJail.close` closed the waiting shell's stdin, waited 20 s for it to run
`kill -9 -1`, then SIGKILLed the outer bwrap only. The waiting shell and its `cat` run as the provisioner's
own uid, in the PID namespace every verb enters, so a restore could SIGSTOP them: the shell never ran its
kill, the inner bwrap (PID 1 of the namespace, no --die-with-parent) outlived the outer one, and a daemon
the verb forked kept running (and writing to the state folder) after the attempt's record was stored.
Now `close` SIGKILLs the namespace's first process through a pidfd after at most 2 s, and the kernel
ends the whole namespace. ATTACK=none|daemon|stop|stop,daemon picks a variant (default both).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.provisioner.client import ProvisionerSpec
from tasks_lib.memory.provisioner.verbs import SERVE_ENV, STATE_ENV
from tasks_lib.sandbox.local import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
TASK = "logship-partial-exit"
WRAPPER = r"""
import os, signal, sys, time
state = os.environ["MEMTRIAL_PROVISIONER_STATE"]
attack = os.environ.get("ATTACK", "stop,daemon")
if sys.argv[1] == "restore":
    stopped = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if "stop" in attack and int(pid) != os.getpid() and ("memtrial-provisioner-" + "sandbox-ready" in cmd or cmd.strip() == "cat"):
            try:
                os.kill(int(pid), signal.SIGSTOP)
                stopped.append(f"{pid}:{cmd.strip()[:60]}")
            except OSError as error:
                stopped.append(f"{pid}:denied {error}")
    open(os.path.join(state, "stopped.txt"), "w").write("\n".join(stopped))
    if "daemon" in attack and os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            for fd in (0, 1, 2):
                os.close(fd)
            deadline = time.time() + 90
            while time.time() < deadline:
                with open(os.path.join(state, "heartbeat"), "w") as out:
                    out.write(str(time.time()))
                time.sleep(0.5)
            os._exit(0)
        os._exit(0)
    if "daemon" in attack:
        os.wait()
from tasks_lib.memory.provisioner import reference
sys.exit(reference.main(sys.argv[1:]))
"""


def _uid_pids(uid: int) -> list[int]:
    pids = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            if os.stat(f"/proc/{name}").st_uid == uid:
                pids.append(int(name))
        except OSError:
            pass
    return pids


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("nsenter") is None or os.geteuid() != 0,
                    reason="a provisioner's sandbox needs bubblewrap, util-linux nsenter and a root runner (own uid)")
def test_a_provisioner_that_stops_its_waiting_shell_leaves_no_daemon_after_release(tmp_path: Path) -> None:
    """A restore that SIGSTOPs the sandbox's waiting shell and forks a daemon: once run_matrix returns, no process
    of the provisioner's uid is left and its heartbeat in the state folder has stopped (before: daemon, sh and cat
    survived and the heartbeat went on)."""
    from tasks_lib.memory.provisioner.jail import provisioner_identity

    artifacts, state = tmp_path / "artifacts", tmp_path / "state"
    own = {STATE_ENV: str(state), SERVE_ENV: "ro", "ATTACK": os.environ.get("ATTACK", "stop,daemon")}
    spec = ProvisionerSpec(argv=(sys.executable, "-c", WRAPPER), env=own, timeout_seconds=120)
    plan = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), [TASK]), ["on"], 1)
    started = time.monotonic()
    (record,) = run_matrix(plan, run_id="prov-survive", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                           agent_name="calibration", store=LocalStore(artifacts), provisioner=spec)
    took = time.monotonic() - started
    identity = provisioner_identity(state.absolute())
    assert identity is not None
    print("record:", record.outcome, record.injection, record.failure_reason, f"{took:.1f}s")
    print("stopped:", (state / "stopped.txt").read_text())
    time.sleep(2)
    beat = state / "heartbeat"
    beat1 = float(beat.read_text()) if beat.exists() else 0.0
    time.sleep(2)
    beat2 = float(beat.read_text()) if beat.exists() else 0.0
    survivors = _uid_pids(identity.uid)
    print("survivors:", survivors, [(Path(f"/proc/{p}/cmdline").read_bytes()[:60], Path(f"/proc/{p}/stat").read_text().split()[2]) for p in survivors if Path(f"/proc/{p}").exists()])
    bwraps = [int(p) for p in filter(str.isdigit, os.listdir("/proc"))
              if Path(f"/proc/{p}/cmdline").exists() and b"memtrial-provisioner-sandbox-ready" in Path(f"/proc/{p}/cmdline").read_bytes()
              and os.fsencode(str(state.absolute())) in Path(f"/proc/{p}/cmdline").read_bytes()]  # only this test's sandbox
    for pid in set(survivors) | set(bwraps):  # this test's own leftovers, by PID
        try:
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    assert "stop" not in own["ATTACK"] or ":/bin/sh" in (state / "stopped.txt").read_text(), "the attack did not stop the waiting shell"
    assert not survivors and beat2 == beat1, f"the provisioner's processes {survivors} outlived the attempt (heartbeat {beat1} -> {beat2})"


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("nsenter") is None or os.geteuid() != 0,
                    reason="a provisioner's sandbox needs bubblewrap, util-linux nsenter and a root runner (own uid)")
def test_closing_a_sandbox_whose_waiting_shell_is_stopped_is_quick_and_leaves_nothing(tmp_path: Path) -> None:
    """A command in the sandbox stops every process of the provisioner's uid (the waiting shell and its `cat`) and
    leaves a sleeper: `close` still ends the sandbox within a few seconds (before: it waited START_SECONDS, 20 s,
    on the stopped shell, then killed only the outer bwrap, and the sleeper, shell and cat survived)."""
    from tasks_lib.memory.provisioner.jail import ProvisionerJail

    jail = ProvisionerJail((sys.executable,), tmp_path / "fixture", tmp_path / "state")
    jail.start()
    assert jail.identity is not None
    try:
        subprocess.run([*jail.prefix(), "/bin/sh", "-c", "setsid sleep 300 </dev/null >/dev/null 2>&1 & kill -STOP -1; true"],
                       env=jail.env({"PATH": "/usr/bin:/bin"}), check=True, timeout=30)
        stopped = [pid for pid in _uid_pids(jail.identity.uid) if Path(f"/proc/{pid}/stat").read_text().split()[2] == "T"]
        assert len(stopped) >= 2, f"the waiting shell and cat were not stopped: {stopped}"
        started = time.monotonic()
        jail.close()
        took = time.monotonic() - started
    finally:
        jail.close()
    time.sleep(0.5)
    survivors = _uid_pids(jail.identity.uid)
    for pid in survivors:  # this test's own leftovers, by PID
        os.kill(pid, signal.SIGKILL)
    assert not survivors, f"processes {survivors} of the provisioner's uid outlived close"
    assert took < 10, f"close took {took:.1f} s on a stopped waiting shell"


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("nsenter") is None or os.geteuid() != 0,
                    reason="a provisioner's sandbox needs bubblewrap, util-linux nsenter and a root runner (own uid)")
def test_a_sandbox_started_by_a_thread_that_ended_still_runs_verbs(tmp_path: Path) -> None:
    """`close` ends the namespace through a pidfd, not bwrap's --die-with-parent, which kills the sandbox as soon as
    the thread that started it ends (a worker thread of the runner), before the attempt's next verb."""
    import threading

    from tasks_lib.memory.provisioner.jail import ProvisionerJail

    jail = ProvisionerJail((sys.executable,), tmp_path / "fixture", tmp_path / "state")
    starter = threading.Thread(target=jail.start)
    starter.start()
    starter.join()
    try:
        time.sleep(0.5)
        done = subprocess.run([*jail.prefix(), "/bin/echo", "alive"], env=jail.env({"PATH": "/usr/bin:/bin"}),
                              capture_output=True, text=True, timeout=30)
    finally:
        jail.close()
    assert done.returncode == 0 and done.stdout == "alive\n", done.stderr
