"""Proof that the post-turn tests ran and passed: the cases they hold, and the harness's verdict on them.

A check's exit status alone proves nothing: code the agent wrote can exit 0 at import time, and a
runner script in an allowed path can skip the tests. So the check runs the runner-owned harness
(`harness/driver.py`, mounted read-only) before the verifier. It runs each post-turn file by its
runtime and prints one JSON result carrying the attempt's nonce and every case's outcome.

The cases expected are read from the pinned `hidden/` files (runner-owned, digest-checked), never
from what ran: `test*.py` gives `path::Class.method` for every `test*` method of a class deriving
from a `TestCase`; `*.test.js` gives `path::name` for every top-level `test('name', ...)` call;
`*.sh` is one case, the file. Other files under hidden/ are data. A pass requires the nonce, every
expected case passed, each post-turn file unchanged by its own run, and no tampering flag.
`tasks_lib.corpus.tasks` proves, for every task, that the solution passes every expected case and
that hidden/ holds at least one.

Bytecode is never read: `purge_bytecode` removes every `__pycache__` and `*.pyc` of the workspace
before the check, and the check's Python keeps its caches under a private prefix.
"""

from __future__ import annotations

import ast
import json
import os
import re
import secrets
import shutil
from pathlib import Path
from typing import Any

from tasks_lib.contracts import ContractModel
from tasks_lib.trees import walk_files

HARNESS_DIR = Path(__file__).with_name("harness")
"""The harness scripts (driver.py, pyunit.py, reporter.mjs; judge.py, jail.py, shim.py, shim.cjs), shipped with the package."""
HARNESS_TARGET = "/harness"
"""Where the harness appears inside a namespace or container sandbox."""
_JS_TEST = re.compile(r"^(?:test|it)\(\s*(['\"`])((?:\\.|(?!\1).)*)\1", re.MULTILINE)
_ENTRY_POINTS = ("__init__.py", "conftest.py", "package.json")


class PostTurnVerdict(ContractModel):
    """What the harness's result says about the post-turn cases of one check."""

    passed: bool
    """True when every expected case passed under this attempt's nonce, with no flag."""
    problem: str | None = None
    """Why not, naming the case, file or flag."""
    cases_passed: int = 0
    """Expected cases that passed."""
    cases_expected: int = 0
    """Cases the pinned post-turn files hold."""
    flags: tuple[str, ...] = ()
    """Tampering the harness detected (a replaced test-framework method, a rewritten test file)."""


def test_files(hidden_dir: Path) -> tuple[str, ...]:
    """Workspace-relative post-turn test files under `hidden_dir` (data files excluded)."""
    out = []
    for rel in walk_files(hidden_dir):
        name = rel.rsplit("/", 1)[-1]
        if (name.startswith("test") and name.endswith(".py")) or name.endswith((".test.js", ".test.mjs", ".test.cjs", ".sh")):
            out.append(rel)
    return tuple(sorted(out))


def _python_cases(rel: str, source: str) -> list[str]:
    cases = []
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and any(ast.unparse(base).endswith("TestCase") for base in node.bases):
            cases += [f"{rel}::{node.name}.{item.name}" for item in node.body
                      if isinstance(item, ast.FunctionDef | ast.AsyncFunctionDef) and item.name.startswith("test")]
    return cases


def expected_cases(hidden_dir: Path) -> tuple[str, ...]:
    """Every post-turn case the pinned files under `hidden_dir` hold, in file order."""
    cases: list[str] = []
    for rel in test_files(hidden_dir):
        source = (hidden_dir / rel).read_text(encoding="utf-8")
        if rel.endswith(".py"):
            cases += _python_cases(rel, source)
        elif rel.endswith(".sh"):
            cases.append(rel)
        else:
            cases += [f"{rel}::{match.group(2)}" for match in _JS_TEST.finditer(source)]
    return tuple(cases)


def entry_points(hidden_dir: Path) -> tuple[str, ...]:
    """Workspace paths the post-turn tests rely on besides themselves: each test file, the package
    entry points of its folders and the root (`__init__.py`, `conftest.py`, `package.json`), and, for
    a shell test, every file of its folder (a shell case sources its neighbours)."""
    paths: set[str] = set()
    for rel in test_files(hidden_dir):
        paths.add(rel)
        parts = rel.split("/")[:-1]
        for depth in range(len(parts) + 1):
            folder = "/".join(parts[:depth])
            paths.update(f"{folder}/{name}".lstrip("/") for name in _ENTRY_POINTS)
        if rel.endswith(".sh"):
            paths.add("/".join(parts) + "/" if parts else "")
    return tuple(sorted(p for p in paths if p))


