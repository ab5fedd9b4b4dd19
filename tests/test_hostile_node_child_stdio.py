"""Attack F2 on #29 item 1, the Node shim: an honest, solved Node task failed its judged check when
its module ran a child process with inherited stdio.

`shim.cjs` kept the judge's answer channel on fd 1 (it only swaps `process.stdout.write`), so a child
spawned with `{stdio: 'inherit'}` (or `fs.writeSync(1, ...)`) writes into the channel: the judge reads
the child's text as an answer (JSONDecodeError: the case errors) and every later answer is one behind.
`shim.py` moves its channel off fd 1 first (fd 1 becomes stderr), so the Python jail is not affected.

Now the Node jail's launcher moves the channel to fd 3 (`post_turn.jail_argv`): fd 0 is /dev/null and
fd 1 the jail's stderr. (Failed before: the solved attempt was judged `not passed`.)
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks_lib.arm.judged_check import run_judged_check
from tasks_lib.arm.workspace import WorkspaceTemplates
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.sandbox.local import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
TASK = "pagekit-last-page"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("node") is None or os.geteuid() != 0,
                    reason="the judge apart needs bwrap, node and a root runner")
@pytest.mark.parametrize("noise", ["none", "inherited child"])
def test_a_solved_node_task_whose_module_runs_a_child_with_inherited_stdout_still_passes(tmp_path: Path, noise: str) -> None:
    """Finding: with the reference solution applied, the check passes; add one inherited-stdio child
    (an audit log line) and the same solution is judged failed."""
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == TASK]
    workspace = tmp_path / "workspace"
    WorkspaceTemplates(tmp_path / "templates").materialize(REPO, HEAD, f"corpora/tasks/{TASK}/fixture", workspace)
    shutil.copy(task.solution_dir / "lib" / "paginate.js", workspace / "lib" / "paginate.js")
    if noise == "inherited child":
        with open(workspace / "lib" / "paginate.js", "a", encoding="utf-8") as module:
            module.write("\nrequire('node:child_process').spawnSync('echo', ['paginate: loaded'], { stdio: 'inherit' });\n")
    check = run_judged_check(task, workspace)
    assert check.post_turn is not None and check.post_turn.passed, (check.post_turn, check.output_tail[-1500:])


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or os.geteuid() != 0,
                    reason="the judge apart needs bwrap and a root runner")
def test_the_python_jail_is_not_affected_by_a_child_with_inherited_stdio(tmp_path: Path) -> None:
    """Contrast (passes on main): shim.py moves its channel off fds 0 and 1, so a solved Python task whose
    module runs `echo` and `cat` with inherited stdio still passes."""
    python_task = "dotenv-equals-values"
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == python_task]
    workspace = tmp_path / "workspace"
    WorkspaceTemplates(tmp_path / "templates").materialize(REPO, HEAD, f"corpora/tasks/{python_task}/fixture", workspace)
    shutil.copy(task.solution_dir / "envload" / "parser.py", workspace / "envload" / "parser.py")
    with open(workspace / "envload" / "parser.py", "a", encoding="utf-8") as module:
        module.write("\nimport subprocess\nsubprocess.run(['echo', 'parser: loaded'])\nsubprocess.run(['cat'])\n")
    check = run_judged_check(task, workspace)
    assert "parser: loaded" in check.output_tail, "the child never ran: proves nothing"
    assert check.post_turn is not None and check.post_turn.passed, (check.post_turn, check.output_tail[-1500:])
