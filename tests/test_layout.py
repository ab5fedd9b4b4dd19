"""The package layout reads as the pipeline: layering rules over every import, and the public face.

Every module of `tasks_lib` and `flows` is parsed with `ast`; imports at module level, inside
functions and under `TYPE_CHECKING` all count. Nothing is imported to check the rules.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import tasks_lib

ROOT = Path(__file__).resolve().parents[1]

SPANNING = {"tasks_lib.run"}
"""Packages whose modules sit at different levels of the pipeline, so their parent's cycle check takes
each module as a node of its own rather than the package whole: `tasks_lib.run` holds the names every
stage writes under (`layout`, `records`, `seal`, `provenance`) and the readers over every stage
(`index`, `preflight`). An import cycle through one of its modules still fails."""


def find_modules(package: str) -> dict[str, Path]:
    """Dotted module name -> file, for every module of `package` (a package is its `__init__.py`)."""
    found = {}
    for path in sorted((ROOT / package).rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


MODULES = {**find_modules("tasks_lib"), **find_modules("flows")}
PACKAGES = sorted(name for name, path in MODULES.items() if path.name == "__init__.py")


def imports_of(name: str) -> Iterator[tuple[str, int]]:
    """Every module `name` imports, with the line: absolute, relative and `from package import module`."""
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([node.module] if node.module else [])])
            for alias in node.names:
                yield (f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base), node.lineno


IMPORTS = {name: sorted(set(imports_of(name))) for name in MODULES}


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


def cycles_under(package: str) -> set[frozenset[str]]:
    """Cycles among the children of `package` (modules, and subpackages taken whole; its own
    `__init__` is a node too): the strongly connected components of more than one node."""
    def child(module: str) -> str | None:
        if module == package:
            return f"{package}.__init__"
        if not within(module, package):
            return None
        head = f"{package}.{module[len(package) + 1:].split('.')[0]}"
        if head in SPANNING and module != head:  # its modules are nodes of their own at this level
            return f"{head}.{module[len(head) + 1:].split('.')[0]}"
        return head

    graph: dict[str, set[str]] = {}
    for source, targets in IMPORTS.items():
        if (tail := child(source)) is not None:
            for target, _ in targets:
                if (head := child(target)) is not None and head != tail:
                    graph.setdefault(tail, set()).add(head)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: set[frozenset[str]] = set()

    def visit(node: str) -> None:  # Tarjan's strongly connected components
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while not component or node not in component:
                component.add(stack.pop())
            if len(component) > 1:
                found.add(frozenset(component))

    for node in list(graph):
        if node not in index:
            visit(node)
    return found


def violations(rule: str) -> list[str]:
    """`file:line: problem; fix` for every import that breaks `rule`."""
    problems = []
    for name, targets in IMPORTS.items():
        where = MODULES[name].relative_to(ROOT)
        for target, line in targets:
            top = target.split(".")[0]
            if rule == "library-is-pure" and within(name, "tasks_lib") and (top == "flows" or top.startswith("prefect")):
                problems.append(f"{where}:{line}: imports {target}; tasks_lib holds pure stage logic, wrap it in flows/ instead")
            if rule == "cli-is-an-edge" and within(target, "flows.cli") and not within(name, "flows.cli"):
                problems.append(f"{where}:{line}: imports {target}; move what it needs out of the CLI (flows/runtime/settings.py or tasks_lib)")
            if rule == "runtime-is-below-the-flows" and within(name, "flows.runtime") and top == "flows" and not within(target, "flows.runtime"):
                problems.append(f"{where}:{line}: imports {target}; the runtime runs flows, it never builds on one: move the shared part into flows/runtime/")
    return problems


def test_the_scan_reads_every_module_and_imports_inside_functions() -> None:
    """A scan that found nothing would pass every rule below: it must see the lazy imports the CLI is made of."""
    assert len(MODULES) > 100 and {"tasks_lib.memory.delivery", "flows", "flows.runtime"} <= set(PACKAGES)
    lazy = {target for target, _ in IMPORTS["flows.cli.run"]}  # run.py imports these only inside its commands
    assert {"flows.nightly", "flows.paired", "tasks_lib.run.config"} <= lazy
    assert "tasks_lib.memory.delivery.socket_recall" in {target for target, _ in IMPORTS["tasks_lib.memory.delivery.hook"]}  # inside run_hook


@pytest.mark.parametrize("rule", ["library-is-pure", "cli-is-an-edge", "runtime-is-below-the-flows"],
                         ids=["tasks_lib-never-imports-flows-or-prefect", "only-flows.cli-imports-flows.cli", "flows.runtime-imports-no-flow"])
def test_layering(rule: str) -> None:
    """tasks_lib works without the orchestration; a flow never depends on the command line; the
    runtime a flow runs in never depends on a flow or a stage wrapper."""
    assert violations(rule) == []


def test_no_import_cycle_between_siblings() -> None:
    """At every level of tasks_lib and flows (the top-level subpackages and modules, and inside each
    subpackage) the imports form no cycle, not even one of imports under TYPE_CHECKING or inside a
    function: a name one side needs only to annotate with goes behind a Protocol, or moves."""
    found = set().union(*(cycles_under(package) for package in PACKAGES))
    assert found == set(), f"import cycles: {sorted(sorted(c) for c in found)}"


def test_every_module_has_a_docstring() -> None:
    missing = [str(path.relative_to(ROOT)) for path in MODULES.values() if not (ast.get_docstring(ast.parse(path.read_text())) or "").strip()]
    assert missing == [], "add a module docstring saying what each of these holds"


@pytest.mark.parametrize("name", tasks_lib.__all__)
def test_every_entry_point_resolves_to_where_it_is_defined(name: str) -> None:
    value = getattr(tasks_lib, name)
    home = tasks_lib._HOMES[name]
    assert value is getattr(importlib.import_module(home), name)
    assert value.__module__ == home, f"tasks_lib.{name} is defined in {value.__module__}, not {home}; correct _HOMES"


def test_import_tasks_lib_stays_cheap() -> None:
    """The delivery hook imports subpackages of tasks_lib at every agent turn: the package itself loads nothing."""
    code = "import sys, tasks_lib; print(sorted(m for m in sys.modules if m.startswith(('tasks_lib', 'pydantic', 'pyarrow'))))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert loaded.strip() == "['tasks_lib']"


def test_an_unknown_name_lists_the_entry_points() -> None:
    with pytest.raises(AttributeError, match="its entry points are MemtrialError, load_document"):
        tasks_lib.no_such_thing  # noqa: B018
