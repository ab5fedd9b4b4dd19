"""`mcp-memory`: the MCP knowledge-graph memory server searched the way an agent calls it.

The write path is `mcp_memory.McpMemoryAdapter`'s (a memory is an entity named by its id, its
text the observation; the same realm servers and files). The read path is one `search_nodes`
call with the whole query, as an agent holding the server's tool would make it: the server
matches the query as one case-insensitive substring of an entity's name, type or observations
and returns the matches unranked, in its file's order. Superseded memories are dropped, hits keep
the server's order, and the score is 1 / position (the server gives none). It abstains by
construction: no substring match, no hit.

memtrial's helping layer (one call per stemmed term, IDF ranking, an entity graph lane) is the
named variant `mcp-memory+memtrial-terms` (`mcp_memory.McpMemoryAdapter`).
"""

from __future__ import annotations

from typing import ClassVar

from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.adapters.mcp_memory import MARKER, McpMemoryAdapter, is_memory


class McpSearchNodesAdapter(McpMemoryAdapter):
    """The MCP memory server as an agent uses it: one `search_nodes` call, its order (lane: keyword)."""

    LANES: ClassVar[tuple[str, ...]] = ("keyword",)
    ABSTENTION: ClassVar[str | None] = "search_nodes returns only entities containing the whole query as a substring"

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        result = self._call(realm, "search_nodes", {"query": query})
        dead = {r["from"] for r in result["relations"] if r["to"] == MARKER}
        live = [e for e in result["entities"] if is_memory(e) and e["name"] not in dead]
        return [MemoryHit(id=e["name"], text=e["observations"][0], score=1.0 / position, lanes=("keyword",), kind=e["entityType"])
                for position, e in enumerate(live[:k], start=1)]
