"""Hostile class 5 with the real Claude Code CLI: an agent that can tell its arm.

`test_hostile_blind_arms` diffs what a `command` agent sees in each arm; this does the same for the
real CLI, driven through the arm's own composition (`run_attempt`) against a scripted Anthropic
server on 127.0.0.1. The scripted model's one Bash call prints what an agent would look at to learn
its arm (its environment, uid, HOME, cwd, /tmp and mounts). After the run's random parts (session
ids, realm digest, scratch folder names, the per-attempt uid, the server's port, times) are
normalized, an `off` and an `ablate:all` view must equal the `on` view except for the memory
itself (the socket variable and its folder's mount), and nothing may name the apparatus or the arm.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from scripted_anthropic import ScriptedAnthropic, Text, ToolUse, Turn, Usage
from tasks_lib.agents.base import Transcript
from tasks_lib.agents.claude_code import install_root
from tasks_lib.arm.steps import ArmSetup, TaskSource, run_attempt, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.env import SOCKET_ENV
from test_agent_claude_code import MODEL, claude_binary  # noqa: F401 (a fixture)

REPO = Path(__file__).resolve().parents[1]
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
TASK = "logship-partial-exit"
LOOK = ("echo ==env; env | sort; echo ==id; id; echo ==home; ls -la \"$HOME\"; echo ==cwd; pwd; "
        "echo ==tmp; ls -la /tmp; echo ==mounts; cut -d' ' -f4,5 /proc/self/mountinfo")
"""What the model runs: every place an agent would look to learn which arm it is in."""
RANDOM = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"project:[0-9a-f]{16}"), "project:<realm>"),
    # The CLI names its project folder after the workspace path with `/` and `_` written as `-`, so a
    # random part holding `_` would let the next pattern start at `/tmp`'s own name: this one goes first.
    (re.compile(r"-tmp-tmp[a-z0-9_-]{8}(?=-)"), "-tmp-tmp<random>"),
    (re.compile(r"(?<=[/\s-])tmp[A-Za-z0-9_-]{8}(?=[/\s-]|$)"), "tmp<random>"),  # the CLI writes `_` as `-` in its folder names
    (re.compile(r"127\.0\.0\.1:\d+"), "127.0.0.1:<port>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<token>"),
    (re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d"), "<time>"),
]
"""Run-specific random parts."""
GIVEAWAYS = re.compile(r"memtrial|benchmark|harness|condition|ablat|calibration|\boff\b", re.I)


def _look(claude_binary: Path, tmp_path: Path, condition: str) -> str:  # noqa: F811
    attempt = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), [TASK]), [condition], 1)[0]
    store = LocalStore(tmp_path / condition.replace(":", "-"))
    script = [Turn((Text("Looking around."), ToolUse("Bash", {"command": LOOK, "description": "look"})), Usage(input_tokens=10, output_tokens=1)),
              *[Turn((Text("Done."),), Usage(input_tokens=10, output_tokens=1)) for _ in range(4)]]
    with ScriptedAnthropic(script, model=MODEL) as server:
        setup = ArmSetup(run_id="blind-cc", source=TaskSource(REPO, HEAD, "corpora/tasks"), agent_name="claude-code", store=store,
                         agent_options={"binary": claude_binary, "base_url": server.url, "api_key": "sk-scripted-test", "model": MODEL})
        record = run_attempt(attempt, setup)
    transcript = store.get_json(record.transcript or "", Transcript)
    (seen,) = [s.text for s in transcript.steps if s.source == "tool"] or [f"no tool output: {transcript.steps}"]
    assert "==mounts" in seen, seen
    return seen


def _normalized(seen: str) -> list[str]:
    uid = re.search(r"uid=(\d+)", seen)
    text = seen.replace(uid.group(1), "<uid>") if uid else seen
    for pattern, replacement in RANDOM:
        text = pattern.sub(replacement, text)
    return text.splitlines()


def _without_memory(lines: list[str], socket: str | None) -> list[str]:
    """`lines` minus the memory itself: the socket variable, its folder's mount, and the scratch root's
    link count and size in a listing (one more entry: that folder)."""
    folder = socket.rsplit("/", 1)[0] if socket else None
    kept = []
    for line in lines:
        if line.startswith(f"{SOCKET_ENV}=") or (folder and folder in line):
            continue
        kept.append(re.sub(r"^(d\S+)\s+\d+ root\s+root\s+\d+ (<time> (?:\.\.|tmp<random>))$", r"\1 <n> root root <size> \2", line))
    return kept


@pytest.fixture(scope="module")
def views(claude_binary: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:  # noqa: F811
    tmp_path = tmp_path_factory.mktemp("blind-cc")
    return {condition: _normalized(_look(claude_binary, tmp_path, condition)) for condition in ("off", "on", "ablate:all")}


def test_the_cli_sees_the_same_world_in_every_arm_but_for_its_memory(views: dict[str, list[str]]) -> None:
    """Regression: the realm named the condition and `off` carried a kill switch in the environment, so
    an agent could read its arm; what the CLI's own Bash sees must differ from `on` only by the memory."""
    socket = next((line.split("=", 1)[1] for line in views["on"] if line.startswith(f"{SOCKET_ENV}=")), None)
    assert socket, "the on arm has no memory socket: the comparison proves nothing"
    on = _without_memory(views["on"], socket)
    for condition in ("off", "ablate:all"):
        assert not any(line.startswith(f"{SOCKET_ENV}=") for line in views[condition]), condition
        view = _without_memory(views[condition], None)
        assert view == on, (condition, sorted(set(view) ^ set(on)))


def test_nothing_the_cli_sees_names_the_apparatus_or_its_arm(views: dict[str, list[str]], claude_binary: Path) -> None:  # noqa: F811
    """Regression: names and values said MEMTRIAL, the condition or the harness. The one exception is the
    CLI's own install path (its binary and its mount), the same in every arm: a known limit in the README."""
    install = str(install_root(claude_binary))
    for condition, lines in views.items():
        assert not [line for line in lines if GIVEAWAYS.search(line.replace(install, "<cli install>"))], condition
