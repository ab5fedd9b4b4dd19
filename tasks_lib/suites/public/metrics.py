"""Ranked-retrieval metrics with LongMemEval's official definitions, and their aggregation.

The per-question functions reproduce LongMemEval's retrieval evaluation (`src/retrieval/
eval_utils.py` at xiaowu0162/LongMemEval) on the same ranking, written over ids instead of
corpus indices:

- `recall_any@k`: 1 if any relevant id is among the top k, else 0 (0 when nothing is relevant);
- `recall_all@k`: 1 if every relevant id is among the top k, else 0 (1 when nothing is relevant);
- `ndcg@k`: binary relevance; DCG = rel_1 + sum_{i>=2} rel_i / log2(i) (so ranks 1 and 2 both
  weigh 1, as upstream); the ideal DCG is that of the corpus's relevances sorted, cut at k;
  0 when nothing in the corpus is relevant.

Session levels (`LEVEL_DEFINITIONS`), for both datasets:
- `session`, the official one: turn ids become session ids after upstream's relabelling
  (`official_sessions`: a non-evidence turn of an answer session is read as a distinct `noans`
  session, so it does not retrieve its session); k grows until the top k turns hold k distinct
  sessions (or the corpus ends), then the three metrics above are computed on the session ids
  with that effective k (upstream's `evaluate_retrieval_turn2session`).
- `session_any_turn`: the same grown k, without the relabelling: any turn of an evidence session
  retrieves it (LoCoMo's `session` level before issue 17; not upstream's).
- `session_of_top_turns`: the sessions of the top k turns (k not grown, no relabelling) hold any /
  all evidence sessions: memtrial issue #4's session-level target.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

KS: tuple[int, ...] = (1, 3, 5, 10)
"""Default cut-offs."""

LEVELS: tuple[str, ...] = ("turn", "session", "session_any_turn", "session_of_top_turns")
"""Score levels, in report order."""

OFFICIAL_SESSION_LEVEL = "session"
"""The session level that is LongMemEval's official session metric."""

LEVEL_DEFINITIONS: dict[str, str] = {
    "turn": "turn ids: an evidence turn among the top k (LongMemEval's evaluate_retrieval)",
    "session": (
        "official: LongMemEval's turn-to-session reading (evaluate_retrieval_turn2session, k grown to k distinct sessions) "
        "after its relabelling: a non-evidence turn of an answer session is a distinct noans session and does not retrieve it"
    ),
    "session_any_turn": (
        "not official: the same grown-k turn-to-session reading without the relabelling, so any turn of an evidence "
        "session retrieves it (LoCoMo's session level before issue 17)"
    ),
    "session_of_top_turns": "not official: the sessions of the top k turns (k not grown, no relabelling) hold any / all evidence sessions (issue #4's target)",
}
"""What each level reads, as stored in a result and printed by the CLI."""

NOANS_PREFIX = "noans:"
"""Prefix of the session id a relabelled turn is read under."""

METRICS: tuple[str, ...] = ("recall_any", "recall_all", "ndcg")
"""Metrics per level (`session_of_top_turns` has no ndcg)."""


def dcg(relevances: Sequence[float], k: int) -> float:
    """Upstream's DCG: the first relevance undiscounted, the i-th (i >= 2) divided by log2(i)."""
    rel = list(relevances)[:k]
    if not rel:
        return 0.0
    return float(rel[0]) + sum(r / math.log2(i) for i, r in enumerate(rel[1:], start=2))


def ndcg(ranked: Sequence[str], relevant: Iterable[str], corpus: Sequence[str], k: int) -> float:
    """nDCG@k of `ranked` ids against `relevant`, ideal DCG from the relevant entries of `corpus`."""
    wanted = set(relevant)
    ideal = dcg(sorted((1.0 if c in wanted else 0.0 for c in corpus), reverse=True), k)
    if ideal == 0:
        return 0.0
    return dcg([1.0 if r in wanted else 0.0 for r in ranked[:k]], k) / ideal


def evaluate_retrieval(ranked: Sequence[str], relevant: Iterable[str], corpus: Sequence[str], k: int) -> tuple[float, float, float]:
    """(recall_any, recall_all, ndcg) at k, upstream's `evaluate_retrieval` on ids."""
    wanted = list(dict.fromkeys(relevant))
    top = set(ranked[:k])
    return float(any(r in top for r in wanted)), float(all(r in top for r in wanted)), ndcg(ranked, wanted, corpus, k)


