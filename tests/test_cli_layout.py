"""The command tree of `memtrial`: every command group is registered by name, none vanishes.

The tree was pinned from `memtrial --help` before the groups were imported explicitly (they used to
be loaded behind `.exists()` checks, so a missing module silently removed its commands).
"""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import typer

from flows.cli.main import app

ROOT = Path(__file__).resolve().parents[1]
CLI = ROOT / "flows" / "cli"

COMMANDS = {"validate", "certify", "prereg", "admit", "publish", "compare", "report", "run", "rerun", "paired", "trend", "runs", "show", "power", "server", "prune-history"}
"""The top-level commands."""
GROUPS = {
    "corpus": {"build", "redact", "check", "fetch"},
    "memory": {"remember", "recall", "forget", "hook", "serve", "stop", "snapshot"},
    "provisioner": {"check"},
    "suite": {"recall", "retrieval", "locomo", "longmemeval", "compare"},
    "budget": {"check", "fingerprint"},
    "cache": {"list", "clear"},
    "task": {"new", "check", "try"},
}
"""The command groups and their commands."""
SHARED = {"__init__", "main", "common", "options"}
"""Modules of flows/cli that define no command."""


def tree() -> dict[str, Any]:
    root = typer.main.get_command(app)
    return {name: set(getattr(command, "commands", {})) or None for name, command in root.commands.items()}  # type: ignore[attr-defined]


def help_panels(*argv: str) -> list[tuple[str, list[str]]]:
    """The command panels `memtrial ARGV --help` shows, in order, each with its command names in order,
    from the real console script."""
    exe = Path(sys.executable).with_name("memtrial")
    result = subprocess.run([str(exe), *argv, "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    panels: list[tuple[str, list[str]]] = []
    for line in result.stdout.splitlines():
        title = re.match(r"╭─ (.+?) ─", line)
        if title:
            panels.append((title.group(1), []))
        elif panels and (name := re.match(r"│ (\S+) ", line)):
            panels[-1][1].append(name.group(1))
    return [(title, names) for title, names in panels if title not in ("Options", "Arguments")]


def help_commands(*argv: str) -> set[str]:
    """The command names `memtrial ARGV --help` lists, in any panel."""
    return {name for _, names in help_panels(*argv) for name in names}


def test_no_command_or_group_vanishes_from_the_root() -> None:
    """Exactly the pinned commands and groups hang off `memtrial`, each group with exactly its commands."""
    assert tree() == {**{name: None for name in COMMANDS}, **GROUPS}


def test_memtrial_help_lists_every_command_and_group() -> None:
    """The installed console script shows the whole tree, the suite group's commands included."""
    assert help_commands() == COMMANDS | set(GROUPS)
    assert help_commands("suite") == GROUPS["suite"]


DAY = [
    ("Run and read a measurement", ["run", "paired", "report", "runs", "show", "rerun"]),
    ("Memory suites (no agent)", ["suite", "trend"]),
    ("Author tasks and memory systems", ["task", "corpus", "certify", "validate", "memory", "provisioner"]),
    ("Preregistered studies", ["power", "prereg", "admit", "compare", "publish"]),
    ("Set-up and upkeep", ["budget", "cache", "server", "prune-history"]),
]
"""`memtrial --help` in the order of a user's day (#30 item 9)."""


def test_memtrial_help_follows_a_users_day() -> None:
    """A newcomer reads the help top down: running a measurement and reading it come first (they used to
    be eighth among 23, after `validate`, `certify` and the study commands), then the suites, then
    authoring; every command sits in a named panel, none in typer's catch-all `Commands`."""
    assert help_panels() == DAY


def test_console_script_is_the_cli_entry() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["memtrial"] == "flows.cli.main:entry"


def test_every_command_module_is_imported_by_name() -> None:
    """A command module nobody imports would add nothing: main.py or suite.py names each one, and no
    CLI module loads another through importlib or a file check."""
    named: set[str] = set()
    for wiring in ("main.py", "suite.py"):
        for node in ast.walk(ast.parse((CLI / wiring).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "flows.cli":
                named |= {alias.name for alias in node.names}
    modules = {path.stem for path in CLI.glob("*.py")} - SHARED
    assert named == modules
    for path in CLI.glob("*.py"):
        assert "import_module" not in path.read_text(), f"{path.name} loads modules by name at run time; import them explicitly"
