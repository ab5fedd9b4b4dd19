"""The four retrieval lanes of the reference store and their weighted score fusion.

Each lane reads live memories of one realm and returns `(seq, score)` pairs best first, with
scores normalised to at most 1 (keyword: 1 + SESSION_WEIGHT) so lanes can be added:

- `keyword`: SQLite FTS5 (porter stemming) match of the query's content words (OR; question and
  stop words dropped; personal pronouns rank but never match alone), ranked by BM25 over the
  memory's own text (speaker, text, timestamp) and, at CONTEXT_WEIGHT, the text of its
  neighbours in the same session. When memories carry a session, each one also gains SESSION_WEIGHT times the BM25 score of its whole session (a
  pooled document), so a turn from a session that is about the query outranks a stray match.
- `semantic`: cosine similarity of embeddings, above the embedder's `min_similarity`.
- `graph`: memories that mention an entity of the query (hop 0), then memories that share an
  entity with those (one hop, half weight).
- `corrections`: when the query matches a superseded memory (by words or entities), the live
  memory that replaced it; and live `correction` memories the query matches directly.

`fuse` adds each lane's scores times LANE_WEIGHTS; `speaker_focus` then favours memories spoken
by the one known speaker a query names, and `date_focus` memories dated in the period a query
names (see `dates`). Superseded memories are never returned by any lane.
"""

from __future__ import annotations

import re
import sqlite3
from collections.abc import Iterable, Sequence

import numpy as np

from tasks_lib.memory.embeddings import Embedder, words
from tasks_lib.memory.entities import COMMON_WORDS, extract_entities
from tasks_lib.memory.reference.dates import Period, in_window, parse_date

LANES: tuple[str, ...] = ("keyword", "semantic", "graph", "corrections")
"""Lanes of the reference store, in the order hits list them."""

LANE_WEIGHTS: dict[str, float] = {"keyword": 1.0, "semantic": 1.0, "graph": 0.25, "corrections": 1.0}
"""How much a lane's normalised score counts in the fused score."""

POOL = 100
"""Candidates each lane returns before fusion."""

CONTEXT_WEIGHT = 0.3
"""BM25 column weight of the neighbouring memories' text, relative to the memory's own text."""

SESSION_WEIGHT = 0.3
"""Share of its session's normalised BM25 score a memory adds to its keyword score."""

SESSION_POOL = 10
"""Best-scoring sessions whose every memory becomes a keyword candidate."""

SPEAKER_DAMPING = 0.35
"""Fraction of its fused score a memory loses when the query names another known speaker."""

DATE_BOOST = 0.5
"""Share of its fused score a memory gains when its timestamp falls in the period the query names."""

QUERY_STOP_WORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being below
    between both but by can cannot could did do does doing down during each few for from further had has
    have having he her here hers herself him himself his how i if in into is it its itself let me more
    most my myself no nor not of off on once only or other ought our ours ourselves out over own same she
    should so some such than that the their theirs them themselves then there these they this those
    through to too under until up very was we were what when where which while who whom why will with
    would you your yours yourself yourselves kind type sort likely might may also ever s t d ll re ve m""".split()
)
"""Words dropped from a query before keyword search (English stop words and question words)."""

PERSONAL_PRONOUNS = frozenset("i me my myself mine we us our ours you your yours".split())
"""Kept in queries although common: in personal memory they tell whose memory is asked about."""

_DROPPED = (QUERY_STOP_WORDS | COMMON_WORDS) - PERSONAL_PRONOUNS


def query_terms(query: str) -> list[str]:
    """The query's content words: lowercased, stop words dropped (personal pronouns kept), sorted, unique."""
    return sorted({w for w in words(query) if w not in _DROPPED and (len(w) > 1 or w in PERSONAL_PRONOUNS)})


def fts_query(query: str) -> str | None:
    """An FTS5 MATCH expression OR-ing the query's content words, each quoted; None if none.

    Personal pronouns are left out: they rank (see `ranking_query`) but never match on their own.
    """
    terms = [t for t in query_terms(query) if t not in PERSONAL_PRONOUNS]
    if not terms:
        return None
    return " OR ".join(f'"{t}"' for t in terms)


def ranking_query(query: str) -> str | None:
    """Like `fts_query`, but with the query's personal pronouns OR-ed in, for BM25 ranking."""
    terms = query_terms(query)
    return " OR ".join(f'"{t}"' for t in terms) if fts_query(query) else None


def _normalised(pairs: Iterable[tuple[int, float]]) -> list[tuple[int, float]]:
    """Scores divided by the best one (best first, ties newest first)."""
    ordered = sorted(pairs, key=lambda p: (-p[1], -p[0]))
    top = ordered[0][1] if ordered and ordered[0][1] > 0 else 1.0
    return [(seq, score / top) for seq, score in ordered]


