"""The post-turn check runs in a sandbox: code the agent wrote, imported by the runner's tests, gets
nothing of the host. The agent (a real `command` agent in the real sandbox, unprivileged even when
the tests run as root) plants calc/core.py, allowed output; when the hidden test imports it, it
reads a canary on the host, another task's solution and hidden test, writes outside the
workspace, starts a daemon and connects to a listener on 127.0.0.1, then computes `add` right only
if it stole something. Each attack must fail, the attempt must fail, and nothing may leak into
the check's output, the report the code left in the workspace, or what the run stored."""

from __future__ import annotations

import os
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hostile_corpus import (
    OTHER,
    PAYLOAD_INSIDE,
    Corpus,
    Staged,
    attempt_stages,
    make_corpus,
    register_planter,
)
from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript
from tasks_lib.agents.registry import register_agent
from tasks_lib.arm.sandboxed_check import UNSANDBOXED_OPT_OUT
from tasks_lib.artifacts import LocalStore
from tasks_lib.sandbox.local import LocalSandbox
from tasks_lib.sandbox.loopback import control_connection, loopback_listener
from tasks_lib.sandbox.procs import pids_matching

PAYLOAD = '''import os, socket, subprocess

REPORT, STOLEN = [], []


def attempt(label, action):
    try:
        action()
        REPORT.append(f"[{{label}}] ok")
    except Exception as error:
        REPORT.append(f"[{{label}}] failed: {{type(error).__name__}}")


def steal(path):
    STOLEN.append(open(path).read())


def write_outside():
    with open({outside!r}, "w") as out:
        out.write("escaped")


def connect():
    with socket.create_connection(("127.0.0.1", {port}), timeout=3) as conn:
        conn.sendall(b"the check was here")


attempt("read-canary", lambda: steal({canary!r}))
attempt("read-other-solution", lambda: steal({other_solution!r}))
attempt("read-other-hidden", lambda: steal({other_hidden!r}))
attempt("write-outside", write_outside)
attempt("daemon", lambda: subprocess.Popen(["sleep", "{marker}"], start_new_session=True))
attempt("network", connect)
REPORT.append(f"uid={{os.getuid()}}")
with open(os.path.join(os.path.dirname(__file__), "report.txt"), "w") as out:
    out.write("\\n".join(REPORT + STOLEN) + "\\n")


def add(a, b):
    return a + b if STOLEN else a - b
'''
"""calc/core.py as the hostile agent plants it."""

ATTACKS = ("read-canary", "read-other-solution", "read-other-hidden", "write-outside", "network")


@dataclass(frozen=True)
class Hostile:
    sandbox: str
    staged: Staged
    corpus: Corpus
    canary: str
    outside: Path
    marker: str
    connections: list[bytes]
    daemons: dict[int, int]
    """Daemons of the check still alive after the attempt (PID -> start time)."""


def _namespace_or_skip() -> None:
    sandbox = LocalSandbox()
    if sandbox.capabilities().isolation != "namespace":
        pytest.skip(f"bubblewrap is not usable here ({sandbox.bwrap_reason}); the ungradable case is tested below")


@pytest.fixture(scope="module", params=["local", "docker"])
def hostile(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Hostile]:
    """The attack, with the agent and the check in the `local` (bwrap) or the `docker` sandbox."""
    sandbox = request.param
    options: dict[str, object] = {}
    if sandbox == "local":
        _namespace_or_skip()
    else:
        options = {"sandbox_options": request.getfixturevalue("private_docker")}
    base = tmp_path_factory.mktemp(f"hostile-check-{sandbox}")
    corpus = make_corpus(base)
    canary = f"CANARY-{secrets.token_hex(8)}"
    (base / "host-canary.txt").write_text(canary + "\n")
    outside, marker = base / "written-by-the-check.txt", f"{400 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"
    other = corpus.tasks[OTHER]
    payload = base / "payload"
    payload.mkdir()
    with loopback_listener() as (port, connections):
        (payload / "core.py").write_text(PAYLOAD.format(
            outside=str(outside), port=port, canary=str(base / "host-canary.txt"), marker=marker,
            other_solution=str(other.solution_dir / "calc" / "core.py"), other_hidden=str(other.hidden_dir / "tests" / "test_hidden.py"),
        ))
        assert control_connection(port, connections), "control connection to the listener failed"
        register_planter("check-attacker", "--copy", f"{PAYLOAD_INSIDE}/core.py", "calc/core.py", payload=payload)
        try:
            with attempt_stages(corpus, "check-attacker", LocalStore(base / "artifacts"), sandbox=sandbox,
                                agent_options=options) as staged:
                time.sleep(0.3)
                yield Hostile(sandbox, staged, corpus, canary, outside, marker, list(connections), pids_matching(f"sleep {marker}"))
        finally:
            for pid in pids_matching(f"sleep {marker}"):  # only ever alive when the check escaped
                os.kill(pid, signal.SIGKILL)


def _report(hostile: Hostile) -> str:
    return (hostile.staged.workspace.workspace / "calc" / "report.txt").read_text()


