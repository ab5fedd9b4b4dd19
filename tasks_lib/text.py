"""Word stemmers, one named rule set per purpose, kept apart on purpose.

Three parts of memtrial strip suffixes from words, each for its own reason, and each one's rules are
part of figures already published (a recall curve, a retrieval gate, a memory system's ranking). They
are not merged into one: a change to any rule moves that part's numbers, so each is a named rule set,
its outputs pinned by tests/test_text.py, changed only with the version of what it feeds.

- `stem_probe_terms`: the recall suite's probe contract (`suites.recall.reader.content_terms`): a
  probe must not repeat its fact's words, so inflections are folded hard (`ies` -> `y`, any of `ing`,
  `ed`, `es`, `s`, then a final `e`).
- `stem_asked_terms`: the retrieval suite's injection policy (`suites.retrieval.selector`, whose
  POLICY_VERSION names these rules): a plural `s` first, then `ing`/`ed`, then a final `e`, so
  `lives`, `lived` and `living` all meet at `liv`.
- `stem_prefix`: the third-party adapters' keyword lane (`memory.adapters.common.query_terms`): a stem
  matched as a word prefix, so it only cuts a suffix (never adds `y`) and keeps a longer head.
"""

from __future__ import annotations

from collections.abc import Callable


def stem_probe_terms(token: str) -> str:
    """A light suffix stripper: `leaves`/`leave` -> `leav`, `named`/`name` -> `nam`, `dog's` -> `dog`."""
    word = token.removesuffix("'s")
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3 and not word.endswith("ss"):
            word = word[: -len(suffix)]
            break
    return word[:-1] if word.endswith("e") and len(word) > 3 else word


def stem_asked_terms(word: str) -> str:
    """A light stem: drop `'s`, a plural `s`, then `ed`/`ing`, then a final `e` (lives, lived, living -> liv)."""
    word = word.removesuffix("'s")
    if len(word) > 3 and word.endswith("s") and not word.endswith("ss"):
        word = word[:-1]
    for suffix in ("ing", "ed"):
        if len(word) > len(suffix) + 2 and word.endswith(suffix):
            word = word[: -len(suffix)]
            break
    if len(word) > 3 and word.endswith("e"):
        word = word[:-1]
    return word


def stem_prefix(word: str) -> str:
    """A crude prefix stem, so that a prefix match finds inflections: `branches` -> `branch`, `exported` -> `export`."""
    for suffix, keep in (("ing", 4), ("ies", 3), ("es", 4), ("ed", 4), ("s", 3)):
        if word.endswith(suffix) and len(word) - len(suffix) >= keep and not word.endswith("ss"):
            return word[: -len(suffix)]
    return word


STEMMERS: dict[str, Callable[[str], str]] = {
    "probe-terms": stem_probe_terms,
    "asked-terms": stem_asked_terms,
    "prefix": stem_prefix,
}
"""Every rule set by name (the names the pinned-output test reports)."""
