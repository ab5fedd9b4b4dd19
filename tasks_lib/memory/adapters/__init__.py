"""Adapters that put third-party memory systems behind `MemoryAdapter`, found by name in `tasks_lib.memory.registry`.

- `chroma.ChromaMemoryAdapter`: Chroma, embedded (`chromadb`, the `chroma` extra); lanes keyword, semantic.
- `mcp_memory.McpMemoryAdapter`: the MCP knowledge-graph memory server from npm
  (`@modelcontextprotocol/server-memory`, installed by `scripts/install_mcp_memory.sh`) over
  stdio; lanes keyword, graph.

Each passes the conformance suite in `tasks_lib.memory.conformance`. Their third-party parts
are imported or started only when an adapter is opened, so this package imports without them.
"""

from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter, chroma_unavailable
from tasks_lib.memory.adapters.common import AdapterUnavailableError

__all__ = ["AdapterUnavailableError", "ChromaMemoryAdapter", "chroma_unavailable"]
