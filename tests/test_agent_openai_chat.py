"""The openai-chat agent loop end to end: a scripted endpoint on 127.0.0.1, a real git-built
workspace, commands in the real local sandbox, and the real memory hook over a real store."""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path

import pytest

from gitrepo import MakeRepo
from scripted_openai import ScriptedOpenAI, final, tool_call
from tasks_lib.agents.base import AgentSession
from tasks_lib.agents.openai_chat import TURN_LIMIT_EXIT, OpenAIChatAgent, resolve_in_workspace
from tasks_lib.agents.registry import agent_names, get_agent
from tasks_lib.arm.injection import transcript_claims
from tasks_lib.contracts import MemorySpec
from tasks_lib.corpus.build import build_tree
from tasks_lib.memory.env import MEMORY_OFF_ENV, REALM_ENV, SESSION_QUERY_ENV, STORE_ENV
from tasks_lib.memory.planting import plant
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.sandbox.base import SandboxLimits

REALM = "trial:openai-chat.calc.on.t0"
MARKER = "<!-- recalled-memory"
HOOK_ARGV = (sys.executable, "-m", "tasks_lib.memory.delivery.hook")
BUGGY = "def add(a, b):\n    return a - b\n"
FIXED = "def add(a, b):\n    return a + b\n"
TEST = "import unittest\nfrom calc import add\n\n\nclass AddTest(unittest.TestCase):\n    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n"
PROMPT = "The calculator's add function returns the wrong total. Fix add in calc.py so the tests pass."
LIMITS = SandboxLimits(timeout_seconds=60, memory_mb=1024)


@pytest.fixture
def workspace(make_repo: MakeRepo, tmp_path: Path) -> Path:
    repo, commit = make_repo({"calc.py": BUGGY, "test_calc.py": TEST, "README.md": "A calculator.\n"})
    dest = tmp_path / "arm" / "workspace"
    dest.parent.mkdir()
    build_tree(repo, commit, dest)
    return dest


