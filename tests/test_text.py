"""The word stemmers: one named rule set per purpose, in `tasks_lib.text`, their outputs pinned.

Each rule set feeds published figures (the recall suite's probe contract, the retrieval suite's
injection policy, the third-party adapters' keyword lane); a rule that changes moves them. The table
below is what each rule set gave when they were gathered into one module; a change to a rule must
change this table, in the same commit as the version of what it feeds.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tasks_lib.memory.adapters.common import query_terms
from tasks_lib.suites.recall.reader import content_terms
from tasks_lib.suites.retrieval.selector import asked_terms
from tasks_lib.text import STEMMERS, stem_asked_terms, stem_prefix, stem_probe_terms

ROOT = Path(__file__).resolve().parent.parent

PINNED = [  # word, probe-terms, asked-terms, prefix
    ("lives", "liv", "liv", "live"),
    ("lived", "liv", "liv", "lived"),
    ("living", "liv", "liv", "living"),
    ("leaves", "leav", "leav", "leav"),
    ("leave", "leav", "leav", "leave"),
    ("named", "nam", "nam", "named"),
    ("name", "nam", "nam", "name"),
    ("dog's", "dog", "dog", "dog'"),
    ("ravi's", "ravi", "ravi", "ravi'"),
    ("branches", "branch", "branch", "branch"),
    ("exported", "export", "export", "export"),
    ("stories", "story", "stori", "stor"),
    ("cities", "city", "citi", "cit"),
    ("flies", "fly", "fli", "flie"),
    ("ties", "tie", "tie", "tie"),
    ("boss", "boss", "boss", "boss"),
    ("bosses", "boss", "boss", "boss"),
    ("classes", "class", "class", "class"),
    ("running", "runn", "runn", "runn"),
    ("sing", "sing", "sing", "sing"),
    ("things", "thing", "thing", "thing"),
    ("bed", "bed", "bed", "bed"),
    ("used", "used", "used", "used"),
    ("uses", "use", "use", "use"),
    ("houses", "hous", "hous", "hous"),
    ("goes", "goe", "goe", "goe"),
    ("agrees", "agr", "agre", "agre"),
    ("seeded", "seed", "seed", "seed"),
    ("reading", "read", "read", "read"),
    ("readings", "reading", "read", "reading"),
    ("bus", "bus", "bus", "bus"),
    ("news", "new", "new", "new"),
    ("cakes", "cak", "cak", "cake"),
    ("made", "mad", "mad", "made"),
    ("trees", "tre", "tre", "tree"),
    ("wasn't", "wasn't", "wasn't", "wasn't"),
    ("moving", "mov", "mov", "moving"),
    ("the", "the", "the", "the"),
    ("apples", "appl", "appl", "appl"),
    ("speed", "spe", "spe", "speed"),
    ("was", "was", "was", "was"),
    ("s", "s", "s", "s"),
    ("ies", "ies", "ies", "ies"),
]


@pytest.mark.parametrize(("word", "probe", "asked", "prefix"), PINNED, ids=[row[0] for row in PINNED])
def test_each_rule_set_stems_as_it_did_when_published(word: str, probe: str, asked: str, prefix: str) -> None:
    """A rule set that stems one word differently moves the figures it feeds."""
    assert (stem_probe_terms(word), stem_asked_terms(word), stem_prefix(word)) == (probe, asked, prefix)


def test_the_rule_sets_differ_where_their_purposes_do() -> None:
    """Merging them would change two of the three: each must stay its own rule set."""
    outputs = {name: tuple(stem(row[0]) for row in PINNED) for name, stem in STEMMERS.items()}
    assert len(set(outputs.values())) == len(STEMMERS)


def test_each_purpose_uses_its_own_rule_set() -> None:
    """The recall contract folds `stories` to `story`, the injection policy to `stori`, the adapters'
    prefix lane to `stor`: a caller switched to another rule set would move its suite's numbers."""
    assert content_terms("stories") == {"story"}
    assert asked_terms("stories") == ["stori"]
    assert query_terms("stories") == ("stor",)


def test_no_module_defines_a_stemmer_of_its_own() -> None:
    """A fourth copy with its own rules would be a normalizer nobody pinned."""
    found = [f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"
             for folder in ("tasks_lib", "flows") for path in sorted((ROOT / folder).rglob("*.py"))
             if path != ROOT / "tasks_lib" / "text.py"
             for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
             if isinstance(node, ast.FunctionDef) and node.name.lstrip("_").startswith("stem")]
    assert not found, f"add the rule set to tasks_lib/text.py instead: {found}"
