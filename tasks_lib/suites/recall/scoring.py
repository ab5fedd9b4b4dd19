"""Score one answer against the accepted and rejected values of a probe: hit, miss, stale or abstained.

Answers and values are compared as token sequences, never as substrings, so boundaries hold:

- Text is NFKC-normalised and casefolded; curly quotes become straight ones.
- A token is a number (`9`, `9:15`, `3.5`; thousands commas dropped, leading zeros of each part
  dropped so `09:15` equals `9:15`), a word (apostrophes kept: `don't`) or a clause break
  (`, ; : . ! ?`, parentheses, dashes); other characters only separate tokens. `9:15am` is the
  two tokens `9:15` and `am`.
- Number words from zero to twenty are read as digits, so an integer value 3 matches "three".
- A value matches where its tokens appear contiguously in the answer's tokens: `9:15` is not
  found in `19:15`, `1` is not found in `10`.
- An occurrence is **negated** (not asserted) when one of `NEGATION_CUES` ends within the
  `NEGATION_WINDOW` tokens before it in the same clause (a bare "no" only right before it):
  "not 10:00", "no longer at 10:00", "instead of 10:00"; but in "No, it's 10:00" the comma ends
  the cue's reach.

The verdict, in this order: a rejected value asserted anywhere is `stale` (even when an accepted
value is asserted too); else an accepted value asserted is a `hit`; else an empty answer or one
containing an abstention phrase (`ABSTENTION_PHRASES`) is `abstained`; else `miss`.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from typing import Literal

Verdict = Literal["hit", "miss", "stale", "abstained"]
"""The outcome of one probe."""

VERDICTS: tuple[Verdict, ...] = ("hit", "miss", "stale", "abstained")
"""Every verdict, in a fixed order."""

Value = str | int
"""An accepted or rejected value: text, or an integer (also matched as a number word)."""

NUMBER_WORDS = {
    word: str(number)
    for number, word in enumerate(
        "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
        "fifteen sixteen seventeen eighteen nineteen twenty".split()
    )
}
"""Number words read as digits."""

NEGATION_CUES: tuple[tuple[str, ...], ...] = (
    ("not",), ("no",), ("never",), ("nor",), ("no", "longer"), ("instead", "of"), ("rather", "than"),
    ("used", "to", "be"), ("formerly",), ("previously",), ("except",),
)
"""Token sequences that, ending shortly before a value, mark it as denied or superseded; any token
ending in `n't` (isn't, wasn't, don't) is a cue too."""

NEGATION_WINDOW = 3
"""A cue negates a value when at most this many tokens lie between the cue's end and the value."""

ADJACENT_ONLY_CUES: frozenset[tuple[str, ...]] = frozenset({("no",)})
"""Cues that negate only the token right after them ("no 10:00 slot"), so "no doubt it's 9:15" stays a hit."""

ABSTENTION_PHRASES: tuple[str, ...] = (
    "i don't know", "i do not know", "don't know", "not sure", "no idea", "i can't recall", "i cannot recall",
    "can't remember", "cannot remember", "don't remember", "do not remember", "you never told me",
    "you haven't told me", "you have not told me", "you didn't mention", "you did not mention",
    "never mentioned", "not mentioned", "no record", "no information", "i don't have", "i do not have",
    "nothing about", "unknown", "i can't tell", "i cannot tell", "unanswerable",
)
"""Phrases (matched on token boundaries) by which an answer declines to state a value."""

_TOKEN = re.compile(r"\d+(?:,\d{3})*(?:[:.]\d+)*|[^\W\d_]+(?:'[^\W\d_]+)*|[,;:.!?()\u2013\u2014]")

CLAUSE_BREAK = "|"
"""The token standing for clause punctuation (, ; : . ! ? parentheses, dashes); a negation cue
does not reach across it and a value never matches across it."""
_QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u02bc": "'", "\u201c": '"', "\u201d": '"'})


def tokens(text: str) -> tuple[str, ...]:
    """The comparison tokens of `text` (see the module docstring)."""
    folded = unicodedata.normalize("NFKC", text).translate(_QUOTES).casefold()
    out = []
    for token in _TOKEN.findall(folded):
        if not token[0].isalnum():
            token = CLAUSE_BREAK
        elif token[0].isdigit():
            token = token.replace(",", "")
            token = ":".join(".".join(part.lstrip("0") or "0" for part in piece.split(".")) for piece in token.split(":"))
        out.append(NUMBER_WORDS.get(token, token))
    return tuple(out)


def value_tokens(value: Value) -> tuple[str, ...]:
    """The tokens a value is matched by: its tokens without leading or trailing clause breaks."""
    said = list(tokens(str(value)))
    while said and said[0] == CLAUSE_BREAK:
        said.pop(0)
    while said and said[-1] == CLAUSE_BREAK:
        said.pop()
    return tuple(said)


def _occurrences(haystack: tuple[str, ...], needle: tuple[str, ...]) -> list[int]:
    size = len(needle)
    return [i for i in range(len(haystack) - size + 1) if haystack[i : i + size] == needle] if size else []


def _negated(answer: tuple[str, ...], start: int) -> bool:
    """True when a negation cue ends within NEGATION_WINDOW tokens before `answer[start]`, in the same clause."""
    for end in range(start - 1, max(-1, start - NEGATION_WINDOW - 2), -1):
        if answer[end] == CLAUSE_BREAK:
            return False
        if answer[end].endswith("n't"):
            return True
        for cue in NEGATION_CUES:
            begin = end - len(cue) + 1
            if begin >= 0 and answer[begin : end + 1] == cue and (end == start - 1 or cue not in ADJACENT_ONLY_CUES):
                return True
    return False


def asserts(answer: str | tuple[str, ...], value: Value) -> bool:
    """True when `answer` states `value` at least once without negating it."""
    said = answer if isinstance(answer, tuple) else tokens(answer)
    wanted = value_tokens(value)
    if not wanted:
        raise ValueError(f"value {value!r} has no comparable tokens; give a word or a number")
    return any(not _negated(said, start) for start in _occurrences(said, wanted))


def abstains(answer: str) -> bool:
    """True when `answer` is empty or contains an abstention phrase."""
    said = tokens(answer)
    return not said or any(_occurrences(said, tokens(phrase)) for phrase in ABSTENTION_PHRASES)


def _values(value: Value | Sequence[Value] | None, field: str) -> tuple[Value, ...]:
    if value is None:
        return ()
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return (value,)
    if isinstance(value, Sequence) and all(isinstance(v, (str, int)) and not isinstance(v, bool) for v in value):
        return tuple(value)
    raise TypeError(f"{field}: expected a string, an integer or a list of them, got {value!r}")


def score_answer(answer: str, accept: Value | Sequence[Value], reject: Value | Sequence[Value] | None = None) -> Verdict:
    """The verdict of `answer` for a probe whose true value is any of `accept` and whose stale
    (superseded or invented) values are `reject`. `accept` may be empty (a false-memory probe:
    only `abstained` is a pass there). Raises TypeError for a value that is not text or an integer
    and ValueError for a value with no comparable tokens.
    """
    if not isinstance(answer, str):
        raise TypeError(f"answer: expected text, got {type(answer).__name__}")
    said = tokens(answer)
    if any(asserts(said, value) for value in _values(reject, "reject")):
        return "stale"
    if any(asserts(said, value) for value in _values(accept, "accept")):
        return "hit"
    return "abstained" if abstains(answer) else "miss"
