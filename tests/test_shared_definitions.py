"""Things defined once: a second definition under the same name drifts from the first (two commit
resolvers, one hardened and one not; two `CheckOutcome`s meaning different things)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _definitions(kind: type[ast.AST], name: str) -> list[str]:
    return [f"{path.relative_to(ROOT)}:{node.lineno}"
            for folder in ("tasks_lib", "flows") for path in sorted((ROOT / folder).rglob("*.py"))
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, kind) and getattr(node, "name", None) == name]


@pytest.mark.parametrize(("kind", "name", "home"), [
    (ast.FunctionDef, "resolve_commit", "tasks_lib/corpus/build.py"),
    (ast.ClassDef, "CheckOutcome", "tasks_lib/arm/steps.py"),
], ids=["resolve_commit", "CheckOutcome"])
def test_a_shared_name_has_one_definition(kind: type[ast.AST], name: str, home: str) -> None:
    """A second `resolve_commit` skipped the first's refusal of option-like revisions and its message; a
    second `CheckOutcome` (the sandbox conformance result) shared a name with the hidden check's result."""
    found = _definitions(kind, name)
    assert [where.rpartition(":")[0] for where in found] == [home], f"{name} must be defined once, in {home}: {found}"
