"""The `claude-code` agent: the real Claude Code CLI driven against a scripted Anthropic server.

The CLI tests need the CLI (scripts/install_claude_code.sh installs the pinned version into
.memtrial/npm-claude/; CI runs it first); without it they skip and say why. Everything talks to
127.0.0.1 only: the scripted server records every request body, so delivery is checked on both
ends — the transcript's hook steps (what the adapter reports) and the request the model got.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from scripted_anthropic import ScriptedAnthropic, Text, ToolUse, Turn, Usage
from tasks_lib.agents.base import AgentSession, Transcript
from tasks_lib.agents.claude_code import ClaudeCodeAgent, find_binary, parse_stream, settings_for
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.agents.registry import get_agent
from tasks_lib.arm.injection import transcript_claims
from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.delivery.provenance import open_marker
from tasks_lib.memory.env import MEMORY_OFF_ENV, REALM_ENV, STORE_ENV
from tasks_lib.memory.planting import plant
from tasks_lib.memory.realms import new_run_secret, trial_realm
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.sandbox.session_confine import bwrap_for_sessions

MODEL = "claude-sonnet-4-5"
PRICE_PER_MTOK = {"input_tokens": 3.0, "output_tokens": 15.0, "cache_creation_input_tokens": 3.75, "cache_read_input_tokens": 0.30}
"""List price of MODEL per million tokens, as the CLI computes total_cost_usd."""
PROMPTS = ("Record the uploader's exit code for a full disk quota in EXIT_CODE.txt.", "Is anything left to do?")
MEMORY = "The uploader exits with code 75 when the disk quota is full; write the number alone."
HOOK_ARGV = (sys.executable, "-m", "tasks_lib.memory.delivery.hook")


def _expected_cost(served: dict[str, int]) -> float:
    return sum(served[key] * price for key, price in PRICE_PER_MTOK.items()) / 1_000_000


@pytest.fixture(scope="module")
def claude_binary() -> Path:
    try:
        binary = find_binary()
    except AgentSetupError as error:
        print(f"claude-code tests skipped: {error}")
        pytest.skip(str(error))
    return binary


@pytest.fixture
def store(tmp_path: Path) -> tuple[Path, str, tuple[str, ...]]:
    """A reference memory store with one memory planted in this trial's realm."""
    path = tmp_path / "memory.sqlite"
    realm = trial_realm(new_run_secret(), "run-cc", "uploader-exit", "on", 0)
    with SqliteMemoryStore(path) as memory:
        memory.create_realm(realm)
        ids = plant(memory, realm, [MemorySpec(text=MEMORY, lane="keyword", kind="convention")])
    return path, realm, ids


def _script(workspace: Path) -> list[Turn]:
    return [
        Turn((Text("Writing the file."), ToolUse("Write", {"file_path": str(workspace / "EXIT_CODE.txt"), "content": "75\n"})),
             Usage(input_tokens=1200, output_tokens=40, cache_creation_input_tokens=300, cache_read_input_tokens=50)),
        Turn((Text("EXIT_CODE.txt now holds 75."),), Usage(input_tokens=1500, output_tokens=12)),
        Turn((Text("Nothing is left to do."),), Usage(input_tokens=1600, output_tokens=8, cache_read_input_tokens=900)),
    ]


def _session(tmp_path: Path, env: dict[str, str], prompts: tuple[str, ...] = PROMPTS) -> AgentSession:
    workspace, home = tmp_path / "workspace", tmp_path / "home"
    workspace.mkdir(exist_ok=True)
    (workspace / "README.md").write_text("# uploader\n\nUploads files; see its exit codes.\n")
    return AgentSession(workspace=workspace, home=home, prompts=prompts, env=env, hook_argv=HOOK_ARGV,
                        timeout_seconds=240, model=MODEL)


# ---------------------------------------------------------------- the real CLI


