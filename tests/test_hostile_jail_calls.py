"""Hostile class (issue 29, item 1), the shell test's call channel: a judged-apart shell test's `jail`
calls reach the judge through files and FIFOs in a folder private to the judge (`JAIL_CALLS`,
`harness/judge.py`'s `Calls`), which answers each call by writing its status into the call's FIFO
and its output into files beside it. The code under test runs in the jail for every call; if it
could see that folder it could answer the shell test's calls itself (a forged status, a forged
output) and pass unsolved. The real judged check (`run_judged_check`: bwrap parties, two uids, a
socketpair) over the unsolved fixture of a shell task whose script, on every call, looks for the
folder where the judge keeps it and where it shares folders with the jail, writes a passing status
into every FIFO it finds, and prints what it found."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks_lib.arm.judged_check import run_judged_check
from tasks_lib.arm.workspace import WorkspaceTemplates
from tasks_lib.corpus.tasks import LoadedTask, load_tasks
from tasks_lib.sandbox.local import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
TASK = "certwatch-renew-window"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

pytestmark = [pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None, reason="the judge apart needs bubblewrap (bwrap)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a judge and a jail of their own uids need a root runner")]

PROBE = r"""
found=$(find /tmp /var/tmp /dev/shm /scratch /workspace /harness /run -maxdepth 4 \( -name requests -o -name '*.done' \
    -o -name '*.argv' -o -name '*.out' -o -name 'jail.sock' -o -name 'judge-*' \) 2>/dev/null | tr '\n' ' ')
for f in $found; do
    [ -p "$f" ] && timeout 2 sh -c 'echo 0 > "$1"' _ "$f"
    case $f in *.out) printf 'api-1 expires in 21 days (%s)\n' "$(date -u -d '+21 days' +%F)" > "$f" ;; esac
done
echo "PROBE found=[$found] env=[$(env | grep '^JAIL_' | tr '\n' ' ')]" >&2
"""


def _task() -> LoadedTask:
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == TASK]
    return task


def test_a_jailed_command_finds_no_call_channel_and_cannot_answer_the_shell_test(tmp_path: Path) -> None:
    """Regression guard: nothing of the judge's call folder (its FIFOs, the call files, the relay's
    socket) nor its name is in the jail's view or environment, so an unsolved shell task stays unsolved."""
    task = _task()
    workspace = tmp_path / "workspace"
    WorkspaceTemplates(tmp_path / "templates").materialize(REPO, HEAD, f"corpora/tasks/{TASK}/fixture", workspace)
    script = workspace / "certwatch.sh"
    shebang, rest = script.read_text().split("\n", 1)
    script.write_text(f"{shebang}\n{PROBE}\n{rest}")
    check = run_judged_check(task, workspace)
    assert check.post_turn is not None and check.problem is None, (check.problem, check.output_tail[-2000:])
    judged = check.output_tail.split("--- judge ---", 1)[1].split("--- jail ---", 1)[0]
    probes = re.findall(r"^PROBE found=\[(.*)\] env=\[(.*)\]$", judged, re.MULTILINE)
    assert probes, f"the probe never ran in the jail through a call: proves nothing\n{check.output_tail[-2000:]}"
    assert all(found.strip() == "" for found, _ in probes), f"the jail sees the judge's call channel: {probes}"
    assert all(env.strip() == "" for _, env in probes), f"the jail's environment names the judge's channel: {probes}"
    assert not check.post_turn.passed, "an unsolved shell task passed its judged check"
