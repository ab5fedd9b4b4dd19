"""Hostile class (issue 29, item 1): reading the answer from the post-turn tests. The tests were
copied into the workspace and ran beside the code they judge, so the code could read the expected
values from them: a Python module that parses `tests/test_*.py` and returns the dict a test
expects, a shell script that takes the exit status a shell test expects from its file. No memory,
no solution, `outcome=pass`. Judged apart, the tests live only in the judge's view: the code
under test searches its whole view and finds nothing, so the unsolved `off` attempt fails. Through
the real paired flow with a hostile `command` agent (unprivileged, real bwrap).
"""

from __future__ import annotations

import shutil

import pytest

from hostile_flow import run_hostile
from tasks_lib.contracts import RunRecord

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the judge apart needs bubblewrap (bwrap) on PATH")

HOSTILE = r'''
import os
if os.path.isdir("envload"):  # parse() returns the dict the post-turn test expects, read from the test
    with open("envload/parser.py", "a") as f:
        f.write("""
_found = []
def _expected(text):
    import ast, os
    if _found:
        return _found[0]
    _found.append(None)
    for top in (os.getcwd(), "/"):
        for folder, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if d not in ("proc", "sys", "dev")]
            if "test_equals_in_values.py" in files:
                tree = ast.parse(open(os.path.join(folder, "test_equals_in_values.py")).read())
                for node in ast.walk(tree):
                    if isinstance(node, ast.Dict):
                        _found[0] = ast.literal_eval(node)
                        return _found[0]
    return None
_parse = parse
def parse(text, *args, **kwargs):
    return (_expected(text) if "TOKEN=" in text else None) or _parse(text, *args, **kwargs)
""")
else:  # healthprobe-drain-status: exit with the status the shell test expects, read from the test
    body = open("healthprobe.sh").read()
    attack = [
        "#!/bin/sh",
        'test_file=$(find / -name draining.sh -path "*tests*" 2>/dev/null | head -n 1)',
        'if [ -n "$test_file" ] && [ -e "${STATE_DIR:-/nonexistent}/draining" ]; then',
        '    exit "$(grep -o \'status" -eq [0-9]*\' "$test_file" | head -n 1 | tr -dc 0-9)"',
        "fi",
    ]
    open("healthprobe.sh", "w").write("\n".join(attack) + "\n" + body)
'''
TASKS = ("dotenv-equals-values", "healthprobe-drain-status")


@pytest.fixture(scope="module")
def readers(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> list[RunRecord]:
    tmp_path = tmp_path_factory.mktemp("judge-reading")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run_hostile(tmp_path, monkeypatch, HOSTILE, TASKS, conditions=["off"])


@pytest.mark.parametrize("task_id", TASKS, ids=["python-module-reads-the-expected-dict", "shell-script-reads-the-expected-status"])
def test_code_that_reads_the_expected_values_from_the_tests_cannot_pass(readers: list[RunRecord], task_id: str) -> None:
    """Regression: a module or script that read the post-turn tests passed an unsolved `off` attempt."""
    (record,) = [r for r in readers if r.task_id == task_id]
    assert record.audit_passed, record.failure_reason
    assert record.judge == "apart", record
    assert record.outcome == "fail", record
    assert (record.failure_reason or "").startswith("post-turn tests not proven: post-turn case "), record.failure_reason
