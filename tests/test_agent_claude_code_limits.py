"""The `claude-code` agent's limits: the whole session (CLI, hooks, every command its tools start) in
one cgroup of the adapter's limits, its private tmpfs folders capped; the real CLI against the
scripted Anthropic server (tests/scripted_anthropic.py), as in tests/test_agent_claude_code.py.

Needs the CLI (scripts/install_claude_code.sh), a working bwrap for sessions and a writable cgroup
with the memory, pids and cpu controllers; each skip says which is missing.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from scripted_anthropic import ScriptedAnthropic, Text, ToolUse, Turn
from tasks_lib.agents.base import AgentSession
from tasks_lib.agents.claude_code import ClaudeCodeAgent, find_binary, session_unenforced
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.memory.env import MEMORY_OFF_ENV
from tasks_lib.sandbox import cgroups
from tasks_lib.sandbox.base import SandboxLimits
from tasks_lib.sandbox.cgroups import make_run_cgroup
from tasks_lib.sandbox.procs import pids_matching
from tasks_lib.sandbox.session_confine import bwrap_for_sessions
from test_sandbox_cgroups import needs_cgroups

MODEL = "claude-sonnet-4-5"
HOOK_ARGV = (sys.executable, "-m", "tasks_lib.memory.delivery.hook")




@pytest.fixture(scope="module")
def claude_binary() -> Path:
    try:
        return find_binary()
    except AgentSetupError as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def confined() -> None:
    bwrap, problem = bwrap_for_sessions()
    if bwrap is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bwrap must confine the CLI in CI: {problem}")
        pytest.skip(f"no session confinement here: {problem}")


@needs_cgroups
def test_a_tool_call_past_the_session_memory_limit_kills_the_session_and_a_full_tmp_stops_at_its_cap(
        claude_binary: Path, confined: None, tmp_path: Path) -> None:
    """Regression: a claude-code session had no cgroup and uncapped tmpfs folders of host RAM, so a
    tool call could take any amount of memory and /tmp grew without bound; now 64 MiB written to a
    16 MiB /tmp is refused, a tool call that takes the tree past 768 MiB ends the session for
    memory, nothing it started survives, and no limit is named unenforced."""
    marker = f"held-{tmp_path.stat().st_ino}"
    hog = f"python3 -c 'import time; block = b\"x\" * (1536 << 20); time.sleep(120)' {marker}"
    script = [
        Turn((ToolUse("Bash", {"command": "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>&1; echo dd-exit=$?",
                               "description": "fill tmp"}),)),
        Turn((ToolUse("Bash", {"command": hog, "description": "hold memory"}),)),
        Turn((Text("Done."),)),
    ]
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir()
    session = AgentSession(workspace=workspace, home=home, prompts=("Fill the disk, then the memory.",),
                           env={MEMORY_OFF_ENV: "1"}, hook_argv=HOOK_ARGV, timeout_seconds=120, model=MODEL)
    limits = SandboxLimits(memory_mb=768, tmpfs_mb=16, max_processes=256)
    with ScriptedAnthropic(script, model=MODEL) as server:
        run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test", limits=limits).run(session)
        served = server.turns_served
    texts = [step.text for step in run.transcript.steps]
    results = [step.text for step in run.transcript.steps if step.kind == "tool-result"]
    assert any("No space left on device" in text and "dd-exit=1" in text for text in results), results
    assert any(text.startswith("claude killed (memory)") for text in texts), texts[-5:]
    assert run.exit_code is None and run.infra_failure is None
    assert served == 2, "the session ended at the memory kill; the model was never asked again"
    assert pids_matching(marker) == {}, "the tool's process died with the session's cgroup"
    assert run.sandbox_unenforced == (), run.sandbox_unenforced


def test_a_machine_without_cgroups_names_each_session_limit_unenforced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: nothing may be assumed. Simulated host without cgroup mounts (a mock: the mount table
    read is an empty file): each tree limit and the tmpfs pages' accounting are named, with the reason."""
    empty = tmp_path / "mountinfo"
    empty.write_text("")
    monkeypatch.setattr(cgroups, "MOUNTINFO", empty)
    none = make_run_cgroup(64 << 20, 16, 1.0)
    notes = session_unenforced(none, confined=True, tmpfs_mb=512)
    assert [note.split(":")[1].strip() for note in notes] == [
        "no memory limit on its process tree", "no process count limit on its process tree", "no CPU quota limit on its process tree",
        "tmpfs_mb=512"], notes
    assert all("no cgroup filesystem is mounted" in note for note in notes[:3]), notes
    assert session_unenforced(none, confined=False, tmpfs_mb=512)[-1].startswith(
        "claude-code session: tmpfs_mb=512 not applied: unconfined")
