"""Adapters that put third-party memory systems behind `MemoryAdapter`, found by name in `tasks_lib.memory.registry`.

Each measures its system as shipped (docs/ADAPTERS.md); memtrial's helping layers are named variants.

- `chroma.ChromaMemoryAdapter` (`chroma`): Chroma embedded, `collection.query`; lane semantic.
- `chroma_keyword.ChromaKeywordVariant` (`chroma+memtrial-keyword`): variant, memtrial keyword lane + RRF + floor.
- `lancedb.LanceDbMemoryAdapter` (`lancedb`): LanceDB FTS / vector / RRF hybrid; lanes keyword, semantic.
- `sqlite_vec.SqliteVecMemoryAdapter` (`sqlite-vec`): a vec0 table per realm, its exact cosine KNN query; lane semantic.
- `qdrant.QdrantMemoryAdapter` (`qdrant`): Qdrant local mode (no server), `query_points`; lane semantic.
- `txtai.TxtaiMemoryAdapter` (`txtai`): txtai hybrid index with content; lane hybrid.
- `mem0.Mem0MemoryAdapter` (`mem0`): mem0 open source, `infer=False`, embedded qdrant; lane semantic.
- `mcp_search_nodes.McpSearchNodesAdapter` (`mcp-memory`): the MCP knowledge-graph memory server from npm
  (`@modelcontextprotocol/server-memory`, `scripts/install_mcp_memory.sh`), one `search_nodes` call; lane keyword.
- `mcp_memory.McpMemoryAdapter` (`mcp-memory+memtrial-terms`): variant, per-term search, IDF ranking, graph lane.

Each passes the conformance suite in `tasks_lib.memory.conformance`. Their third-party parts
are imported or started only when an adapter is opened, so this package imports without them.
"""

from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter, chroma_unavailable
from tasks_lib.memory.adapters.common import AdapterUnavailableError

__all__ = ["AdapterUnavailableError", "ChromaMemoryAdapter", "chroma_unavailable"]