def new_nonce() -> str:
    """A fresh per-attempt nonce."""
    return secrets.token_hex(16)


def harness_argv(nonce: str, hidden_dir: Path, verifier_argv: tuple[str, ...], harness: str = HARNESS_TARGET) -> tuple[str, ...]:
    """The check's argv: the harness over the post-turn files, then the verifier."""
    return ("python3", "-I", "-B", f"{harness}/driver.py", nonce, *test_files(hidden_dir), "--", *verifier_argv)


def jail_argv(runtime: str, harness: str = HARNESS_TARGET) -> tuple[str, ...]:
    """The jail's argv for a judged-apart task whose manifest says `jail: runtime` (`python` or `node`)."""
    if runtime == "node":
        # The channel moves to fd 3, fd 0 becomes /dev/null and fd 1 the jail's stderr: a child the code
        # under test starts with inherited stdio (spawnSync(..., {stdio: 'inherit'})) can then neither
        # read a request nor write into the answers (Node cannot dup a descriptor itself).
        return ("sh", "-c", 'exec node "$0" 3<&0 </dev/null 1>&2', f"{harness}/shim.cjs")
    return ("python3", "-I", "-B", f"{harness}/shim.py")


def purge_bytecode(workspace: Path) -> int:
    """Remove every `__pycache__` folder and `*.pyc`/`*.pyo` file under `workspace` (never following a
    symlink: a link is removed as itself); return how many entries went."""
    removed = 0
    for folder, dirs, files in os.walk(workspace, followlinks=False):
        for name in [d for d in dirs if d == "__pycache__"]:
            path = Path(folder) / name
            if path.is_symlink():
                path.unlink()
            else:
                shutil.rmtree(path)
            dirs.remove(name)
            removed += 1
        for name in files:
            if name.endswith((".pyc", ".pyo")):
                (Path(folder) / name).unlink()
                removed += 1
    return removed


def _result_of(stdout: str) -> dict[str, Any] | None:
    for line in reversed(stdout.strip().splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        return value if isinstance(value, dict) else None
    return None


def verdict(stdout: str, nonce: str, expected: tuple[str, ...]) -> PostTurnVerdict:
    """Grade the harness's printed result against the nonce and the expected cases."""
    total = len(expected)
    if not expected:
        return PostTurnVerdict(passed=False, problem="hidden/ holds no post-turn test case", cases_expected=0)
    result = _result_of(stdout)
    if result is None:
        return PostTurnVerdict(passed=False, cases_expected=total,
                               problem="the post-turn harness wrote no result (the check ended before the harness finished)")
    if result.get("nonce") != nonce:
        return PostTurnVerdict(passed=False, cases_expected=total, problem="the post-turn result does not carry this attempt's nonce")
    outcomes: dict[str, object] = {}
    for case in result.get("cases") or []:
        if isinstance(case, dict):
            outcomes.setdefault(str(case.get("case")), case.get("outcome"))
    flags = [str(flag) for flag in result.get("flags") or []]
    for item in result.get("files") or []:
        if isinstance(item, dict) and item.get("before") != item.get("after"):
            flags.append(f"{item.get('path')} changed while it ran")
    passed = [case for case in expected if outcomes.get(case) == "pass"]
    if flags:
        return PostTurnVerdict(passed=False, cases_expected=total, cases_passed=len(passed), flags=tuple(flags),
                               problem=f"post-turn tests tampered with: {flags[0]}")
    missing = [case for case in expected if case not in passed]
    if missing:
        outcome = outcomes.get(missing[0])
        how = "did not run" if outcome is None else f"outcome {outcome}"
        return PostTurnVerdict(passed=False, cases_expected=total, cases_passed=len(passed),
                               problem=f"post-turn case {missing[0]} {how} ({len(passed)}/{total} passed)")
    return PostTurnVerdict(passed=True, cases_expected=total, cases_passed=total)
