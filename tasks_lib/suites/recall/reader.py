"""The offline `ask` step: an agent that reads its window and what its memory recalled, and answers
with the best match, or abstains.

`read_context` is what the agent reads: its retained context (the window) and, with a memory
system, the memories it recalled, ranked together by the embedder's cosine similarity to the
probe (newer first on a tie). A retained turn counts only at or above the embedder's
`min_similarity` (the reader judges its own window); a recalled memory counts when the memory
vouched for it (its own score at or above the memory's abstention threshold, any when it has
none). Without memory (`context_ranking`) that is the window alone. The memory-backed agent
therefore reads a superset of what the agent without memory reads: where every played turn is
still in the window its answer is the no-memory answer whenever that one is an answer.
`ranked_answer` asserts the first turn of a ranking.

`content_terms` gives a text's stemmed content words (stop words removed); the case contract uses
it to keep probes from repeating their fact's words.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks_lib.memory.embeddings import Embedder
from tasks_lib.suites.recall.retention import Turn
from tasks_lib.suites.recall.scoring import CLAUSE_BREAK, tokens
from tasks_lib.text import stem_probe_terms

ABSTAIN_ANSWER = "I don't know; nothing I remember answers that."
"""What the reader says when nothing relevant was recalled."""

STOP_WORDS = frozenset(
    "a an the is are was were be been am do does did done have has had i me my mine we our us you your "
    "what which who whom whose when where why how there here it its it's this that these those of to in on "
    "at for with about from by as and or but if so than then now again any some all can could should would "
    "will shall may might must go goes going get got again into out up down over just also very".split()
)
"""Words that carry no topic and are ignored in the probe."""


def content_terms(text: str) -> frozenset[str]:
    """The stemmed content terms of `text`."""
    return frozenset(stem_probe_terms(t) for t in tokens(text) if t != CLAUSE_BREAK and t not in STOP_WORDS)


def context_ranking(probe: str, retained: Sequence[Turn], embedder: Embedder, k: int) -> tuple[tuple[Turn, ...], tuple[float, ...]]:
    """Without memory: the retained turns ranked by cosine similarity to `probe` under `embedder`, best
    first (newer first on a tie), at most `k`, only those at or above the embedder's `min_similarity`."""
    if not retained:
        return (), ()
    vectors = embedder.embed([probe, *(t.text for t in retained)])
    similarity = vectors[1:] @ vectors[0]
    order = sorted(range(len(retained)), key=lambda i: (-float(similarity[i]), -retained[i].index))
    kept = [i for i in order if similarity[i] >= embedder.min_similarity][:k]
    return tuple(retained[i] for i in kept), tuple(float(similarity[i]) for i in kept)


def read_context(probe: str, retained: Sequence[Turn], recalled: Sequence[Turn], scores: Sequence[float],
                 embedder: Embedder, abstain_below: float | None = None) -> tuple[tuple[Turn, ...], tuple[float, ...]]:
    """The window and the recalled memories the agent reads, ranked by cosine similarity to `probe`
    under `embedder`, best first (newer first on a tie), with each turn's similarity.

    Retained turns below the embedder's `min_similarity` are dropped; recalled memories whose own
    score is below `abstain_below` are dropped (the memory declined them); a memory that is also a
    retained turn (same index and text) is read once.
    """
    vouched = [t for t, s in zip(recalled, scores, strict=True) if abstain_below is None or s >= abstain_below]
    seen = {(t.index, t.text) for t in retained}
    extra = [t for t in dict.fromkeys(vouched) if (t.index, t.text) not in seen]
    candidates = [*retained, *extra]
    if not candidates:
        return (), ()
    vectors = embedder.embed([probe, *(t.text for t in candidates)])
    similarity = [float(x) for x in vectors[1:] @ vectors[0]]
    kept = [i for i in range(len(candidates)) if i >= len(retained) or similarity[i] >= embedder.min_similarity]
    kept.sort(key=lambda i: (-similarity[i], -candidates[i].index))
    return tuple(candidates[i] for i in kept), tuple(similarity[i] for i in kept)


def ranked_answer(recalled: Sequence[Turn], scores: Sequence[float], abstain_below: float | None = None) -> str:
    """The text of the memory's first recalled turn; ABSTAIN_ANSWER when there is none or its score is below `abstain_below`."""
    if not recalled or (abstain_below is not None and scores[0] < abstain_below):
        return ABSTAIN_ANSWER
    return recalled[0].text