@pytest.mark.parametrize("condition", ["on", "off"], ids=["memory-on", "memory-off"])
def test_real_cli_completes_the_task_and_injection_is_confirmed_only_in_the_on_arm(
    claude_binary: Path, store: tuple[Path, str, tuple[str, ...]], tmp_path: Path, condition: str
) -> None:
    db, realm, ids = store
    env = {REALM_ENV: realm, STORE_ENV: str(db)}
    if condition == "off":
        env[MEMORY_OFF_ENV] = "1"
    session = _session(tmp_path, env)
    with ScriptedAnthropic(_script(session.workspace), model=MODEL) as server:
        run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test").run(session)
        requests = server.requests
        served = server.usage_served
        assert (server.turns_served, server.exhausted) == (3, 0), "two prompts, three scripted turns, nothing more"

    assert run.exit_code == 0 and run.infra_failure is None, run.transcript.steps
    assert run.model == MODEL
    assert (session.workspace / "EXIT_CODE.txt").read_text() == "75\n", "the scripted Write tool call ran in the workspace"
    assert all(r.path.split("?")[0] == "/v1/messages" for r in requests), [r.path for r in requests]

    injection = transcript_claims(run.transcript, expected_ids=ids)
    bodies_with_marker = [r for r in requests if "recalled-memory" in r.raw]
    if condition == "on":
        assert injection.confirmed == "yes" and injection.channels == ("prompt-time",) and injection.memory_ids == ids
        marker = open_marker("prompt-time", ids)
        assert marker in requests[0].raw, "the hook's block reached the model in the first request"
        assert any(marker in r.raw and MEMORY in r.raw for r in requests)
    else:
        assert injection.confirmed == "no" and injection.memory_ids == ()
        assert bodies_with_marker == [], "the kill switch kept every memory block out of every request"
    assert injection.agent_echoes == 0

    # usage: what the scripted server returned, summed by the CLI and parsed by the adapter
    assert run.input_tokens == served["input_tokens"] + served["cache_creation_input_tokens"] + served["cache_read_input_tokens"]
    assert run.output_tokens == served["output_tokens"]
    assert run.cost_usd == pytest.approx(_expected_cost(served), rel=1e-9)

    # one session, resumed for the follow-up prompt
    assert run.transcript.session_id is not None
    assert [s.text for s in run.transcript.steps if s.source == "user"] == list(PROMPTS)
    assert PROMPTS[0] in requests[-1].raw, "the follow-up request carries the first prompt's history"
    calls = [s.text for s in run.transcript.steps if s.kind == "tool-call"]
    assert len(calls) == 1 and calls[0].startswith("Write ")
    assert any(s.source == "tool" and "EXIT_CODE.txt" in s.text for s in run.transcript.steps)

    # where bwrap works the whole session ran confined, and the transcript says which it was
    expected_note = "confined by bubblewrap" if bwrap_for_sessions()[0] else "NOT confined"
    assert expected_note in run.transcript.steps[0].text

    # the hooks come from the command line only: no settings file in the workspace or the HOME
    assert not (session.workspace / ".claude").exists()
    assert not (session.home / ".claude" / "settings.json").exists()


def test_unreachable_model_endpoint_is_an_infra_failure_not_an_agent_result(
    claude_binary: Path, store: tuple[Path, str, tuple[str, ...]], tmp_path: Path
) -> None:
    """Regression: the CLI's own 'API Error' text must not read as the agent's answer, and the run is infra."""
    with ScriptedAnthropic([]) as server:
        url = server.url  # a port that was just closed: connection refused
    db, realm, _ = store
    session = _session(tmp_path, {MEMORY_OFF_ENV: "1", "CLAUDE_CODE_MAX_RETRIES": "0"}, prompts=(PROMPTS[0],))
    run = ClaudeCodeAgent(binary=claude_binary, base_url=url, api_key="sk-scripted-test").run(session)
    assert run.infra_failure is not None and "connection" in run.infra_failure.lower()
    assert run.exit_code != 0
    assert not any(s.source == "agent" for s in run.transcript.steps), "no model ever answered"


def test_session_timeout_kills_the_cli_and_the_commands_it_started(
    claude_binary: Path, tmp_path: Path
) -> None:
    """Regression: a command the agent left running must not outlive the session (no orphan processes)."""
    from tasks_lib.sandbox.procs import pids_matching

    marker = f"import time; time.sleep({600 + tmp_path.stat().st_ino % 300})"
    session = _session(tmp_path, {MEMORY_OFF_ENV: "1"}, prompts=(PROMPTS[0],)).model_copy(update={"timeout_seconds": 25})
    script = [Turn((ToolUse("Bash", {"command": f"python3 -c '{marker}'", "description": "wait"}),))]
    with ScriptedAnthropic(script, model=MODEL) as server:
        run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test").run(session)
        assert server.turns_served == 1
    assert run.exit_code is None and run.infra_failure is None
    assert run.wall_seconds < 60
    assert any(s.kind == "error" and "session timeout" in s.text for s in run.transcript.steps)
    assert any(s.kind == "tool-call" and marker in s.text for s in run.transcript.steps)
    assert pids_matching(marker) == {}, "the agent's background command was killed with the CLI"


# ---------------------------------------------------------------- without the CLI


