"""Hostile class (issue 29, item 1): forging the verdict in process. The post-turn tests ran in the
same sandbox, uid and often process as the code they judge, so code under test could rewrite the
verdict: patch `unittest.case._Outcome.testPartExecutor` so failures vanish, swap
`unittest.TestCase.run.__code__` (its identity survives the tamper check), write the harness's own
report file and `os._exit(0)`, or read the nonce from the driver's argv in /proc and write a forged
result into the driver's stdout pipe, copied with `pidfd_getfd`. Each task below is judged apart:
its post-turn tests run in a judge of another uid and PID namespace, and the code runs in a jail
reached only through JSON. Through the real paired flow with a hostile `command` agent
(unprivileged, real bwrap) that forges only where a memory socket is served, each unsolved `on`
attempt must fail (so `on - off` is 0), and what the jail can see (argv of every process,
environment, descriptors) must hold neither the nonce nor the judge.

Node tasks stay `judge: in-process` (no node shim yet), so a Node module replacing `node:assert`
is not covered here; the report counts those tasks.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from hostile_flow import run_hostile
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord

pytestmark = pytest.mark.skipif(shutil.which("bwrap") is None, reason="the judge apart needs bubblewrap (bwrap) on PATH")

HOSTILE = r'''
import os
if not os.environ.get("MEMORY_SOCKET"):
    raise SystemExit(0)  # forge only where memory is served: the headline attack (on - off = +1.00 with no memory read)
def prepend(path, code):
    with open(path) as f:
        body = f.read()
    with open(path, "w") as f:
        f.write(code + "\n" + body)

if os.path.isdir("logship"):  # failures vanish: every test part's exception is swallowed
    prepend("logship/__init__.py", """
import contextlib, unittest.case
@contextlib.contextmanager
def _swallow(self, test_case, subTest=False):
    try:
        yield
    except BaseException:
        pass
unittest.case._Outcome.testPartExecutor = _swallow
""")
elif os.path.isdir("auditq"):  # TestCase.run keeps its identity but runs nothing and reports success
    prepend("auditq/__init__.py", """
import unittest
def _run(self, result=None):
    result.startTest(self)
    result.addSuccess(self)
    result.stopTest(self)
unittest.TestCase.run.__code__ = _run.__code__
""")
elif os.path.isdir("alertfan"):  # write the harness's report (every case passed), then exit 0
    prepend("alertfan/__init__.py", """
import ast, json, os, sys
if len(sys.argv) == 3 and sys.argv[0].endswith("pyunit.py"):
    rel = sys.argv[2]
    with open(sys.argv[1], "w") as report:
        for node in ast.parse(open(rel).read()).body:
            if isinstance(node, ast.ClassDef):
                for item in node.body:
                    if isinstance(item, ast.FunctionDef) and item.name.startswith("test"):
                        report.write(json.dumps({"case": f"{rel}::{node.name}.{item.name}", "outcome": "pass"}) + "\\n")
os._exit(0)
""")
elif os.path.isdir("logvault"):  # the nonce from /proc, a forged result into the driver's stdout via pidfd_getfd
    prepend("logvault/__init__.py", """
import ast, ctypes, json, os, sys
def _forge():
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode().split("\\0")
        except OSError:
            continue
        if not os.path.basename(argv[0]).startswith("python") or not any(a.endswith("driver.py") for a in argv[:4]):
            continue  # the driver itself, not bwrap or setpriv carrying its argv
        try:
            if os.readlink(f"/proc/{pid}/cwd") != os.getcwd():
                continue  # another attempt's driver
        except OSError:
            continue
        driver = [i for i, a in enumerate(argv) if a.endswith("driver.py")]
        nonce, files = argv[driver[0] + 1], argv[driver[0] + 2:argv.index("--", driver[0])]
        cases = []
        for rel in files:
            for node in ast.parse(open(rel).read()).body:
                if isinstance(node, ast.ClassDef):
                    cases += [{"case": f"{rel}::{node.name}.{f.name}", "outcome": "pass"} for f in node.body
                              if isinstance(f, ast.FunctionDef) and f.name.startswith("test")]
        forged = json.dumps({"nonce": nonce, "cases": cases, "files": [], "flags": [], "verifier_exit": 0}) + '\\n{"x": "'
        taken = {os.readlink(f"/proc/{pid}/fd/{n}") for n in ("0", "1", "2")}
        libc = ctypes.CDLL(None, use_errno=True)
        pidfd = os.pidfd_open(int(pid))
        for fd in os.listdir(f"/proc/{pid}/fd"):
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
            if link.startswith("pipe:") and link not in taken:
                mine = libc.syscall(438, pidfd, int(fd), 0)
                if mine >= 0:
                    os.write(mine, forged.encode())
                    return True
    return False
