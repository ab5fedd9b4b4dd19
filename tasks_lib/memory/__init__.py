"""memtrial's reference memory system and the in-process memory adapter interface.

`adapter.MemoryAdapter` is the interface every memory system is wrapped in; `store.SqliteMemoryStore`
is the embedded reference system (keyword, semantic, graph and corrections lanes over one
SQLite file); `conformance` is the suite every adapter must pass; `hook` delivers memory to an
agent (run it as `python -m tasks_lib.memory.delivery.hook`); `replica` freezes a store and hands
each run a private copy; `env` names every variable the agent side reads.

The names below are imported on first use, not with the package: the hook imports this package on
every prompt and must not pay for the store (SQLite, numpy) or pydantic when memory is off.
"""

from __future__ import annotations

from tasks_lib import lazy_exports

_HOMES = {
    "Accounting": "tasks_lib.memory.adapter",
    "MemoryAdapter": "tasks_lib.memory.adapter",
    "MemoryHit": "tasks_lib.memory.adapter",
    "MemoryItem": "tasks_lib.memory.adapter",
    "EMBEDDERS": "tasks_lib.memory.embeddings",
    "get_embedder": "tasks_lib.memory.embeddings",
    "find_provenance": "tasks_lib.memory.delivery.provenance",
    "trial_realm": "tasks_lib.memory.realms",
    "validate_realm": "tasks_lib.memory.realms",
    "restore_replica": "tasks_lib.memory.reference.replica",
    "snapshot": "tasks_lib.memory.reference.replica",
    "SqliteMemoryStore": "tasks_lib.memory.reference.store",
}
"""Exported name -> the module that defines it."""

__all__ = sorted(_HOMES)

__getattr__, __dir__ = lazy_exports(__name__, globals(), _HOMES)
