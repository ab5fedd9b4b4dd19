"""Retrieval benchmarks on real conversations: LoCoMo and LongMemEval, scored without any LLM.

Every conversation (LoCoMo) or record (LongMemEval) gets its own store file, so nothing from
one can be recalled for another. Each turn is one memory: its text (plus ` [shares a photo: ...]`
when LoCoMo gives an image caption, as the LoCoMo paper does), with speaker, session date and
session as metadata. The question is the recall query, as is: no answer or evidence is used at
index or query time.

Scores, for the top-k recalled turns of each question:
- turn recall_any@k: any of them is an evidence turn;
- session recall_any@k: any of them belongs to a session that holds an evidence turn;
- distinct-session recall_any@k (reported beside it): the turn ranking is read as a session
  ranking (each session at its best turn's rank) and any of the first k sessions is an evidence
  session, the way LongMemEval scores session retrieval from a turn index.

LoCoMo is read by the public suite's loader (`locomo.read_locomo`): its quirk rules, evidence
cleaning (counted in `locomo.EvidenceCounts`) and category table (`locomo.CATEGORY_NAMES`) apply
here unchanged. Categories 1-4 are scored; category 5 (adversarial) has no answer to retrieve.
"""

from __future__ import annotations

import json
import re
import sqlite3
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks_lib.memory.adapter import MemoryItem
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.suites.public.groups import EvalGroup, EvalTurn
from tasks_lib.suites.public.locomo import DEFAULT_CATEGORIES, EvidenceCounts, read_locomo

KS: tuple[int, ...] = (1, 3, 5, 10)
"""Cut-offs scored."""


@dataclass(frozen=True)
class Question:
    """One scored question: its text, category and evidence turn ids / session names."""

    text: str
    category: str
    evidence_turns: frozenset[str]
    evidence_sessions: frozenset[str]


@dataclass(frozen=True)
class Conversation:
    """One isolated memory: its turns (in order) and its scored questions."""

    conv_id: str
    position: int
    turns: tuple[EvalTurn, ...]
    questions: tuple[Question, ...]


def load_locomo(path: Path, categories: Sequence[int] = DEFAULT_CATEGORIES) -> tuple[list[Conversation], EvidenceCounts]:
    """LoCoMo conversations as `locomo.read_locomo` reads them, and its evidence counts."""
    read = read_locomo(Path(path), categories)
    return [_conversation(position, group) for position, group in enumerate(read.groups)], read.evidence


def _conversation(position: int, group: EvalGroup) -> Conversation:
    session_of = {t.turn_id: t.session for t in group.turns}
    questions = tuple(
        Question(q.text, q.slice, q.relevant_turns, frozenset(session_of[t] for t in q.relevant_turns)) for q in group.questions
    )
    return Conversation(group.group_id, position, group.turns, questions)


def load_longmemeval(paths: Sequence[Path]) -> list[Conversation]:
    """LongMemEval records (deduplicated by question_id) as conversations of one question each.

    Evidence turns are those with `has_answer`; evidence sessions are `answer_session_ids`.
    Abstention records (`_abs`) and records without an evidence turn are left out.
    """
    seen: dict[str, Conversation] = {}
    for path in paths:
        for rec in json.loads(Path(path).read_text(encoding="utf-8")):
            qid = rec["question_id"]
            if qid in seen or qid.endswith("_abs"):
                continue
            turns, evidence = [], set()
            for sid, date, session in zip(rec["haystack_session_ids"], rec["haystack_dates"], rec["haystack_sessions"]):
                for i, t in enumerate(session):
                    turn_id = f"{sid}:{i}"
                    turns.append(EvalTurn(turn_id, sid, t["role"], t["content"], date))
                    if t.get("has_answer"):
                        evidence.add(turn_id)
            if not evidence:
                continue
            question = Question(rec["question"], rec["question_type"], frozenset(evidence), frozenset(rec["answer_session_ids"]))
            seen[qid] = Conversation(qid, len(seen), tuple(turns), (question,))
    return list(seen.values())


@dataclass
class QuestionResult:
    """Which cut-offs one question hit."""

    conv_id: str
    category: str
    turn: dict[int, bool]
    session: dict[int, bool]
    distinct_session: dict[int, bool]


