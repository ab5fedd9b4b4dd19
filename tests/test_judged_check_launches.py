"""A judged check launches two sandboxes, not three (issue 29's cost bound): the verifier runs
inside the jail's sandbox beside the shim (its uid and view), and the judge in a sandbox of its
own. Each launch is a bwrap, setpriv and prlimit start (about 12 ms of CPU here), so a third one
is cost the check does not need. The real judged check (`run_judged_check`) over a solved shell and
a solved Python task, every sandbox start counted through the real `LocalSandbox.start`; the
verifier's status and output still reach the check apart from the judge's and the jail's: a broken
visible suite fails the check, and what the verifier prints is in its own section; a thread the
code under test leaves in the shim cannot hold the verifier's status."""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

from tasks_lib.arm.judged_check import judge_apart, run_judged_check
from tasks_lib.arm.sandboxed_check import check_limits
from tasks_lib.corpus.tasks import LoadedTask, load_tasks
from tasks_lib.sandbox.local import LocalSandbox, bwrap_problem

REPO = Path(__file__).resolve().parents[1]

pytestmark = [pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None, reason="the judge apart needs bubblewrap (bwrap)"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a judge and a jail of their own uids need a root runner")]


def _task(task_id: str) -> LoadedTask:
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == task_id]
    return task


def _solved(task: LoadedTask, dest: Path) -> Path:
    task_dir = REPO / "corpora" / "tasks" / task.task_id
    shutil.copytree(task_dir / "fixture", dest, symlinks=True)
    shutil.copytree(task_dir / "solution", dest, symlinks=True, dirs_exist_ok=True)
    return dest


@pytest.fixture
def launches(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The argv of every sandbox the check starts (the real `start` runs each)."""
    started: list[tuple[str, ...]] = []
    real = LocalSandbox.start

    def counted(self: LocalSandbox, party, cgroup):  # noqa: ANN001, ANN202 (the real method's arguments)
        started.append(party.request.argv)
        return real(self, party, cgroup)
    monkeypatch.setattr(LocalSandbox, "start", counted)
    return started


@pytest.mark.parametrize("task_id", ["certwatch-renew-window", "logship-partial-exit"])
def test_a_judged_check_launches_two_sandboxes_not_three(tmp_path: Path, launches: list[tuple[str, ...]], task_id: str) -> None:
    task = _task(task_id)
    check = run_judged_check(task, _solved(task, tmp_path / "workspace"))
    assert check.problem is None and check.post_turn is not None, (check.problem, check.output_tail[-2000:])
    assert check.post_turn.passed and check.exit_code == 0, check.output_tail[-2000:]
    assert len(launches) == 2, f"{len(launches)} sandboxes for one judged check: {launches}"


def test_the_verifiers_failure_and_output_reach_the_check_from_inside_the_jail(tmp_path: Path, launches: list[tuple[str, ...]]) -> None:
    """The verifier shares the jail's sandbox, yet its exit status is still the check's and its output
    is still its own section (a solved task whose visible suite is broken fails the check)."""
    task = _task("logship-partial-exit")
    workspace = _solved(task, tmp_path / "workspace")
    (workspace / "tests" / "test_zz_broken.py").write_text(
        "import sys, unittest\n\nclass Broken(unittest.TestCase):\n"
        "    def test_broken(self):\n        print('VISIBLE-SUITE-SAYS-HI')\n        sys.stderr.write('VISIBLE-SUITE-STDERR\\n')\n"
        "        self.fail('broken on purpose')\n")
    check = run_judged_check(task, workspace)
    assert check.post_turn is not None and check.post_turn.passed, check.output_tail[-2000:]
    assert check.exit_code not in (0, None), check.output_tail[-2000:]
    verifier_section = check.output_tail.split("--- verifier ---", 1)[1]
    assert "broken on purpose" in verifier_section, check.output_tail[-2000:]
    assert "broken on purpose" not in check.output_tail.split("--- verifier ---", 1)[0], "the verifier's stderr leaked into another party's section"
    assert "VISIBLE-SUITE-SAYS-HI" in check.stdout_tail, check.stdout_tail[-2000:]
    assert len(launches) == 2


def test_a_thread_the_code_under_test_leaves_in_the_shim_does_not_hold_the_verifiers_status(tmp_path: Path) -> None:
    """The jail's launcher waits for the shim before it exits with the verifier's status, so a shim
    kept alive by a thread the code under test started would hold the check until its timeout and
    lose the verifier's status (a solved task failed as timed out). The shim exits hard once the
    judge is done; a solved task whose package starts an endless thread when the shim imports it
    still passes, well within the timeout."""
    task = _task("logship-partial-exit")
    workspace = _solved(task, tmp_path / "workspace")
    package = workspace / "logship" / "__init__.py"
    package.write_text("import sys, threading, time\n"
                       "if sys.argv[0].endswith('shim.py'):\n"
                       "    threading.Thread(target=time.sleep, args=(3600,)).start()\n" + package.read_text())
    limits = check_limits(task).model_copy(update={"timeout_seconds": 40})
    start = time.monotonic()
    check = judge_apart(task, workspace, limits)
    assert check.post_turn is not None and check.post_turn.passed, check.output_tail[-2000:]
    assert check.exit_code == 0, check.output_tail[-2000:]
    assert time.monotonic() - start < 30
