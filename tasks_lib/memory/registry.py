"""Memory systems found by name: the reference store and the third-party adapters.

`open_memory_system("chroma", folder)` returns a fresh adapter keeping its data under `folder`.
An unknown name raises UnknownMemorySystemError listing the known ones; a known system whose
optional package or program is missing raises AdapterUnavailableError saying how to install it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter, chroma_unavailable
from tasks_lib.memory.adapters.chroma_keyword import ChromaKeywordVariant
from tasks_lib.memory.adapters.common import AdapterUnavailableError
from tasks_lib.memory.adapters.lancedb import LanceDbMemoryAdapter, lancedb_unavailable
from tasks_lib.memory.adapters.mcp_memory import McpMemoryAdapter, mcp_memory_unavailable
from tasks_lib.memory.adapters.mcp_search_nodes import McpSearchNodesAdapter
from tasks_lib.memory.adapters.mem0 import Mem0MemoryAdapter, mem0_unavailable
from tasks_lib.memory.adapters.qdrant import QdrantMemoryAdapter, qdrant_unavailable
from tasks_lib.memory.adapters.sqlite_vec import SqliteVecMemoryAdapter, sqlite_vec_unavailable
from tasks_lib.memory.adapters.txtai import TxtaiMemoryAdapter, txtai_unavailable
from tasks_lib.memory.errors import MemoryStoreError
from tasks_lib.memory.reference.store import SqliteMemoryStore


class UnknownMemorySystemError(MemoryStoreError):
    """A memory system name is not registered."""


@dataclass(frozen=True)
class MemorySystem:
    """One registered memory system."""

    name: str
    """Registry name."""
    summary: str
    """One line: what it is and how it is run."""
    lanes: tuple[str, ...]
    """Its retrieval lanes, in hit order."""
    install: str
    """How to install its optional parts (empty when it needs none)."""
    opener: Callable[[Path, str], MemoryAdapter]
    """Build an adapter keeping its data in a folder, with a memtrial embedder name."""
    unavailable: Callable[[], str | None]
    """None when it can run here, else why not."""
    abstention: str | None = None
    """The system's own abstention rule (its adapter's ABSTENTION), None when it has none."""
    scratch_opener: Callable[[Path, str], MemoryAdapter] | None = None
    """Build an adapter whose data is disposable (a suite's scratch): no sync to disk per commit. None:
    the system has no such mode, and `opener` serves."""


def _open_reference(folder: Path, embedder: str) -> MemoryAdapter:
    folder.mkdir(parents=True, exist_ok=True)
    return SqliteMemoryStore(folder / "memory.sqlite", embedder)


def _open_reference_scratch(folder: Path, embedder: str) -> MemoryAdapter:
    folder.mkdir(parents=True, exist_ok=True)
    return SqliteMemoryStore(folder / "memory.sqlite", embedder, durable=False)


def _open_mcp_memory(folder: Path, embedder: str) -> MemoryAdapter:
    return McpSearchNodesAdapter(folder)  # no embeddings: the server matches text


def _open_mcp_memory_terms(folder: Path, embedder: str) -> MemoryAdapter:
    return McpMemoryAdapter(folder)


MEMORY_SYSTEMS: dict[str, MemorySystem] = {
    system.name: system
    for system in (
        MemorySystem(
            "reference",
            "memtrial's SQLite store (FTS5, embeddings, entity graph, corrections), in process",
            SqliteMemoryStore.LANES,
            "",
            _open_reference,
            lambda: None,
            SqliteMemoryStore.ABSTENTION,
            _open_reference_scratch,
        ),
        MemorySystem(
            "chroma",
            "Chroma as shipped: embedded PersistentClient, one collection per realm, collection.query ranking, no floor",
            ChromaMemoryAdapter.LANES,
            "pip install -e '.[chroma]'",
            ChromaMemoryAdapter,
            chroma_unavailable,
            ChromaMemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "chroma+memtrial-keyword",
            "variant: Chroma's storage with memtrial's keyword lane, RRF fusion and similarity floor (not Chroma as shipped)",
            ChromaKeywordVariant.LANES,
            "pip install -e '.[chroma]'",
            ChromaKeywordVariant,
            chroma_unavailable,
            ChromaKeywordVariant.ABSTENTION,
        ),
        MemorySystem(
            "lancedb",
            "LanceDB as shipped: embedded, one table per realm, its FTS / vector / hybrid (RRF) queries with a prefilter",
            LanceDbMemoryAdapter.LANES,
            "pip install -e '.[lancedb]'",
            LanceDbMemoryAdapter,
            lancedb_unavailable,
            LanceDbMemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "sqlite-vec",
            "sqlite-vec as shipped: one vec0 table per realm (cosine), its exact KNN query with a metadata filter, no floor",
            SqliteVecMemoryAdapter.LANES,
            "pip install -e '.[sqlite-vec]'",
            SqliteVecMemoryAdapter,
            sqlite_vec_unavailable,
            SqliteVecMemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "qdrant",
            "Qdrant as shipped in embedded local mode (QdrantClient(path=...), no server): one collection per realm, query_points, no threshold",
            QdrantMemoryAdapter.LANES,
            "pip install -e '.[qdrant]'",
            QdrantMemoryAdapter,
            qdrant_unavailable,
            QdrantMemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "txtai",
            "txtai as shipped: one Embeddings index per realm, hybrid (BM25 + dense) with content, SQL search",
            TxtaiMemoryAdapter.LANES,
            "pip install -e '.[txtai]'",
            TxtaiMemoryAdapter,
            txtai_unavailable,
            TxtaiMemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "mem0",
            "mem0 (mem0ai) as shipped with infer=False: local qdrant, realms as user ids, its search and 0.1 threshold; local embedder = bundled MiniLM",
            Mem0MemoryAdapter.LANES,
            "pip install -e '.[mem0]'",
            Mem0MemoryAdapter,
            mem0_unavailable,
            Mem0MemoryAdapter.ABSTENTION,
        ),
        MemorySystem(
            "mcp-memory",
            "@modelcontextprotocol/server-memory (npm) over MCP stdio as an agent calls it: one search_nodes call, the server's order",
            McpSearchNodesAdapter.LANES,
            "bash scripts/install_mcp_memory.sh",
            _open_mcp_memory,
            mcp_memory_unavailable,
            McpSearchNodesAdapter.ABSTENTION,
        ),
        MemorySystem(
            "mcp-memory+memtrial-terms",
            "variant: the MCP memory server's storage with memtrial's per-term search_nodes calls, IDF ranking and entity graph",
            McpMemoryAdapter.LANES,
            "bash scripts/install_mcp_memory.sh",
            _open_mcp_memory_terms,
            mcp_memory_unavailable,
            McpMemoryAdapter.ABSTENTION,
        ),
    )
}
"""Known memory systems by name."""


def get_memory_system(name: str) -> MemorySystem:
    """The memory system called `name`; raises UnknownMemorySystemError listing the known names."""
    system = MEMORY_SYSTEMS.get(name)
    if system is None:
        raise UnknownMemorySystemError(
            f"memory system: unknown name {name!r}; known memory systems are {', '.join(sorted(MEMORY_SYSTEMS))}"
        )
    return system


def memory_system_unavailable(name: str) -> str | None:
    """None when memory system `name` can run here, else the reason (for skip messages)."""
    return get_memory_system(name).unavailable()


def open_memory_system(name: str, folder: Path | str, *, embedder: str = "hashed", scratch: bool = False) -> MemoryAdapter:
    """A new adapter of memory system `name` keeping its data under `folder`; with `scratch`, data only
    this process reads and then throws away (a suite's scratch store): not synced to disk per commit
    where the system has that mode (`MemorySystem.scratch_opener`).

    Raises UnknownMemorySystemError, AdapterUnavailableError (with the install command), and the
    adapter's own errors (UnknownEmbedderError, EmbedderUnavailableError, MemoryStoreError).
    """
    system = get_memory_system(name)
    reason = system.unavailable()
    if reason:
        raise AdapterUnavailableError(reason)
    opener = system.scratch_opener if scratch and system.scratch_opener is not None else system.opener
    return opener(Path(folder), embedder)