def _fts_rows(conn: sqlite3.Connection, realm: str, query: str, live_only: bool) -> list[tuple[int, float]]:
    """(seq, positive BM25 score) of memories matching the query, best first."""
    match = fts_query(query)
    if match is None:
        return []
    live = "AND m.superseded_by IS NULL" if live_only else ""
    ranking = ranking_query(query)
    rows = conn.execute(
        f"""SELECT m.seq, -bm25(memories_fts, 1.0, {CONTEXT_WEIGHT}) AS s
            FROM memories_fts JOIN memories m ON m.seq = memories_fts.rowid
            WHERE memories_fts MATCH ? AND m.realm = ? {live}
            ORDER BY s DESC, m.seq DESC LIMIT ?""",
        (ranking, realm, POOL * 5),
    ).fetchall()
    if ranking == match:  # no pronoun in the query: every row matched a content word
        return [(seq, float(score)) for seq, score in rows[:POOL]]
    content = {r[0] for r in conn.execute("SELECT rowid FROM memories_fts WHERE memories_fts MATCH ?", (match,))}
    return [(seq, float(score)) for seq, score in rows if seq in content][:POOL]


def _session_scores(conn: sqlite3.Connection, realm: str, query: str) -> dict[int, float]:
    """Session row id -> its pooled document's BM25 score divided by the best session's."""
    match = fts_query(query)
    if match is None:
        return {}
    ranking = ranking_query(query)
    rows = conn.execute(
        """SELECT s.id, -bm25(sessions_fts) FROM sessions_fts JOIN sessions s ON s.id = sessions_fts.rowid
           WHERE sessions_fts MATCH ? AND s.realm = ?""",
        (ranking, realm),
    ).fetchall()
    if ranking != match:  # a pronoun in the query: keep sessions matching a content word
        content = {r[0] for r in conn.execute("SELECT rowid FROM sessions_fts WHERE sessions_fts MATCH ?", (match,))}
        rows = [(sid, score) for sid, score in rows if sid in content]
    return dict(_normalised((sid, float(score)) for sid, score in rows))


def keyword_lane(conn: sqlite3.Connection, realm: str, query: str) -> list[tuple[int, float]]:
    """Live memories by BM25 (own text plus neighbours), each plus its session's pooled BM25.

    Memories of the SESSION_POOL best sessions join the candidates even without a word match.
    """
    scores = dict(_normalised(_fts_rows(conn, realm, query, live_only=True)))
    sessions = _session_scores(conn, realm, query)
    if sessions:
        best = sorted(sessions, key=lambda s: (-sessions[s], -s))[:SESSION_POOL]
        rows = conn.execute(
            f"""SELECT seq, session_id FROM memories WHERE realm = ? AND superseded_by IS NULL AND session_id IS NOT NULL
                AND (session_id IN ({",".join("?" * len(best))}) OR seq IN ({",".join("?" * len(scores))}))""",
            (realm, *best, *scores),
        ).fetchall()
        for seq, sid in rows:
            scores[seq] = scores.get(seq, 0.0) + SESSION_WEIGHT * sessions.get(sid, 0.0)
    return sorted(scores.items(), key=lambda p: (-p[1], -p[0]))[:POOL]


def live_vectors(conn: sqlite3.Connection, realm: str, embedder: Embedder) -> tuple[list[int], np.ndarray]:
    """The seqs of the live memories of `realm` and their embeddings, one row each."""
    rows = conn.execute("SELECT seq, vector FROM memories WHERE realm = ? AND superseded_by IS NULL", (realm,)).fetchall()
    matrix = np.frombuffer(b"".join(r[1] for r in rows), dtype=np.float32).reshape(len(rows), embedder.dim)
    return [r[0] for r in rows], matrix


def semantic_lane(
    vectors: tuple[list[int], np.ndarray], query_vector: np.ndarray, embedder: Embedder
) -> list[tuple[int, float]]:
    """Live memories (from `live_vectors`) by cosine similarity to the query, at least `embedder.min_similarity`."""
    seqs, matrix = vectors
    if not seqs:
        return []
    sims = matrix @ query_vector
    keep = np.flatnonzero(sims >= embedder.min_similarity)
    order = sorted(keep.tolist(), key=lambda i: (-float(sims[i]), -seqs[i]))[:POOL]
    return [(seqs[i], float(sims[i])) for i in order]


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


def live_entities(conn: sqlite3.Connection, realm: str) -> dict[str, frozenset[int]]:
    """Entity -> seqs of the live memories of `realm` that mention it (the graph lane's index)."""
    rows = conn.execute(
        """SELECT e.entity, e.seq FROM entities e JOIN memories m ON m.seq = e.seq
           WHERE m.realm = ? AND m.superseded_by IS NULL""",
        (realm,),
    ).fetchall()
    index: dict[str, set[int]] = {}
    for entity, seq in rows:
        index.setdefault(entity, set()).add(seq)
    return {entity: frozenset(seqs) for entity, seqs in index.items()}


