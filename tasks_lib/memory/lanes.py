"""The four retrieval lanes of the reference store and their reciprocal rank fusion.

Each lane reads live memories of one realm and returns memory rows (`seq`) best first:

- `keyword`: SQLite FTS5 full-text match of the query's words (OR), ranked by BM25.
- `semantic`: cosine similarity of embeddings, above the embedder's `min_similarity`.
- `graph`: memories that mention an entity of the query (hop 0), then memories that share an
  entity with those (one hop, half weight).
- `corrections`: when the query matches a superseded memory (by words or entities), the live
  memory that replaced it; and live `correction` memories the query matches directly.

Superseded memories are never returned by any lane.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence

import numpy as np

from tasks_lib.memory.embeddings import Embedder, words
from tasks_lib.memory.entities import COMMON_WORDS, extract_entities

LANES: tuple[str, ...] = ("keyword", "semantic", "graph", "corrections")
"""Lanes of the reference store, in the order hits list them."""

RRF_K = 60
"""The constant of reciprocal rank fusion: a hit at rank r in a lane adds 1 / (RRF_K + r)."""

POOL = 50
"""Candidates each lane returns before fusion."""


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's non-common words, each quoted; None if none."""
    terms = sorted({w for w in words(query) if w not in COMMON_WORDS and len(w) > 1})
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


def _fts_rows(conn: sqlite3.Connection, realm: str, query: str, live_only: bool) -> list[int]:
    match = fts_query(query)
    if match is None:
        return []
    live = "AND m.superseded_by IS NULL" if live_only else ""
    rows = conn.execute(
        f"""SELECT m.seq FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
            WHERE memories_fts MATCH ? AND m.realm = ? {live}
            ORDER BY bm25(memories_fts), m.seq DESC LIMIT ?""",
        (match, realm, POOL),
    ).fetchall()
    return [r[0] for r in rows]


def keyword_lane(conn: sqlite3.Connection, realm: str, query: str) -> list[int]:
    """Live memories matching the query's words, by BM25."""
    return _fts_rows(conn, realm, query, live_only=True)


def semantic_lane(conn: sqlite3.Connection, realm: str, query_vector: np.ndarray, embedder: Embedder) -> list[int]:
    """Live memories by cosine similarity to the query, at least `embedder.min_similarity`."""
    rows = conn.execute("SELECT seq, vector FROM memories WHERE realm = ? AND superseded_by IS NULL", (realm,)).fetchall()
    if not rows:
        return []
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), embedder.dim)
    sims = matrix @ query_vector
    order = sorted(range(len(rows)), key=lambda i: (-float(sims[i]), -rows[i][0]))
    return [rows[i][0] for i in order if sims[i] >= embedder.min_similarity][:POOL]


def _entity_rows(conn: sqlite3.Connection, realm: str, entities: Sequence[str], live_only: bool) -> dict[int, int]:
    """seq -> number of the given entities it mentions."""
    if not entities:
        return {}
    marks = ",".join("?" * len(entities))
    live = "AND m.superseded_by IS NULL" if live_only else ""
    rows = conn.execute(
        f"""SELECT e.seq, COUNT(*) FROM entities e JOIN memories m ON m.seq = e.seq
            WHERE e.entity IN ({marks}) AND m.realm = ? {live} GROUP BY e.seq""",
        (*entities, realm),
    ).fetchall()
    return {seq: count for seq, count in rows}


def graph_lane(conn: sqlite3.Connection, realm: str, query: str) -> list[int]:
    """Memories naming a query entity, then their one-hop neighbours (shared entity), by weight."""
    seeds = sorted(extract_entities(query))
    direct = _entity_rows(conn, realm, seeds, live_only=True)
    if not direct:
        return []
    marks = ",".join("?" * len(direct))
    linked = [
        r[0]
        for r in conn.execute(f"SELECT DISTINCT entity FROM entities WHERE seq IN ({marks})", tuple(direct)).fetchall()
        if r[0] not in seeds
    ]
    scores = {seq: float(n) for seq, n in direct.items()}
    for seq, n in _entity_rows(conn, realm, linked, live_only=True).items():
        if seq not in direct:
            scores[seq] = 0.5 * n
    return sorted(scores, key=lambda s: (-scores[s], -s))[:POOL]


def corrections_lane(conn: sqlite3.Connection, realm: str, query: str) -> list[int]:
    """Live replacements of superseded memories the query matches, and matching live corrections."""
    matched = _fts_rows(conn, realm, query, live_only=False)
    by_entity = _entity_rows(conn, realm, sorted(extract_entities(query)), live_only=False)
    matched += [s for s in sorted(by_entity, key=lambda s: (-by_entity[s], -s)) if s not in matched]
    out: list[int] = []
    for seq in matched:
        row = conn.execute("SELECT kind, superseded_by FROM memories WHERE seq = ?", (seq,)).fetchone()
        kind, successor = row
        target: int | None = seq if (successor is None and kind == "correction") else None
        for _ in range(32):  # follow the chain of replacements to the live end
            if successor is None:
                break
            nxt = conn.execute("SELECT seq, superseded_by FROM memories WHERE id = ?", (successor,)).fetchone()
            if nxt is None:  # the replacement was forgotten
                break
            seq_next, successor = nxt
            target = seq_next if successor is None else None
        if target is not None and target not in out:
            out.append(target)
    return out[:POOL]


def fuse(ranked: dict[str, list[int]]) -> list[tuple[int, float, tuple[str, ...]]]:
    """Reciprocal rank fusion of per-lane rankings: (seq, score, lanes) best first, ties newest first."""
    scores: dict[int, float] = {}
    lanes: dict[int, list[str]] = {}
    for lane in LANES:
        for rank, seq in enumerate(ranked.get(lane, []), start=1):
            scores[seq] = scores.get(seq, 0.0) + 1.0 / (RRF_K + rank)
            lanes.setdefault(seq, []).append(lane)
    order = sorted(scores, key=lambda s: (-scores[s], -s))
    return [(seq, scores[seq], tuple(lanes[seq])) for seq in order]
