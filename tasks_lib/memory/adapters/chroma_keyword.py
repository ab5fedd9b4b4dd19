"""`chroma+memtrial-keyword`: Chroma's storage with memtrial's retrieval layered on top, a named variant.

This is not Chroma as shipped (that is `chroma.ChromaMemoryAdapter`): it adds a keyword lane that
is memtrial's own (stemmed query terms, Chroma's `where_document` `$regex` only to find
candidates, memtrial's IDF ranking), fuses it with Chroma's `collection.query` by memtrial's
reciprocal rank fusion, and drops semantic hits below the embedder's `min_similarity`, a floor
Chroma does not have. It is kept to measure what that helping layer adds; figures from it are
memtrial's retrieval over Chroma's storage, and the report names it so.
"""

from __future__ import annotations

from typing import Any, ClassVar

from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter
from tasks_lib.memory.adapters.common import (
    fuse,
    hit_from_record,
    query_terms,
    rank_by_terms,
    text_has_term,
)


class ChromaKeywordVariant(ChromaMemoryAdapter):
    """Chroma storage, memtrial keyword lane + RRF + similarity floor (lanes: keyword, semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("keyword", "semantic")
    ABSTENTION: ClassVar[str | None] = "keyword: only memories sharing a query term; semantic: cosine below the embedder's min_similarity is dropped (memtrial's floor)"

    def _keyword(self, collection: Any, query: str, seen: dict[str, tuple[str, dict[str, Any]]]) -> list[str]:
        terms = query_terms(query)
        if not terms:
            return []
        patterns: list[dict[str, Any]] = [{"$regex": r"(?i)(?:^|[^\p{L}\p{N}])" + term} for term in terms]
        document_filter = patterns[0] if len(patterns) == 1 else {"$or": patterns}
        result = collection.get(where={"superseded_by": ""}, where_document=document_filter, include=["documents", "metadatas"])
        docs = {}
        for mem_id, text, meta in zip(result["ids"], result["documents"], result["metadatas"]):
            docs[mem_id] = text
            seen[mem_id] = (text, dict(meta))
        matches = {term: [i for i, text in docs.items() if text_has_term(text, term)] for term in terms}
        return rank_by_terms(matches, collection.count(), {i: int(seen[i][1]["seq"]) for i in docs})

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        collection = self._collection(realm)
        seen: dict[str, tuple[str, dict[str, Any]]] = {}
        ranked: dict[str, list[str]] = {}
        if "keyword" in lanes:
            ranked["keyword"] = self._keyword(collection, query, seen)
        if "semantic" in lanes:
            ranked["semantic"] = self._semantic(collection, query, seen, self.embedder.min_similarity)
        newer = {i: int(v[1]["seq"]) for i, v in seen.items()}
        return [hit_from_record(i, seen[i][0], seen[i][1], score, hit_lanes) for i, score, hit_lanes in fuse(ranked, self.LANES, newer)[:k]]