def test_missing_binary_is_a_setup_error_naming_the_install_script(tmp_path: Path) -> None:
    agent = ClaudeCodeAgent(binary=tmp_path / "no-such-claude", api_key="k")
    with pytest.raises(AgentSetupError, match="install_claude_code.sh"):
        agent.run(_session(tmp_path, {}))


def test_registered_by_name() -> None:
    assert isinstance(get_agent("claude-code", api_key="k"), ClaudeCodeAgent)


def test_hook_command_survives_the_shell_claude_code_runs_it_through(tmp_path: Path) -> None:
    argv = ["printf", "%s|", "a b", "it's", "$HOME", "; rm -rf x"]
    command = settings_for(argv)["hooks"]["UserPromptSubmit"][0]["hooks"][0]["command"]
    assert command == shlex.join(argv)
    done = subprocess.run(["sh", "-c", command], capture_output=True, text=True, check=True, cwd=tmp_path)
    assert done.stdout == "a b|it's|$HOME|; rm -rf x|"
    assert set(settings_for(argv)["hooks"]) == {"SessionStart", "UserPromptSubmit"}


def _line(**message: object) -> str:
    return json.dumps(message)


BLOCK = "<!-- recalled-memory channel=prompt-time ids=m1 -->\nuse code 75\n<!-- /recalled-memory -->"


@pytest.mark.parametrize(
    ("lines", "confirmed", "echoes"),
    [
        ([_line(type="system", subtype="hook_response", hook_event="UserPromptSubmit", outcome="success", exit_code=0,
                stdout=json.dumps({"hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": BLOCK}}))],
         "yes", 0),
        ([_line(type="system", subtype="hook_response", hook_event="UserPromptSubmit", outcome="success", exit_code=0, stdout=BLOCK)],
         "yes", 0),
        ([_line(type="system", subtype="hook_response", hook_event="UserPromptSubmit", outcome="error", exit_code=1,
                stdout=BLOCK, stderr="memtrial memory hook: boom", output=BLOCK)],
         "no", 0),
        ([_line(type="system", subtype="hook_response", hook_event="UserPromptSubmit", outcome="success", exit_code=0,
                stdout="", output=BLOCK)],
         "no", 0),
        ([_line(type="assistant", message={"content": [{"type": "text", "text": BLOCK}]})], "no", 1),
    ],
    ids=["json-additional-context", "plain-stdout", "failed-hook-stdout-not-delivered",
         "combined-output-field-is-not-stdout", "agent-written-marker-is-an-echo"],
)
def test_stream_hook_steps_confirm_delivery_only_from_successful_hook_stdout(lines: list[str], confirmed: str, echoes: int) -> None:
    parsed = parse_stream("\n".join(lines))
    injection = transcript_claims(Transcript(agent="claude-code", steps=tuple(parsed.steps)))
    assert (injection.confirmed, injection.agent_echoes) == (confirmed, echoes)


def test_stream_parse_of_api_error_and_usage() -> None:
    lines = [
        _line(type="system", subtype="init", session_id="s-1", claude_code_version="2.1.332", model=MODEL),
        _line(type="assistant", is_api_error_message=True, api_error="connection_failed",
              message={"content": [{"type": "text", "text": "API Error: Connection refused"}]}),
        _line(type="result", subtype="success", is_error=True, api_error="connection_failed", session_id="s-1",
              total_cost_usd=0.5, usage={"input_tokens": 10, "cache_creation_input_tokens": 2, "cache_read_input_tokens": 3, "output_tokens": 4},
              result="API Error: Connection refused"),
        "not json",
    ]
    parsed = parse_stream("\n".join(lines))
    assert parsed.session_id == "s-1"
    assert (parsed.usage.input_tokens, parsed.usage.output_tokens, parsed.usage.cost_usd) == (15, 4, 0.5)
    assert parsed.api_error is not None and parsed.api_error.startswith("connection_failed")
    assert [s.source for s in parsed.steps if s.source != "system"] == []
    assert sum(s.kind == "error" for s in parsed.steps) == 3


