"""memtrial's reference memory system and the in-process memory adapter interface.

`adapter.MemoryAdapter` is the interface every memory system is wrapped in; `store.SqliteMemoryStore`
is the embedded reference system (keyword, semantic, graph and corrections lanes over one
SQLite file); `conformance` is the suite every adapter must pass; `hook` delivers memory to an
agent (run it as `python -m tasks_lib.memory.delivery.hook`; not imported here, so runpy does not warn); `replica` freezes a store and hands each run a private copy.
"""

from tasks_lib.memory.adapter import Accounting, MemoryAdapter, MemoryHit, MemoryItem
from tasks_lib.memory.embeddings import EMBEDDERS, get_embedder
from tasks_lib.memory.delivery.provenance import find_provenance
from tasks_lib.memory.realms import trial_realm, validate_realm
from tasks_lib.memory.reference.replica import restore_replica, snapshot
from tasks_lib.memory.reference.store import SqliteMemoryStore

__all__ = [
    "EMBEDDERS",
    "Accounting",
    "MemoryAdapter",
    "MemoryHit",
    "MemoryItem",
    "SqliteMemoryStore",
    "find_provenance",
    "get_embedder",
    "restore_replica",
    "snapshot",
    "trial_realm",
    "validate_realm",
]
