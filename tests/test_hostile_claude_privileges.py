"""Hostile class 6 (privileges): a root runner handed Claude Code root. Inside its bubblewrap session
the CLI, and every command the model asked it to run, was uid 0 with every capability, so one Bash
call could unmount the tmpfs hiding a runner-owned path and read what it hid, or remount the
read-only memory store writable and change the memory the arm is measured with. Driven here with
the real CLI against a scripted Anthropic server on 127.0.0.1: the model asks for exactly that, and
the hook reports who it ran as; both must be an unprivileged uid with no capabilities."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest

from scripted_anthropic import ScriptedAnthropic, Text, ToolUse, Turn, Usage
from tasks_lib.agents.claude_code import ClaudeCodeAgent, check_reachable_memory
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.env import REALM_ENV, SOCKET_ENV, STORE_ENV
from tasks_lib.memory.planting import plant
from tasks_lib.memory.realms import new_run_secret, trial_realm
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.sandbox.procs import pids_matching
from tasks_lib.sandbox.session_confine import bwrap_for_sessions
from test_agent_claude_code import MEMORY, MODEL, _session, claude_binary  # noqa: F401 (a fixture)

SECRET = "HIDDEN-GRADER-ANSWER-5813"
WHO = "import os; s = open('/proc/self/status').read(); print('hook uid=%d' % os.getuid(), *(l for l in s.splitlines() if l.startswith(('CapEff', 'CapBnd', 'NoNewPrivs'))))"
"""A hook that reports the uid and capabilities it runs with (its stdout is the hook step's text)."""


def _status(text: str, field: str) -> list[str]:
    """Every value of `field` ('CapEff', 'uid', ...) reported in `text`."""
    return re.findall(rf"{field}[:=]\s*(\S+)", text)


def test_a_root_runner_never_hands_the_cli_root_so_it_cannot_unmount_a_mask_or_remount_the_store(
    claude_binary: Path, tmp_path: Path  # noqa: F811
) -> None:
    """Regression: as root with every capability, the agent's Bash call unmounted the mask over a
    hidden path and remounted the memory store writable."""
    bwrap, problem = bwrap_for_sessions()
    if bwrap is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bwrap must confine the CLI in CI: {problem}")
        pytest.skip(f"no session confinement here: {problem}")
    arm = tmp_path / "arm"
    arm.mkdir()
    db = arm / "memory.sqlite"
    realm = trial_realm(new_run_secret(), "run-cc", "uploader-exit", "on", 0)
    with SqliteMemoryStore(db) as memory:
        memory.create_realm(realm)
        plant(memory, realm, [MemorySpec(text=MEMORY, lane="keyword", kind="convention")])
    before = db.read_bytes()
    session = _session(arm, {REALM_ENV: realm, STORE_ENV: str(db)}, prompts=("Check the environment.",))
    hidden = session.workspace / ".graders"  # a runner-owned path inside the workspace: masked by a tmpfs
    hidden.mkdir()
    (hidden / "answer.txt").write_text(SECRET + "\n")
    sleeper = f"import time; time.sleep({700 + tmp_path.stat().st_ino % 300})"
    session = session.model_copy(update={"hidden_paths": (hidden,), "hook_argv": (sys.executable, "-c", WHO)})
    probe = (f"echo uid=$(id -u); grep -E '^(CapEff|CapBnd|NoNewPrivs)' /proc/self/status; "
             f"umount {hidden} && echo UNMOUNTED; cat {hidden / 'answer.txt'}; "
             f"mount -o remount,rw,bind \"$(findmnt -n -o TARGET -T {db})\" && echo REMOUNTED; echo forged >> {db}; "
             f"(setsid python3 -c '{sleeper}' >/dev/null 2>&1 &); echo probe-done")
    script = [
        Turn((ToolUse("Bash", {"command": probe, "description": "probe"}),), Usage(input_tokens=100, output_tokens=10)),
        Turn((Text("Done."),), Usage(input_tokens=120, output_tokens=5)),
    ]
    with ScriptedAnthropic(script, model=MODEL) as server:
        run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test", confine=True).run(session)
        assert server.turns_served == 2

    assert run.exit_code == 0 and run.infra_failure is None, run.transcript.steps
    result = next(s.text for s in run.transcript.steps if s.source == "tool" and "probe-done" in s.text)
    hook = "\n".join(s.text for s in run.transcript.steps if s.source == "hook")
    for who, text in (("the CLI's Bash call", result), ("the hook", hook)):
        assert _status(text, "uid") and "0" not in _status(text, "uid"), f"{who} ran as root: {text}"
        assert set(_status(text, "CapEff")) == {"0000000000000000"}, f"{who} kept capabilities: {text}"
        assert set(_status(text, "CapBnd")) == {"0000000000000000"}, f"{who} may regain capabilities: {text}"
        assert set(_status(text, "NoNewPrivs")) == {"1"}, f"{who} may gain privileges (setuid binaries): {text}"
    assert "UNMOUNTED" not in result and SECRET not in result, f"the mask over a hidden path came off: {result}"
    assert "REMOUNTED" not in result and db.read_bytes() == before, f"the memory store was made writable: {result}"
    assert pids_matching(sleeper) == {}, "a process of the session's uid outlived it"
    if os.geteuid() == 0:
        assert "unprivileged uid" in run.transcript.steps[0].text
        lent = [session.workspace, *session.workspace.rglob("*"), session.home, *session.home.rglob("*")]
        assert {p.lstat().st_uid for p in lent} == {0}, "the workspace and HOME were given back to the runner"


def test_memory_the_unprivileged_uid_cannot_reach_is_a_setup_error_not_a_silent_off_arm(tmp_path: Path) -> None:
    """Regression: run as a fresh uid, the hook could not open a 0600 store or a served socket in a 0700
    folder and delivered nothing, so an `on` arm read as `off`; it must fail before the session instead."""
    db = tmp_path / "memory.sqlite"
    db.write_text("store\n")
    db.chmod(0o600)
    with pytest.raises(AgentSetupError, match=r"memory\.sqlite has mode 600; a root runner runs claude-code as an unprivileged uid"):
        check_reachable_memory({STORE_ENV: str(db)})
    db.chmod(0o644)
    check_reachable_memory({STORE_ENV: str(db)})
    served = tmp_path / "served"
    served.mkdir(mode=0o700)
    served.chmod(0o700)
    with pytest.raises(AgentSetupError, match=r"served has mode 700"):
        check_reachable_memory({SOCKET_ENV: str(served / "memory.sock")})