@pytest.fixture
def memory(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    db = tmp_path / "replica" / "memory.sqlite"
    db.parent.mkdir()
    with SqliteMemoryStore(db) as store:
        store.create_realm(REALM)
        ids = plant(store, REALM, [MemorySpec(text="The calculator add function in calc.py must return a + b; tests run with python3 -m unittest.", lane="keyword", kind="convention")])
    return db, ids


def _session(workspace: Path, env: dict[str, str], prompts: tuple[str, ...] = (PROMPT,), timeout: float = 120) -> AgentSession:
    home = workspace.parent / "home"
    home.mkdir(exist_ok=True)
    return AgentSession(workspace=workspace, home=home, prompts=prompts, env=env, hook_argv=HOOK_ARGV,
                        timeout_seconds=timeout, model="scripted")


def _agent(server: ScriptedOpenAI, **options: object) -> OpenAIChatAgent:
    return OpenAIChatAgent(server.base_url, limits=LIMITS, retries=0, **options)  # type: ignore[arg-type]


FIX_SCRIPT = [
    tool_call("read_file", path="calc.py"),
    tool_call("write_file", path="calc.py", content=FIXED),
    tool_call("run_command", command="python3 -m unittest -v test_calc"),
    final("Fixed add: it now returns a + b and the tests pass."),
]


def test_loop_fixes_the_workspace_and_memory_on_is_confirmed(workspace: Path, memory: tuple[Path, tuple[str, ...]]) -> None:
    db, ids = memory
    with ScriptedOpenAI(FIX_SCRIPT) as server:
        run = _agent(server, prices={"scripted": (2.0, 10.0)}).run(_session(workspace, {REALM_ENV: REALM, STORE_ENV: str(db)}))
    assert (run.exit_code, run.infra_failure) == (0, None), run.transcript
    assert run.model == "scripted", "the model is reported with the run: it is part of the records' comparability key"
    assert (workspace / "calc.py").read_text() == FIXED
    assert len(server.bodies) == 4 and set(server.paths) == {"/v1/chat/completions"}
    assert server.bodies[0]["messages"][1]["content"].startswith(PROMPT)
    assert MARKER in server.raw[0].decode(), "the hook's block reached the model in the first request"
    tool_results = [m["content"] for m in server.bodies[3]["messages"] if m["role"] == "tool"]
    assert tool_results[0] == BUGGY and tool_results[2].startswith("exit code 0") and "OK" in tool_results[2]
    injection = transcript_claims(run.transcript, ids)
    assert (injection.confirmed, injection.channels, injection.memory_ids) == ("yes", ("prompt-time",), ids)
    hook_steps = [s for s in run.transcript.steps if s.source == "hook"]
    assert len(hook_steps) == 1 and hook_steps[0].channel == "prompt-time"
    assert (run.input_tokens, run.output_tokens) == (400, 40)
    assert run.cost_usd == pytest.approx((400 * 2.0 + 40 * 10.0) / 1e6)
    kinds = [(s.source, s.kind) for s in run.transcript.steps]
    assert kinds.count(("agent", "tool-call")) == 3 and kinds.count(("tool", "tool-result")) == 3
    assert run.transcript.steps[-1].text.startswith("Fixed add")


def test_memory_off_sends_no_marker_and_is_not_confirmed(workspace: Path, memory: tuple[Path, tuple[str, ...]]) -> None:
    db, ids = memory
    env = {REALM_ENV: REALM, STORE_ENV: str(db), MEMORY_OFF_ENV: "1"}
    with ScriptedOpenAI(FIX_SCRIPT) as server:
        run = _agent(server).run(_session(workspace, env))
    assert run.exit_code == 0 and (workspace / "calc.py").read_text() == FIXED
    assert not any(MARKER in raw.decode() for raw in server.raw)
    assert transcript_claims(run.transcript, ids).confirmed == "no"
    assert not any(s.source == "hook" for s in run.transcript.steps)
    assert run.cost_usd == 0, "no price table: cost is 0"


def test_follow_up_prompts_continue_the_same_conversation(workspace: Path, memory: tuple[Path, tuple[str, ...]]) -> None:
    db, ids = memory
    follow_up = "Now also explain what the calculator add function returns."
    with ScriptedOpenAI([final("first answer"), final("second answer")]) as server:
        run = _agent(server).run(_session(workspace, {REALM_ENV: REALM, STORE_ENV: str(db)}, (PROMPT, follow_up)))
    assert run.exit_code == 0
    first, second = server.bodies
    assert second["messages"][: len(first["messages"])] == first["messages"]
    assert second["messages"][len(first["messages"])] == {"role": "assistant", "content": "first answer"}
    assert second["messages"][-1]["content"].startswith(follow_up) and MARKER in second["messages"][-1]["content"]
    assert [s.channel for s in run.transcript.steps if s.source == "hook"] == ["prompt-time", "prompt-time"]


def test_session_start_context_goes_into_the_system_message(workspace: Path, memory: tuple[Path, tuple[str, ...]]) -> None:
    db, ids = memory
    env = {REALM_ENV: REALM, STORE_ENV: str(db), SESSION_QUERY_ENV: "calculator add convention"}
    with ScriptedOpenAI([final("done")]) as server:
        run = _agent(server).run(_session(workspace, env))
    assert MARKER in server.bodies[0]["messages"][0]["content"]
    assert transcript_claims(run.transcript, ids).channels == ("session-start", "prompt-time")


def test_unreachable_endpoint_is_an_infra_failure_not_an_exception(workspace: Path) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = OpenAIChatAgent(f"http://127.0.0.1:{port}/v1", model="m", retries=1, retry_backoff_seconds=0.01, limits=LIMITS)
    run = agent.run(_session(workspace, {MEMORY_OFF_ENV: "1"}))
    assert run.exit_code is None and run.infra_failure is not None
    assert f"127.0.0.1:{port}" in run.infra_failure and "after 2 attempt(s)" in run.infra_failure
    assert (run.input_tokens, run.output_tokens) == (0, 0)


def test_spent_script_server_error_is_an_infra_failure(workspace: Path) -> None:
    with ScriptedOpenAI([tool_call("list_files")]) as server:
        run = _agent(server).run(_session(workspace, {MEMORY_OFF_ENV: "1"}))
    assert run.exit_code is None and "HTTP 500" in (run.infra_failure or "")
    assert run.input_tokens == 100, "usage before the failure is kept"
    assert "calc.py" in next(s.text for s in run.transcript.steps if s.kind == "tool-result")


def test_turn_limit_stops_the_loop(workspace: Path) -> None:
    with ScriptedOpenAI([tool_call("list_files")] * 5) as server:
        run = _agent(server, max_turns=2).run(_session(workspace, {MEMORY_OFF_ENV: "1"}))
    assert run.exit_code == TURN_LIMIT_EXIT and run.infra_failure is None and len(server.bodies) == 2


def test_file_tools_refuse_paths_outside_the_workspace(workspace: Path) -> None:
    """A read or write through `..`, an absolute path or a symlink must not reach the host outside."""
    secret = workspace.parent / "runner-secret.txt"
    secret.write_text("canary-5e1f\n")
    (workspace / "escape").symlink_to(workspace.parent)
    script = [
        tool_call("read_file", path="../runner-secret.txt"),
        tool_call("read_file", path=str(secret)),
        tool_call("read_file", path="escape/runner-secret.txt"),
        tool_call("write_file", path="escape/planted.txt", content="x"),
        tool_call("read_file", path="/workspace/README.md"),
        final("done"),
    ]
    with ScriptedOpenAI(script) as server:
        run = _agent(server).run(_session(workspace, {MEMORY_OFF_ENV: "1"}))
    results = [s.text for s in run.transcript.steps if s.kind == "tool-result"]
    assert all(r.startswith("error:") and "outside the repository" in r for r in results[:4]), results
    assert results[4] == "A calculator.\n"
    assert "canary-5e1f" not in json.dumps([b["messages"] for b in server.bodies])
    assert not (workspace.parent / "planted.txt").exists()


def test_resolve_in_workspace_maps_sandbox_paths(tmp_path: Path) -> None:
    assert resolve_in_workspace(tmp_path, "/workspace/a/b.py") == tmp_path.resolve() / "a" / "b.py"
    with pytest.raises(ValueError, match="absolute paths"):
        resolve_in_workspace(tmp_path, "/etc/passwd")


def test_registered_by_name() -> None:
    assert {"openai-chat", "command"} <= set(agent_names())
    assert isinstance(get_agent("openai-chat", base_url="http://127.0.0.1:9/v1"), OpenAIChatAgent)


def test_the_notes_file_in_home_reaches_the_model_and_nothing_else_does(workspace: Path) -> None:
    """The notes arm's channel: the loop, as a harness, loads the user-level notes file of the session's
    HOME into the system message (a `notes-file` step records it); a HOME without one sends nothing."""
    from tasks_lib.contracts import MemorySpec as Spec
    from tasks_lib.memory.delivery.notes import NotesDelivery

    note = Spec(text="The calculator add function must return a + b.", lane="keyword", kind="convention")
    with ScriptedOpenAI([final("done")]) as server:
        _agent(server).run(_session(workspace, {REALM_ENV: REALM}))
    assert "Contents of" not in server.bodies[0]["messages"][0]["content"]
    NotesDelivery(workspace.parent / "home", REALM, [note]).start()
    with ScriptedOpenAI([final("done")]) as server:
        run = _agent(server).run(_session(workspace, {REALM_ENV: REALM}))
    assert note.text in server.bodies[0]["messages"][0]["content"]
    assert [s.channel for s in run.transcript.steps if s.source == "system" and s.kind == "context"] == ["notes-file"]
