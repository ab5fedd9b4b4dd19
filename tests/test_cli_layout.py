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
SHARED = {"__init__", "main", "common"}
"""Modules of flows/cli that define no command."""


def tree() -> dict[str, Any]:
    root = typer.main.get_command(app)
    return {name: set(getattr(command, "commands", {})) or None for name, command in root.commands.items()}  # type: ignore[attr-defined]


def help_commands(*argv: str) -> set[str]:
    """The command names `memtrial ARGV --help` lists, from the real console script."""
    exe = Path(sys.executable).with_name("memtrial")
    result = subprocess.run([str(exe), *argv, "--help"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 0, result.stderr
    panel = result.stdout.split("Commands")[1]
    return set(re.findall(r"^│ (\S+) ", panel, flags=re.MULTILINE))


def test_no_command_or_group_vanishes_from_the_root() -> None:
    """Exactly the pinned commands and groups hang off `memtrial`, each group with exactly its commands."""
    assert tree() == {**{name: None for name in COMMANDS}, **GROUPS}


def test_memtrial_help_lists_every_command_and_group() -> None:
    """The installed console script shows the whole tree, the suite group's commands included."""
    assert help_commands() == COMMANDS | set(GROUPS)
    assert help_commands("suite") == GROUPS["suite"]


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
