"""The offline `ask` steps: answer with a remembered turn, or abstain.

`ranked_answer` (with a memory system): the memory's own first recalled turn, in the memory's
order, unless its own score is below the system's abstention threshold. The reader adds nothing:
what is asserted is what the memory ranked first, so the curve measures the memory.

`extract_answer` (without memory, the retention policy alone, where there is no ranking to follow):

Relevance of a candidate turn to the probe is its IDF-weighted coverage of the probe's content
terms: the probe's tokens minus `STOP_WORDS`, lightly stemmed (`stem`); IDF is computed over the
candidates themselves, `idf(t) = ln((N + 1) / (df(t) + 1)) + 1`, so a term no candidate contains
weighs most. Coverage is the summed IDF of the probe terms the candidate contains over the summed
IDF of all probe terms, from 0 to 1.

The answer is the text of the most recent candidate whose coverage is at least `threshold` and
within `RECENCY_MARGIN` of the best coverage (a correction said later wins over the value it
replaced when both are equally relevant). When no candidate reaches `threshold`, the reader
abstains with `ABSTAIN_ANSWER`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from tasks_lib.suites.recall.retention import Turn
from tasks_lib.suites.recall.scoring import CLAUSE_BREAK, tokens

DEFAULT_THRESHOLD = 0.6
"""Least coverage of the probe's terms for a turn to count as an answer."""

RECENCY_MARGIN = 0.1
"""Candidates this close to the best coverage tie; the most recent of them is the answer."""

ABSTAIN_ANSWER = "I don't know; nothing I remember answers that."
"""What the reader says when nothing relevant was recalled."""

STOP_WORDS = frozenset(
    "a an the is are was were be been am do does did done have has had i me my mine we our us you your "
    "what which who whom whose when where why how there here it its it's this that these those of to in on "
    "at for with about from by as and or but if so than then now again any some all can could should would "
    "will shall may might must go goes going get got again into out up down over just also very".split()
)
"""Words that carry no topic and are ignored in the probe."""


def stem(token: str) -> str:
    """A light suffix stripper: `leaves`/`leave` -> `leav`, `named`/`name` -> `nam`, `dog's` -> `dog`."""
    word = token.removesuffix("'s")
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def content_terms(text: str) -> frozenset[str]:
    """The stemmed content terms of `text`."""
    return frozenset(stem(t) for t in tokens(text) if t != CLAUSE_BREAK and t not in STOP_WORDS)


def coverages(probe: str, candidates: Sequence[Turn]) -> list[float]:
    """Each candidate's IDF-weighted coverage of the probe's content terms (0 when the probe has none)."""
    wanted = content_terms(probe)
    terms = [content_terms(c.text) for c in candidates]
    n = len(candidates)
    idf = {t: math.log((n + 1) / (sum(t in have for have in terms) + 1)) + 1 for t in wanted}
    total = sum(idf.values())
    if not total:
        return [0.0] * n
    return [sum(idf[t] for t in wanted & have) / total for have in terms]


def ranked_answer(recalled: Sequence[Turn], scores: Sequence[float], abstain_below: float | None = None) -> str:
    """The text of the memory's first recalled turn; ABSTAIN_ANSWER when there is none or its score is below `abstain_below`."""
    if not recalled or (abstain_below is not None and scores[0] < abstain_below):
        return ABSTAIN_ANSWER
    return recalled[0].text


def extract_answer(probe: str, candidates: Sequence[Turn], threshold: float = DEFAULT_THRESHOLD) -> str:
    """The most recent sufficiently relevant candidate's text, or ABSTAIN_ANSWER."""
    unique = list({(c.index, c.text): c for c in candidates}.values())
    scores = coverages(probe, unique)
    if not scores or max(scores) < threshold:
        return ABSTAIN_ANSWER
    best = max(scores)
    chosen = [c for c, s in zip(unique, scores) if s >= threshold and s >= best - RECENCY_MARGIN]
    return max(chosen, key=lambda c: c.index).text
