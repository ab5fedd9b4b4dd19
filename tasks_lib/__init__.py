"""memtrial's library: does a memory system make an AI agent better? Pure stage logic, no Prefect.

The stages, in pipeline order (the subpackages hold one each):

1. `corpus`: build a task's tree from git objects, redact hand-written agent memory, certify that
   nothing leaks the answer, prepare the bundled task corpus and prove its invariants.
2. `arm`: run one task under one memory condition and trial (workspace, memory, agent, mutation
   audit, hidden check, record), and the paired matrix of them all.
3. `suites`: the memory suites without an agent (recall sweep, offline retrieval, public data).
4. `analysis`: grade, aggregate, admit against a preregistration, compare, publish, trend.
5. `report`: the self-contained HTML report of a run, rebuilt from its stored artifacts.

The parts the stages use: `contracts` (every artifact's model), `artifacts` (the store),
`run` (a run's config, preflight, layout, records, seal, status, provenance and index), `errors`, `trees`, `memory` (adapters, the reference store, delivery, provisioners),
`agents`, `sandbox` and `budget` (the money fence).

The names below are the entry points; each is imported on first use, so `import tasks_lib` stays
cheap (the memory delivery hook imports subpackages of it at every agent turn).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

_HOMES = {
    "MemtrialError": "tasks_lib.errors",
    "load_document": "tasks_lib.contracts",
    "load_run_config": "tasks_lib.run.config",
    "open_store": "tasks_lib.artifacts",
    "prepare_corpus": "tasks_lib.corpus.prepare",
    "load_tasks": "tasks_lib.corpus.tasks",
    "check_corpus": "tasks_lib.corpus.tasks",
    "schedule": "tasks_lib.arm.steps",
    "run_matrix": "tasks_lib.arm.steps",
    "get_agent": "tasks_lib.agents.registry",
    "open_memory_system": "tasks_lib.memory.registry",
    "run_sweep": "tasks_lib.suites.recall.sweep",
    "run_retrieval_suite": "tasks_lib.suites.retrieval.suite",
    "aggregate_run": "tasks_lib.analysis.aggregate",
    "admit_run": "tasks_lib.analysis.admission",
    "compare_runs": "tasks_lib.analysis.compare",
    "publish_run": "tasks_lib.analysis.publish",
    "build_report": "tasks_lib.report",
}
"""Entry point -> the module that defines it."""

__all__ = list(_HOMES)


def lazy_exports(
    package: str, namespace: dict[str, Any], homes: Mapping[str, str], what: str = "exports",
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__` (PEP 562) that import each of `homes` from its module on first use.

    `homes` maps an exported name to the module defining it; an unknown name is an AttributeError
    listing them (`what` names them in that message).
    """

    def __getattr__(name: str) -> Any:
        home = homes.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}; its {what} are {', '.join(homes)}")
        value = getattr(importlib.import_module(home), name)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *homes})

    return __getattr__, __dir__


__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOMES, "entry points")
