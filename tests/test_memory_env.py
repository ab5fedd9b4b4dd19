"""The agent-visible environment names: spelled once, in `tasks_lib.memory.env`, so a rename is one line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tasks_lib.memory import env
from tasks_lib.memory.provisioner.client import RESERVED_ENV

ROOT = Path(__file__).resolve().parent.parent
ENV_MODULE = ROOT / "tasks_lib" / "memory" / "env.py"


def _string_literals(path: Path) -> list[tuple[int, str]]:
    return [(node.lineno, node.value) for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)]


def test_no_module_spells_an_agent_variable_again() -> None:
    """A copied literal (`"MEMTRIAL_MEMORY_DB"` in some consumer) would keep the old name after a rename."""
    names = set(env.AGENT_ENV)
    copies = [f"{path.relative_to(ROOT)}:{line}: {value}"
              for folder in ("tasks_lib", "flows") for path in sorted((ROOT / folder).rglob("*.py")) if path != ENV_MODULE
              for line, value in _string_literals(path) if value in names]
    assert not copies, f"import these names from tasks_lib.memory.env instead: {copies}"


def test_every_agent_variable_is_one_distinct_valid_name() -> None:
    """Two constants sharing a value would make the runner export one setting under two meanings."""
    declared = {name: value for name, value in vars(env).items() if name.endswith("_ENV") and isinstance(value, str)}
    assert sorted(declared.values()) == sorted(env.AGENT_ENV), "AGENT_ENV must list every *_ENV constant exactly once"
    assert len(set(env.AGENT_ENV)) == len(env.AGENT_ENV)
    assert all(re.fullmatch(r"[A-Z][A-Z0-9_]*", value) for value in env.AGENT_ENV)


def test_a_provisioner_may_not_export_the_switches() -> None:
    """A provisioner setting the kill switch or the ablation would decide the arm instead of the runner."""
    assert set(env.SWITCHES) <= RESERVED_ENV
    assert set(env.STORE_PATHS).isdisjoint(RESERVED_ENV), "a provisioner must be able to export its store's path"