def score_ranking(conv: Conversation, question: Question, ranked: Sequence[str]) -> QuestionResult:
    """Score one ranking of turn ids (best first) at every cut-off in KS."""
    session_of = {t.turn_id: t.session for t in conv.turns}
    sessions = [session_of[t] for t in ranked]
    distinct = list(dict.fromkeys(sessions))
    return QuestionResult(
        conv.conv_id,
        question.category,
        {k: any(t in question.evidence_turns for t in ranked[:k]) for k in KS},
        {k: any(s in question.evidence_sessions for s in sessions[:k]) for k in KS},
        {k: any(s in question.evidence_sessions for s in distinct[:k]) for k in KS},
    )


Ranker = Callable[[str], list[str]]


@dataclass
class SystemRun:
    """One system's results over a set of conversations, with its costs."""

    name: str
    results: list[QuestionResult] = field(default_factory=list)
    index_seconds: float = 0.0
    query_seconds: list[float] = field(default_factory=list)
    storage_bytes: int = 0

    def recall(self, kind: str, k: int, keep: Callable[[QuestionResult], bool] = lambda r: True) -> float:
        """Mean of `kind` (turn, session, distinct_session) recall_any@k over the kept questions."""
        rows = [getattr(r, kind)[k] for r in self.results if keep(r)]
        return sum(rows) / len(rows) if rows else float("nan")

    def latency_ms(self, q: float) -> float:
        """The q-quantile (0.5, 0.95) of recall latency, in milliseconds."""
        if not self.query_seconds:
            return float("nan")
        return 1000 * statistics.quantiles(self.query_seconds, n=100, method="inclusive")[int(q * 100) - 1]


def run_store(convs: Sequence[Conversation], workdir: Path, embedder: str, name: str = "memtrial") -> SystemRun:
    """Index each conversation into its own reference store and recall every question (k=10)."""
    run = SystemRun(name)
    for conv in convs:
        turn_of: dict[str, str] = {}
        store = SqliteMemoryStore(workdir / f"{name}-{conv.conv_id}.sqlite", embedder)
        realm = "bench:" + re.sub(r"[^a-z0-9_-]", "-", conv.conv_id.lower())
        store.create_realm(realm)
        started = time.perf_counter()
        for session in dict.fromkeys(t.session for t in conv.turns):
            batch = [t for t in conv.turns if t.session == session]
            ids = store.remember(
                realm, [MemoryItem(text=t.text, speaker=t.speaker, timestamp=t.timestamp, session=t.session) for t in batch]
            )
            turn_of.update(zip(ids, (t.turn_id for t in batch)))
        run.index_seconds += time.perf_counter() - started
        for question in conv.questions:
            started = time.perf_counter()
            hits = store.recall(realm, question.text, max(KS))
            run.query_seconds.append(time.perf_counter() - started)
            run.results.append(score_ranking(conv, question, [turn_of[h.id] for h in hits]))
        run.storage_bytes += store.accounting().storage_bytes
        store.close()
    return run


def run_fts_baseline(convs: Sequence[Conversation]) -> SystemRun:
    """Plain SQLite FTS5 BM25: turn text only, default tokenizer, the question's words OR-ed, no stop list."""
    run = SystemRun("fts5-bm25")
    for conv in convs:
        db = sqlite3.connect(":memory:")
        started = time.perf_counter()
        db.execute("CREATE VIRTUAL TABLE t USING fts5(text)")
        db.executemany("INSERT INTO t(rowid, text) VALUES (?, ?)", [(i, t.text) for i, t in enumerate(conv.turns)])
        run.index_seconds += time.perf_counter() - started
        for question in conv.questions:
            started = time.perf_counter()
            terms = sorted(set(re.findall(r"[^\W_]+", question.text.casefold())))
            rows = db.execute(
                "SELECT rowid FROM t WHERE t MATCH ? ORDER BY bm25(t), rowid LIMIT ?", (" OR ".join(f'"{w}"' for w in terms), max(KS))
            ).fetchall() if terms else []
            run.query_seconds.append(time.perf_counter() - started)
            run.results.append(score_ranking(conv, question, [conv.turns[r[0]].turn_id for r in rows]))
        db.close()
    return run
