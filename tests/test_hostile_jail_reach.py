"""Hostile class (issue 29, item 1), the jail's reach: a Node module under judgement runs in the same
process as the jail's shim (`harness/shim.cjs`), so whatever the shim's process can reach, the code
under test can. It must reach no judge (no process, no /proc entry, no signal), no post-turn test, no
nonce, no cgroup control, and its only lever on the shared scratch (planting the judge's next case
folder, writing a forged line straight into its answer channel) must not turn an unsolved task into
a pass. The real judged check (`run_judged_check`: bwrap parties, two uids, a socketpair) over a copy
of the task's fixture whose module probes all of that when the shim loads it and prints what it got.
"""

from __future__ import annotations

import json
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
TASK = "pagekit-last-page"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()

pytestmark = [pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None, reason="the judge apart needs bubblewrap (bwrap)"),
              pytest.mark.skipif(shutil.which("node") is None, reason="the Node task's jail needs node on PATH"),
              pytest.mark.skipif(os.geteuid() != 0, reason="a judge and a jail of their own uids need a root runner")]

PROBE = r"""
;(() => {
  const fs = require('node:fs');
  const got = {};
  const tryit = (name, f) => { try { got[name] = f(); } catch (e) { got[name] = 'denied ' + (e.code || e.message); } };
  tryit('status', () => fs.readFileSync('/proc/self/status', 'utf8').split('\n').filter((l) => /^(Uid|NoNewPrivs|CapEff):/.test(l)).join('\n'));
  tryit('processes', () => fs.readdirSync('/proc').filter((n) => /^\d+$/.test(n))
    .map((p) => { try { return fs.readFileSync(`/proc/${p}/cmdline`, 'utf8').replace(/\0/g, ' ').slice(0, 200); } catch (e) { return '?'; } }));
  tryit('judge', () => fs.readdirSync('/judge'));
  tryit('cgroup-write', () => { fs.writeFileSync('/sys/fs/cgroup/cgroup.kill', '1'); return 'wrote'; });
  tryit('kill-pid-1', () => { process.kill(1, 'SIGKILL'); return 'sent'; });
  tryit('environment', () => JSON.stringify(process.env));
  tryit('plant-case-folders', () => { fs.symlinkSync('/judge', '/scratch/case-1'); fs.mkdirSync('/scratch/case-2'); return 'planted'; });
  tryit('forged-answer', () => fs.writeSync(1, '{"value": {"pages": 3, "hasNext": true, "items": [40, 41, 42, 43, 44]}}\n'));
  process.stderr.write('PROBE ' + JSON.stringify(got) + '\n');
})();
"""


def _task() -> LoadedTask:
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == TASK]
    return task


def test_a_jailed_node_module_reaches_no_judge_no_hidden_test_no_nonce_and_cannot_forge_a_pass(tmp_path: Path) -> None:
    """Regression guard: the code under test shares the Node shim's process; if the jail could see the
    judge's process, its tests or the nonce, signal the judge or control the check's cgroup, or if a
    forged line on its answer channel or a planted case folder counted, an unsolved attempt could pass."""
    task = _task()
    workspace = tmp_path / "workspace"
    WorkspaceTemplates(tmp_path / "templates").materialize(REPO, HEAD, f"corpora/tasks/{TASK}/fixture", workspace)
    with open(workspace / "lib" / "paginate.js", "a", encoding="utf-8") as module:
        module.write(PROBE)
    check = run_judged_check(task, workspace)
    assert check.post_turn is not None and check.problem is None, (check.problem, check.output_tail[-2000:])
    found = re.search(r"^PROBE (\{.*\})$", check.output_tail, re.MULTILINE)
    assert found, f"the probe never ran in the jail: proves nothing\n{check.output_tail[-2000:]}"
    got = json.loads(found.group(1))
    nonce = json.loads(re.search(r'^\{"nonce".*$', check.stdout_tail, re.MULTILINE).group(0))["nonce"]  # type: ignore[union-attr]
    assert not check.post_turn.passed, "an unsolved Node task passed its judged check"
    assert re.search(r"^Uid:\s+(\d+)", got["status"], re.MULTILINE).group(1) != "0", got["status"]  # type: ignore[union-attr]
    assert re.search(r"^NoNewPrivs:\s+1$", got["status"], re.MULTILINE) and re.search(r"^CapEff:\s+0+$", got["status"], re.MULTILINE), got["status"]
    assert not any("judge.py" in cmd or "pyunit" in cmd for cmd in got["processes"]), got["processes"]
    assert str(got["judge"]).startswith("denied"), f"the jail lists the post-turn tests: {got['judge']}"
    assert str(got["cgroup-write"]).startswith("denied"), "the jail controls the check's cgroup"
    assert str(got["kill-pid-1"]).startswith("denied"), "the jail signalled its namespace's init"
    assert nonce not in got["environment"] and "JAIL_FD" not in got["environment"], got["environment"]
    assert nonce not in check.output_tail.split("--- jail ---", 1)[1].split("--- verifier ---", 1)[0]