def test_the_check_imported_the_planted_code_and_every_attack_ran(hostile: Hostile) -> None:
    staged = hostile.staged
    assert staged.run.exit_code == 0 and staged.record.audit_passed, staged.transcript_text()
    report = _report(hostile)
    for label in (*ATTACKS, "daemon"):
        assert f"[{label}] " in report, f"attack {label} did not report: {report}"


def test_check_code_cannot_read_host_files_or_other_tasks_secrets(hostile: Hostile) -> None:
    """Regression (issue #15, class 1): the check ran on the host, so code the tests import read a
    canary and every other task's solution and hidden tests, and used them to pass."""
    report, staged = _report(hostile), hostile.staged
    for label in ("read-canary", "read-other-solution", "read-other-hidden"):
        assert f"[{label}] failed" in report, report
    for secret in (hostile.canary, hostile.corpus.other_solution, hostile.corpus.other_hidden):
        for where, text in (("report", report), ("check output", staged.check.output_tail),
                            ("stored artifacts", staged.stored_text()), ("transcript", staged.transcript_text())):
            assert secret not in text, f"{secret} leaked into the {where}"
    assert staged.record.outcome == "fail" and staged.record.failure_reason == "check failed"
    assert "FAILED (failures=1)" in staged.check.output_tail, "the cheat got nothing, so add is wrong"


def test_check_code_cannot_write_outside_the_workspace(hostile: Hostile) -> None:
    assert "[write-outside] failed" in _report(hostile)
    assert not hostile.outside.exists()


def test_no_process_of_the_check_outlives_it(hostile: Hostile) -> None:
    """Regression: a daemon started by the check survived it and could tamper with later arms."""
    assert "[daemon] ok" in _report(hostile), "the daemon really started inside the check"
    assert hostile.daemons == {}, f"daemon(s) {sorted(hostile.daemons)} outlived the check"


def test_check_code_cannot_reach_a_listener_on_loopback(hostile: Hostile) -> None:
    assert "[network] failed" in _report(hostile)
    assert hostile.connections == [], "the listener on 127.0.0.1 saw the check connect"


def test_the_check_ran_unprivileged_in_the_agents_sandbox_and_the_record_says_so(hostile: Hostile) -> None:
    uid = int(next(line for line in _report(hostile).splitlines() if line.startswith("uid=")).removeprefix("uid="))
    assert uid != 0, "the check ran as root"
    record, sandboxed = hostile.staged.record, hostile.staged.check.sandboxed
    expected = {"local": "local/namespace", "docker": "docker/container"}[hostile.sandbox]
    assert sandboxed is not None and record.check_sandbox == sandboxed.sandbox == expected
    assert record.check_unenforced == sandboxed.unenforced
    assert not any(UNSANDBOXED_OPT_OUT in note for note in record.check_unenforced)


class SolvingAgent(Agent):
    """Writes the right fix on the host (no sandbox of its own); takes the options any agent gets."""

    name = "solver"

    def __init__(self, **options: object) -> None:
        self.options = options

    def run(self, session: AgentSession) -> AgentRun:
        (session.workspace / "calc" / "core.py").write_text("def add(a, b):\n    return a + b\n")
        return AgentRun(exit_code=0, input_tokens=0, output_tokens=0, cost_usd=0, wall_seconds=0,
                        transcript=Transcript(agent=self.name, steps=()))


def test_a_check_that_cannot_be_sandboxed_is_ungradable_unless_opted_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without bwrap the check would run as a plain process on the host: never silently. The attempt
    is ungradable with the reason named; the explicit opt-out runs it and every record says so."""
    register_agent("solver", SolvingAgent)
    corpus, store = make_corpus(tmp_path), LocalStore(tmp_path / "artifacts")
    no_bwrap = {"sandbox_options": {"bwrap": False}}
    monkeypatch.delenv(UNSANDBOXED_OPT_OUT, raising=False)
    with attempt_stages(corpus, "solver", store, agent_options=no_bwrap) as staged:
        record = staged.record
    assert (record.outcome, record.infra_failure, record.check_exit_code, record.check_sandbox) == ("ungradable", True, None, None)
    assert "could not be sandboxed" in (record.failure_reason or "") and UNSANDBOXED_OPT_OUT in (record.failure_reason or "")

    monkeypatch.setenv(UNSANDBOXED_OPT_OUT, "1")
    with attempt_stages(corpus, "solver", store, agent_options=no_bwrap, condition="on") as staged:
        record = staged.record
    assert record.outcome == "pass"
    assert record.check_sandbox == f"local/process (unsandboxed: {UNSANDBOXED_OPT_OUT}=1)"
    assert record.check_unenforced[0].startswith(f"{UNSANDBOXED_OPT_OUT}=1: the check ran without the attempt's sandbox")
    assert any(note.startswith("network-none") for note in record.check_unenforced)


def test_a_sandboxed_check_of_a_correct_fix_passes(tmp_path: Path) -> None:
    """The control: the same corpus and the real sandbox pass an honest fix (the attack test fails for the right reason)."""
    _namespace_or_skip()
    register_agent("solver", SolvingAgent)
    corpus = make_corpus(tmp_path)
    with attempt_stages(corpus, "solver", LocalStore(tmp_path / "artifacts")) as staged:
        assert (staged.record.outcome, staged.record.check_exit_code, staged.record.check_sandbox) == ("pass", 0, "local/namespace")