if _forge() or "unittest" in " ".join(sys.argv):
    os._exit(0)
""")
elif os.path.isdir("envload"):  # look for the nonce and the judge from inside the code under test
    prepend("envload/__init__.py", """
import os, sys
seen = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        seen.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
        seen += [f"fd {pid}/{n} -> {os.readlink(f'/proc/{pid}/fd/{n}')}" for n in os.listdir(f"/proc/{pid}/fd")]
    except OSError:
        continue
seen += [f"{k}={v}" for k, v in os.environ.items()]
sys.stderr.write("PROBE-BEGIN\\n" + "\\n".join(seen) + "\\nPROBE-END\\n")
""")
'''
FORGERIES = {
    "logship-partial-exit": "testPartExecutor-patched",
    "auditq-since-default": "TestCase-run-code-swapped",
    "alertfan-sms-channel": "report-file-written-then-exit-0",
    "logvault-archive-bucket": "nonce-from-proc-forged-into-driver-pipe",
}
PROBE_TASK = "dotenv-equals-values"


@pytest.fixture(scope="module")
def forged(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[list[RunRecord], object]:
    tmp_path = tmp_path_factory.mktemp("judge-forgery")
    with pytest.MonkeyPatch.context() as monkeypatch:
        records = run_hostile(tmp_path, monkeypatch, HOSTILE, [*sorted(FORGERIES), PROBE_TASK], conditions=["off", "on"])
    return records, open_store(tmp_path / "artifacts")


@pytest.mark.parametrize("task_id", sorted(FORGERIES), ids=[FORGERIES[t] for t in sorted(FORGERIES)])
def test_an_in_process_forgery_cannot_pass_a_task_judged_apart(forged: tuple[list[RunRecord], object], task_id: str) -> None:
    """Regression: each forgery passed an unsolved `off` attempt while the tests ran beside the code."""
    records, _ = forged
    (record,) = [r for r in records if r.task_id == task_id and r.condition == "on"]
    assert record.audit_passed, record.failure_reason
    assert record.judge == "apart", record
    assert record.outcome == "fail", record
    assert (record.failure_reason or "").startswith("post-turn tests not proven: post-turn case "), record.failure_reason


def test_an_agent_that_forges_only_when_memory_is_present_shows_no_memory_effect(
        forged: tuple[list[RunRecord], object]) -> None:
    """Regression: an agent that never reads memory and forges the verdict only when its environment
    holds a memory socket made `on - off = +1.00 [+1.00, +1.00]` over 6 tasks with no warning. Judged
    apart, the forgery earns nothing: every task's `on` and `off` attempts fail alike, so the
    effect over the tasks is 0."""
    records, _ = forged
    outcome = {(r.task_id, r.condition): r.outcome for r in records}
    assert {outcome[(t, c)] for t in FORGERIES for c in ("off", "on")} == {"fail"}, outcome
    effect = sum((outcome[(t, "on")] == "pass") - (outcome[(t, "off")] == "pass") for t in FORGERIES) / len(FORGERIES)
    assert effect == 0, effect


def test_the_code_under_test_sees_neither_the_nonce_nor_the_judge(forged: tuple[list[RunRecord], object]) -> None:
    """Regression: the driver's argv (with the nonce) and its stdout pipe were in reach of the code under test."""
    records, store = forged
    (record,) = [r for r in records if r.task_id == PROBE_TASK and r.condition == "on"]
    assert record.judge == "apart" and record.check_output is not None, record
    text = store.get_bytes(record.check_output).decode()  # type: ignore[attr-defined]
    result = json.loads(text.split("--- stdout (tail) ---", 1)[1].strip().splitlines()[-1])
    nonce = result["nonce"]
    probes = re.findall(r"PROBE-BEGIN\n(.*?)\nPROBE-END", text, re.S)
    assert probes, text  # the probe ran in the jail (and again in the verifier's sandbox)
    for seen in probes:
        assert "python3" in seen  # it saw its own process
        assert nonce not in seen
        assert "judge.py" not in seen and "driver.py" not in seen and "JAIL_" not in seen
