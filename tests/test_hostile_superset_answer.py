"""Attack F1 on #29's judge (test strength): ledgerlite-json-export passed UNSOLVED; now it fails.

The post-turn test only asked that each expected amount appears somewhere as an int under a key ending
in `_cents` (and that nothing is a float or an amount-like string). A CLI that computes nothing and
prints `{"amount_cents": [0, 1, ..., 200000]}` for `--json` satisfies every expected amount at once;
the table default is untouched, so all 3 cases pass. Through the real flow (findings/finding_flow_dump.py
with findings/ledgerlite_superset_agent.py) the `off` record is outcome=pass, judge=apart, audit passed.

The post-turn test now also refuses integer cents the ledger does not hold (a superset).
(Failed before that change: the unsolved superset was judged passed.)
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
TASK = "ledgerlite-json-export"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
SUPERSET = '''    if argv is not None and "--json" in argv:
        import json
        print(json.dumps({"amount_cents": list(range(0, 200001))}), file=out)
        return 0
    args = build_parser().parse_args(argv)'''


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or os.geteuid() != 0,
                    reason="the judge apart needs bwrap and a root runner")
def test_an_unsolved_json_export_printing_every_integer_as_cents_does_not_pass(tmp_path: Path) -> None:
    """Finding: the superset answer is judged passed."""
    (task,) = [t for t in load_tasks(REPO / "corpora" / "tasks") if t.task_id == TASK]
    workspace = tmp_path / "workspace"
    WorkspaceTemplates(tmp_path / "templates").materialize(REPO, HEAD, f"corpora/tasks/{TASK}/fixture", workspace)
    cli = workspace / "ledgerlite" / "cli.py"
    cli.write_text(cli.read_text().replace("    args = build_parser().parse_args(argv)", SUPERSET, 1))
    check = run_judged_check(task, workspace)
    assert check.post_turn is not None and not check.post_turn.passed, check.post_turn
