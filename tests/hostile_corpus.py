"""A two-task corpus in a real git repository, a planting agent, and the attempt's real stages.

`make_corpus` commits `calc-add` (fix `add` in calc/core.py; the post-turn test
tests/test_hidden.py imports it; `calc` and `tests` are allowed output paths) and `other-task`,
whose solution and hidden test hold secrets no attempt of `calc-add` may read. `register_planter`
registers a `command` agent running tests/plant_agent.py in the sandbox. `attempt_stages` runs one
attempt through the stage functions `run_attempt` composes and keeps the workspace until the end of
the `with` block, so a test can read what the check left there.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import plant_agent
from tasks_lib.agents.base import AgentRun
from tasks_lib.agents.command import CommandAgent
from tasks_lib.agents.registry import register_agent
from tasks_lib.arm.steps import (
    CheckOutcome,
    TaskSource,
    Workspace,
    audit_workspace,
    check_workspace,
    materialize_workspace,
    provision_memory,
    record_attempt,
    release_memory,
    run_agent,
    sandbox_options_of,
    schedule,
    teardown_workspace,
)
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import LoadedTask, load_tasks
from tasks_lib.sandbox.base import ReadOnlyMount, SandboxLimits

TARGET = "calc-add"
OTHER = "other-task"
RUN_ID = "hostile-run"
LIMITS = SandboxLimits(timeout_seconds=60, memory_mb=1024)
AGENT_INSIDE = "/agent/plant_agent.py"
PAYLOAD_INSIDE = "/agent/payload"
"""Where the planting agent and the files it plants appear inside the sandbox."""
VERIFIER = (b"#!/bin/sh\nset -u\n[ -f tests/test_hidden.py ] || { echo 'verifier: post-turn tests are missing' >&2; exit 2; }\n"
            b"PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q\n")
HIDDEN_TEST = ("import unittest\n\nfrom calc.core import add\n\n\nclass HiddenTest(unittest.TestCase):\n"
               "    def test_add(self):\n        self.assertEqual(add(2, 3), 5)\n")
VISIBLE_TEST = ("import unittest\n\nfrom calc.core import add\n\n\nclass VisibleTest(unittest.TestCase):\n"
                "    def test_add_zero(self):\n        self.assertEqual(add(0, 0), 0)\n")


@dataclass(frozen=True)
class Corpus:
    """The committed corpus and the secrets of its other task."""

    repo: Path
    commit: str
    tasks: dict[str, LoadedTask]
    other_solution: str
    """Text of other-task's solution file (a secret)."""
    other_hidden: str
    """Text of other-task's hidden test (a secret)."""


def _manifest(task_id: str, allowed: Sequence[str]) -> str:
    return json.dumps({
        "schema_version": 1, "task_id": task_id, "kind": "deducible",
        "instruction": "Fix add in calc/core.py so that it adds.", "check_command": ["sh", "{verifier}"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": hashlib.sha256(VERIFIER).hexdigest()},
                     "timeout_seconds": 60},
        "memories": [{"text": "calc keeps its arithmetic in calc/core.py.", "lane": "keyword", "kind": "fact"}],
        "allowed_output_paths": list(allowed), "agent_timeout_seconds": 120,
    })


def _write(root: Path, files: Mapping[str, str | bytes]) -> None:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content if isinstance(content, bytes) else content.encode())


def make_corpus(base: Path) -> Corpus:
    """Commit the two tasks into a fresh repository under `base`."""
    repo = base / "corpus-repo"
    other_solution, other_hidden = f"OTHER-SOLUTION-{secrets.token_hex(8)}", f"OTHER-HIDDEN-{secrets.token_hex(8)}"
    fixture = {"fixture/calc/__init__.py": "", "fixture/calc/core.py": "def add(a, b):\n    return a - b\n",
               "fixture/tests/__init__.py": "", "fixture/tests/test_visible.py": VISIBLE_TEST, "verifier.sh": VERIFIER}
    _write(repo / "tasks" / TARGET, {**fixture, "task.json": _manifest(TARGET, ["calc", "tests"]),
                                     "solution/calc/core.py": "def add(a, b):\n    return a + b\n",
                                     "hidden/tests/test_hidden.py": HIDDEN_TEST})
    _write(repo / "tasks" / OTHER, {**fixture, "task.json": _manifest(OTHER, ["calc"]),
                                    "solution/calc/core.py": f"# {other_solution}\ndef add(a, b):\n    return a + b\n",
                                    "hidden/tests/test_hidden.py": f"# {other_hidden}\n{HIDDEN_TEST}"})
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.org", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.org", "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env, capture_output=True)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    tasks = {t.task_id: t for t in load_tasks(repo / "tasks")}
    return Corpus(repo, commit, tasks, other_solution, other_hidden)


def register_planter(name: str, *operations: str, payload: Path | None = None) -> None:
    """Register `name`: a `command` agent running plant_agent.py with `operations`; `payload` (a
    host folder) is mounted read-only at PAYLOAD_INSIDE for `--copy`."""
    mounts = [ReadOnlyMount(source=Path(plant_agent.__file__).resolve(), target=AGENT_INSIDE)]
    if payload is not None:
        mounts.append(ReadOnlyMount(source=payload, target=PAYLOAD_INSIDE))
    argv = ("python3", AGENT_INSIDE, *operations)
    register_agent(name, lambda **options: CommandAgent(argv, mounts=tuple(mounts), limits=LIMITS, **options))  # type: ignore[arg-type]


@dataclass(frozen=True)
class Staged:
    """One attempt's record, check outcome, agent run and (until the block ends) workspace."""

    record: RunRecord
    check: CheckOutcome
    run: AgentRun
    workspace: Workspace
    store: LocalStore

    def transcript_text(self) -> str:
        return "\n".join(step.text for step in self.run.transcript.steps)

    def stored_text(self) -> str:
        """Everything stored for the attempt (transcript, audit receipt, record), as text."""
        return "\n".join(self.store.get_bytes(key).decode(errors="replace")
                         for key in self.store.list_keys(f"runs/{RUN_ID}/attempts"))


@contextmanager
def attempt_stages(corpus: Corpus, agent: str, store: LocalStore, *, sandbox: str = "local", condition: str = "off",
                   agent_options: Mapping[str, object] | None = None) -> Iterator[Staged]:
    """Run one `calc-add` attempt through the stages `run_attempt` composes, the agent and the
    check in `sandbox` (built from the agent's `sandbox_options`); tear the workspace down when the block ends."""
    attempt = schedule([corpus.tasks[TARGET]], [condition], 1)[0]
    workspace = materialize_workspace(attempt, TaskSource(corpus.repo, corpus.commit, "tasks"))
    try:
        memory = provision_memory(attempt, RUN_ID, workspace.root)
        try:
            run = run_agent(attempt, workspace, memory, agent, agent_options=agent_options, sandbox=sandbox)
        finally:
            release_memory(memory)
        receipt = audit_workspace(attempt, workspace)
        check = check_workspace(attempt, workspace, receipt, run, sandbox=sandbox,
                                sandbox_options=sandbox_options_of(agent_options))
        record = record_attempt(attempt, run_id=RUN_ID, workspace=workspace, memory=memory, run=run, receipt=receipt,
                                check=check, agent_name=agent, store=store)
        yield Staged(record, check, run, workspace, store)
    finally:
        teardown_workspace(workspace)