def graph_lane(index: dict[str, frozenset[int]], query: str) -> list[tuple[int, float]]:
    """Memories naming a query entity, then their one-hop neighbours (shared entity), by weight.

    `index` is `live_entities` of the realm. The hop is skipped when the direct matches already
    fill the pool.
    """
    seeds = sorted(extract_entities(query))
    direct: dict[int, int] = {}
    for entity in seeds:
        for seq in index.get(entity, ()):
            direct[seq] = direct.get(seq, 0) + 1
    if not direct:
        return []
    scores = {seq: float(n) for seq, n in direct.items()}
    if len(direct) < POOL:
        linked = {entity for entity, seqs in index.items() if entity not in seeds and not seqs.isdisjoint(direct)}
        hop: dict[int, int] = {}
        for entity in linked:
            for seq in index[entity]:
                if seq not in direct:
                    hop[seq] = hop.get(seq, 0) + 1
        scores.update({seq: 0.5 * n for seq, n in hop.items()})
    return _normalised(scores.items())[:POOL]


def corrections_lane(conn: sqlite3.Connection, realm: str, query: str) -> list[tuple[int, float]]:
    """Live replacements of superseded memories the query matches, and matching live corrections."""
    matched = [seq for seq, _ in _fts_rows(conn, realm, query, live_only=False)]
    by_entity = _entity_rows(conn, realm, sorted(extract_entities(query)), live_only=False)
    matched += [s for s in sorted(by_entity, key=lambda s: (-by_entity[s], -s)) if s not in matched]
    if not matched:
        return []
    marks = ",".join("?" * len(matched))
    state = {
        seq: (kind, successor)
        for seq, kind, successor in conn.execute(f"SELECT seq, kind, superseded_by FROM memories WHERE seq IN ({marks})", matched)
    }
    out: list[int] = []
    for seq in matched:
        kind, successor = state[seq]
        if successor is None and kind != "correction":
            continue
        target: int | None = seq if successor is None else None
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
    return [(seq, 1.0 / rank) for rank, seq in enumerate(out[:POOL], start=1)]


def fuse(ranked: dict[str, list[tuple[int, float]]]) -> list[tuple[int, float, tuple[str, ...]]]:
    """Weighted sum of the lanes' normalised scores: (seq, score, lanes) best first, ties newest first."""
    scores: dict[int, float] = {}
    lanes: dict[int, list[str]] = {}
    for lane in LANES:
        for seq, score in ranked.get(lane, []):
            scores[seq] = scores.get(seq, 0.0) + LANE_WEIGHTS[lane] * max(score, 0.0)
            lanes.setdefault(seq, []).append(lane)
    order = sorted(scores, key=lambda s: (-scores[s], -s))
    return [(seq, scores[seq], tuple(lanes[seq])) for seq in order]


def named_speaker(query: str, speakers: Iterable[str]) -> str | None:
    """The one known speaker whose name appears in `query` as whole words (casefolded), else None."""
    text = " ".join(words(query))
    found = {s for s in speakers if s and re.search(rf"(?<!\w){re.escape(' '.join(words(s)))}(?!\w)", text)}
    return found.pop() if len(found) == 1 else None


def speaker_focus(
    fused: list[tuple[int, float, tuple[str, ...]]], speaker_of: dict[int, str | None], speaker: str
) -> list[tuple[int, float, tuple[str, ...]]]:
    """Damp memories spoken by someone other than `speaker` by SPEAKER_DAMPING and re-sort."""
    want = " ".join(words(speaker))
    out = []
    for seq, score, lanes in fused:
        other = speaker_of.get(seq)
        if other is not None and " ".join(words(other)) != want:
            score *= 1.0 - SPEAKER_DAMPING
        out.append((seq, score, lanes))
    return sorted(out, key=lambda r: (-r[1], -r[0]))


def date_focus(
    fused: list[tuple[int, float, tuple[str, ...]]], timestamp_of: dict[int, str | None], period: Period
) -> list[tuple[int, float, tuple[str, ...]]]:
    """Raise memories whose timestamp's day is in `period` (widened, see `dates.in_window`) by DATE_BOOST and re-sort."""
    out = []
    for seq, score, lanes in fused:
        stamp = timestamp_of.get(seq)
        if stamp is not None and in_window(parse_date(stamp), period):
            score *= 1.0 + DATE_BOOST
        out.append((seq, score, lanes))
    return sorted(out, key=lambda r: (-r[1], -r[0]))
