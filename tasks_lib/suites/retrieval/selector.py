"""The automatic-injection policy: which recalled memory, if any, may be put into an agent's context unasked.

Automatic injection is limited to canonical direct facts: a memory that states the asked
attribute of the asked owner in so many words. Everything else (paraphrases, relations, hops)
stays available to an explicit recall, never pushed into background context. Among the first
SLICE hits, a hit qualifies when all of these hold:

1. coverage: every content word of the question (stop words and question-frame words such as
   `name` dropped, light suffix stemming) occurs in the memory;
2. ownership: a question in the first person needs a first-person memory; every possessive pair
   of the question (`my sister`, `Ravi's phone`) occurs in the memory;
3. order: the question's words occur in the memory in the same relative order (`who manages
   Ravi` does not bind to `Ravi manages Priya`);
4. the memory does not report someone else's words (`said`, `told`, ...) unless the question
   does, and does not state that the value is unknown or withheld (`not`, `n't`, `unknown`, `yet`).

Exactly one distinct qualifying text is injected; none, or two that differ, abstain. Questions
about the live conversation (`what did I just say`) always abstain: their answer is the active
history, not durable memory.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from itertools import pairwise

from tasks_lib.suites.retrieval.cases import STOP_WORDS
from tasks_lib.text import stem_asked_terms

SLICE = 5
"""Hits the policy looks at, best first."""

POLICY_VERSION = "1"
"""Changes whenever the rules change; part of the suite's config digest."""

FRAME_WORDS = frozenset("name named called call tell remind know remember exactly please whose again".split())
"""Question words that frame the question rather than name what is asked."""

FIRST_PERSON = frozenset("i me my mine myself".split())
REPORTING = frozenset("said says say told tells tell thinks think thought heard mentioned claims claimed reckons".split())
UNKNOWN_MARKERS = frozenset("not unknown yet undecided nobody never".split())
POSSESSIVE_DETERMINERS = frozenset("my our your".split())
LIVE_CONVERSATION = re.compile(
    r"\b(just (said|say|told|asked|wrote|mentioned)|last message|previous message|this conversation|a moment ago|right now)\b"
)

_TOKEN = re.compile(r"[^\W_]+(?:'s|n't)?", re.UNICODE)


def tokens(text: str) -> list[str]:
    """Casefolded word tokens, keeping `'s` and `n't` attached (curly apostrophes normalised)."""
    return _TOKEN.findall(text.replace("\u2019", "'").casefold())


def asked_terms(question: str) -> list[str]:
    """Stems of the question's content words, in question order, unique."""
    out: list[str] = []
    for token in tokens(question):
        bare = token.removesuffix("'s")
        if bare in STOP_WORDS or bare in FRAME_WORDS or bare in FIRST_PERSON or len(bare) < 2:
            continue
        stemmed = stem_asked_terms(token)
        if stemmed not in out:
            out.append(stemmed)
    return out


def possessive_pairs(text: str) -> list[tuple[str, str]]:
    """(owner, owned) stem pairs: `my sister` -> (my, sister), `Ravi's phone` -> (ravi, phone).

    Pairs whose owned word is a question-frame word (`dentist's name`) are left out.
    """
    words = tokens(text)
    pairs = []
    for first, second in pairwise(words):
        if second.removesuffix("'s") in FRAME_WORDS or second in STOP_WORDS:
            continue
        if first in POSSESSIVE_DETERMINERS:
            pairs.append((first, stem_asked_terms(second)))
        elif first.endswith("'s"):
            pairs.append((stem_asked_terms(first), stem_asked_terms(second)))
    return pairs


def reason_to_refuse(question: str, memory: str) -> str | None:
    """Why `memory` is not a canonical direct answer to `question`, or None when it is one."""
    q_tokens = {t.removesuffix("'s") for t in tokens(question)}
    m_words = tokens(memory)
    m_bare = {w.removesuffix("'s") for w in m_words}
    m_stems = [stem_asked_terms(w) for w in m_words]
    terms = asked_terms(question)
    if not terms:
        return "the question names nothing to look up"
    missing = [t for t in terms if t not in m_stems]
    if missing:
        return f"does not cover {', '.join(missing)}"
    if q_tokens & FIRST_PERSON and not m_bare & FIRST_PERSON:
        return "the question is about the user; the memory is not in the first person"
    m_pairs = set(possessive_pairs(memory))
    for pair in possessive_pairs(question):
        if pair not in m_pairs:
            return f"binds {pair[1]} to another owner than {pair[0]}"
    positions = [m_stems.index(t) for t in terms]
    if positions != sorted(positions):
        return "states the words in another order (another binding)"
    if m_bare & REPORTING and not q_tokens & REPORTING:
        return "reports what someone said"
    if m_bare & UNKNOWN_MARKERS or any(w.endswith("n't") for w in m_words):
        return "says the value is unknown, withheld or negated"
    return None


def select_automatic(question: str, texts: Sequence[str]) -> int | None:
    """Index (into `texts`, ranked best first) of the one memory to inject, or None to abstain."""
    if LIVE_CONVERSATION.search(question.casefold()):
        return None
    chosen: int | None = None
    for index, text in enumerate(texts[:SLICE]):
        if reason_to_refuse(question, text) is not None:
            continue
        if chosen is None:
            chosen = index
        elif " ".join(tokens(texts[chosen])) != " ".join(tokens(text)):
            return None  # two different candidate answers: ambiguous
    return chosen