def turn_to_session(
    ranked: Sequence[str], relevant: Iterable[str], corpus: Sequence[str], session_of: Mapping[str, str], k: int
) -> tuple[float, float, float]:
    """(recall_any, recall_all, ndcg) at k at session level, upstream's `evaluate_retrieval_turn2session`."""
    sessions = [session_of[t] for t in ranked]
    corpus_sessions = [session_of[t] for t in corpus]
    wanted = list(dict.fromkeys(session_of[t] for t in relevant))
    effective = k
    while effective <= len(corpus_sessions) and len(set(sessions[:effective])) < k:
        effective += 1
    return evaluate_retrieval(sessions, wanted, corpus_sessions, effective)


def official_sessions(session_of: Mapping[str, str], relevant: Iterable[str]) -> dict[str, str]:
    """Each turn's session as LongMemEval's official session level reads it for one question.

    Upstream (xiaowu0162/LongMemEval, `src/retrieval/run_retrieval.py`, `process_item_flat_index`
    at turn granularity) gives a turn of an answer session the id `<session>_<n>` when it has
    `has_answer`, and otherwise `<session>_<n>` with `answer` replaced by `noans`;
    `evaluate_retrieval_turn2session` (`src/retrieval/eval_utils.py`) then strips the turn number,
    so a non-evidence turn of an answer session counts as a distinct, non-relevant `noans` session.
    Here the evidence turns are `relevant` (per question, so it applies to LoCoMo's conversations
    too): a turn not in `relevant` whose session holds a relevant turn is read as
    `noans:<session>`; every other turn keeps its session.
    """
    wanted = frozenset(relevant)
    answer_sessions = {session_of[t] for t in wanted}
    return {
        turn: (NOANS_PREFIX + session if session in answer_sessions and turn not in wanted else session)
        for turn, session in session_of.items()
    }


def short_ranking(ranked: Sequence[str], corpus: Sequence[str], official: Mapping[str, str], k: int) -> bool:
    """True when the official session level at k may read past the end of `ranked` and so differ from upstream's.

    Upstream ranks the whole corpus and grows k until k distinct sessions (or the corpus ends);
    a ranking shorter than the corpus holding fewer than k distinct sessions, even one that
    covers every session, stops where upstream's would go on.
    """
    return len(ranked) < len(corpus) and len({official[t] for t in ranked}) < k


def session_of_top_turns(ranked: Sequence[str], relevant: Iterable[str], session_of: Mapping[str, str], k: int) -> tuple[float, float]:
    """(any, all): the sessions of the top k turns hold any / all sessions of the relevant turns."""
    wanted = {session_of[t] for t in relevant}
    top = {session_of[t] for t in ranked[:k]}
    return float(bool(wanted & top)), float(wanted <= top)


@dataclass(frozen=True)
class QuestionScores:
    """One question's scores: `values[(level, metric, k)]`."""

    group_id: str
    question_id: str
    slice: str
    values: Mapping[tuple[str, str, int], float]


def score_question(
    group_id: str,
    question_id: str,
    slice_name: str,
    ranked: Sequence[str],
    relevant: Iterable[str],
    corpus: Sequence[str],
    session_of: Mapping[str, str],
    ks: Sequence[int] = KS,
) -> QuestionScores:
    """Every level, metric and cut-off for one ranking of turn ids (best first); `session_of` gives each turn's own session."""
    wanted = frozenset(relevant)
    official = official_sessions(session_of, wanted)
    values: dict[tuple[str, str, int], float] = {}
    for k in ks:
        for level, triple in (
            ("turn", evaluate_retrieval(ranked, wanted, corpus, k)),
            ("session", turn_to_session(ranked, wanted, corpus, official, k)),
            ("session_any_turn", turn_to_session(ranked, wanted, corpus, session_of, k)),
        ):
            values.update({(level, m, k): v for m, v in zip(METRICS, triple)})
        any_, all_ = session_of_top_turns(ranked, wanted, session_of, k)
        values[("session_of_top_turns", "recall_any", k)] = any_
        values[("session_of_top_turns", "recall_all", k)] = all_
    return QuestionScores(group_id, question_id, slice_name, values)


def mean_scores(rows: Sequence[QuestionScores], keep: Callable[[QuestionScores], bool] = lambda r: True) -> dict[tuple[str, str, int], float]:
    """Per (level, metric, k), the mean over the kept rows (empty when none is kept)."""
    kept = [r for r in rows if keep(r)]
    if not kept:
        return {}
    return {key: sum(r.values[key] for r in kept) / len(kept) for key in kept[0].values}