def test_binary_named_by_the_environment_is_the_only_candidate(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a wrong MEMTRIAL_CLAUDE_BINARY must not silently fall back to some other installed CLI."""
    monkeypatch.setenv("MEMTRIAL_CLAUDE_BINARY", str(tmp_path / "missing-claude"))
    with pytest.raises(AgentSetupError, match="missing-claude"):
        find_binary()


def test_confined_session_cannot_see_runner_owned_paths_or_other_arms(claude_binary: Path, tmp_path: Path) -> None:
    """The scripted model makes the real CLI try the runner-owned area, another arm's scratch folder
    and a write outside its workspace; the tool results the model gets back show none of it worked."""
    bwrap, problem = bwrap_for_sessions()
    if bwrap is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"bwrap must confine the CLI in CI: {problem}")
        pytest.skip(f"no session confinement here: {problem}")
    hidden = tmp_path / "runner" / "hidden"
    hidden.mkdir(parents=True)
    (hidden / "test_secret.py").write_text("HIDDEN-ANSWER-4711\n")
    other_arm = Path(tempfile.mkdtemp(prefix="memtrial-other-arm-"))
    (other_arm / "transcript.json").write_text("OTHER-ARM-9931\n")
    arm = tmp_path / "arm"
    arm.mkdir()
    db = arm / "memory.sqlite"  # beside the workspace, as arms.provision_memory puts it
    realm = trial_realm(new_run_secret(), "run-cc", "uploader-exit", "on", 0)
    with SqliteMemoryStore(db) as memory:
        memory.create_realm(realm)
        plant(memory, realm, [MemorySpec(text=MEMORY, lane="keyword", kind="convention")])
    before = db.read_bytes()
    env = {REALM_ENV: realm, STORE_ENV: str(db)}
    session = _session(arm, env, prompts=(PROMPTS[0],)).model_copy(update={"hidden_paths": (tmp_path / "runner",)})
    probe = (f"cat {hidden / 'test_secret.py'}; cat {other_arm / 'transcript.json'}; "
             f"touch {other_arm / 'planted'}; touch {arm / 'planted'}; echo forged >> {db}; echo probe-done")
    script = [
        Turn((ToolUse("Bash", {"command": probe, "description": "probe"}),), Usage(input_tokens=100, output_tokens=10)),
        Turn((Text("Done."),), Usage(input_tokens=120, output_tokens=5)),
    ]
    try:
        with ScriptedAnthropic(script, model=MODEL) as server:
            run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test", confine=True).run(session)
            requests = server.requests
        assert run.exit_code == 0 and run.infra_failure is None, run.transcript.steps
        tool_result = next(r.raw for r in requests if "probe-done" in r.raw and "tool_result" in r.raw)
        assert "HIDDEN-ANSWER-4711" not in tool_result and "OTHER-ARM-9931" not in tool_result
        assert tool_result.count("No such file or directory") >= 2, tool_result[-2000:]
        assert not (other_arm / "planted").exists(), "nothing outside the arm's own folders is writable"
        refused = tool_result.count("Read-only file system") + tool_result.count("Permission denied")  # the latter as a run's uid
        assert refused >= 2, tool_result[-2000:]
        assert not (arm / "planted").exists() and db.read_bytes() == before, "the memory store's folder is read-only"
        assert transcript_claims(run.transcript).confirmed == "yes", "the hook still read the store, read-only"
        assert "confined by bubblewrap" in run.transcript.steps[0].text
    finally:
        shutil.rmtree(other_arm, ignore_errors=True)


@pytest.mark.parametrize("notes", [True, False], ids=["notes-arm", "no-notes-file"])
def test_the_real_cli_loads_the_notes_file_of_its_home_by_itself_and_nothing_else(claude_binary: Path, tmp_path: Path, notes: bool) -> None:
    """The notes arm's channel: the CLI itself loads the user-level CLAUDE.md the runner wrote to the
    session's HOME (`--add-dir <HOME>/.claude`, every arm), although `--setting-sources ""` keeps every
    settings file out; without the file nothing of it reaches the model (a regression guard: the
    settings lock-down once kept the notes file out too, so the notes arm delivered nothing)."""
    from tasks_lib.memory.delivery.notes import NOTES_PATHS, NotesDelivery

    note = MemorySpec(text=MEMORY, lane="keyword", kind="convention")
    session = _session(tmp_path, {REALM_ENV: "project:0123456789abcdef"}, ("Say hello.",))
    if notes:
        session.home.mkdir(exist_ok=True)
        NotesDelivery(session.home, "project:0123456789abcdef", [note]).start()
    with ScriptedAnthropic([Turn((Text("hello"),), Usage(input_tokens=10, output_tokens=2))], model=MODEL) as server:
        run = ClaudeCodeAgent(binary=claude_binary, base_url=server.url, api_key="sk-scripted-test").run(session)
        requests = server.requests
    assert run.exit_code == 0, run.transcript.steps
    assert any(MEMORY in r.raw for r in requests) == notes
    assert [s.channel for s in run.transcript.steps if s.channel == "notes-file"] == (["notes-file"] if notes else [])
    assert (session.home / NOTES_PATHS[0]).is_file() == notes
