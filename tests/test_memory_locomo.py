"""Retrieval benchmark code on real LoCoMo data: evidence quirk counts and a recall floor on one conversation."""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.memory.adapter import MemoryItem
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.suites.public.bench import load_locomo, run_fts_baseline, run_store
from tasks_lib.suites.public.locomo import CATEGORY_NAMES, EvidenceCounts, parse_evidence
from tasks_lib.suites.public.locomo import load_locomo as load_groups

LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10.json"

pytestmark = pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo data not found at {LOCOMO}")


def test_evidence_quirks_are_counted_and_1536_questions_remain() -> None:
    """Every cleaning rule fires the documented number of times; categories 1-4 keep 1,536 questions."""
    convs, counts = load_locomo(LOCOMO)
    assert counts == EvidenceCounts(
        questions_in_categories=1540,
        entries=2355,
        entries_split=4,
        ids_from_splits=13,
        tokens_unparseable_dropped=2,
        ids_zero_padding_removed=1,
        ids_not_in_conversation_dropped=2,
        questions_without_evidence_skipped=4,
        questions_kept=1536,
    )
    assert sum(len(c.questions) for c in convs) == 1536 and len(convs) == 10


@pytest.mark.parametrize(
    ("entries", "expected"),
    [(["D8:6; D9:17"], {"D8:6", "D9:17"}), (["D9:1 D4:4"], {"D9:1", "D4:4"}), (["D", "D:11:26"], set()), (["D1:05"], {"D1:5"}), (["D99:1"], set())],
    ids=["semicolon", "spaces", "unparseable", "zero-padding", "not-in-conversation"],
)
def test_parse_evidence_rules(entries: list[str], expected: set[str]) -> None:
    assert parse_evidence(entries, {"D8:6", "D9:17", "D9:1", "D4:4", "D1:5"}, EvidenceCounts()) == expected


def test_reference_store_beats_plain_bm25_on_one_real_conversation(tmp_path: Path) -> None:
    """conv-26 (hashed embedder): turn recall_any@5 at least 0.6, above the plain FTS5 baseline."""
    convs, _ = load_locomo(LOCOMO)
    conv = [c for c in convs if c.conv_id == "conv-26"]
    ours = run_store(conv, tmp_path, "hashed")
    base = run_fts_baseline(conv)
    assert len(ours.results) == 150
    assert ours.recall("turn", 5) >= 0.6 and ours.recall("session", 5) >= 0.85
    assert ours.recall("turn", 5) > base.recall("turn", 5) + 0.1
    assert all(r.distinct_session[5] >= r.session[5] for r in ours.results), "distinct sessions cover at least as much"


def test_session_context_follows_forget(tmp_path: Path) -> None:
    """A forgotten turn's words leave its neighbours' context: recall cannot find a neighbour by them."""
    with SqliteMemoryStore(tmp_path / "m.sqlite") as store:
        store.create_realm("test:ctx")
        ids = store.remember(
            "test:ctx",
            [MemoryItem(text=t, speaker=s, session="s1") for s, t in [("Ann", "I adopted a greyhound named Zephyr."), ("Bo", "Lovely!")]],
        )
        assert ids[1] in [h.id for h in store.recall("test:ctx", "Zephyr greyhound", 5, lanes=["keyword"])]
        store.forget([ids[0]])
        assert store.recall("test:ctx", "Zephyr greyhound", 5, lanes=["keyword"]) == ()


def test_benchmark_reads_the_suite_loader() -> None:
    """The benchmark scorer and the public suite score the same turns, texts, categories and evidence.

    Two loaders with their own category tables drifted apart once (category 5 had no name in one).
    """
    convs, counts = load_locomo(LOCOMO, categories=(1, 2, 3, 4, 5))
    groups, log = load_groups(LOCOMO, categories=(1, 2, 3, 4, 5))
    assert [c.conv_id for c in convs] == [g.group_id for g in groups] and [c.position for c in convs] == list(range(10))
    assert all(c.turns == g.turns for c, g in zip(convs, groups))
    assert [[(q.text, q.category, q.evidence_turns) for q in c.questions] for c in convs] == [
        [(q.text, q.slice, q.relevant_turns) for q in g.questions] for g in groups
    ]
    assert {q.category for c in convs for q in c.questions} == set(CATEGORY_NAMES.values())
    assert counts.questions_without_evidence_skipped == log["question_without_evidence_skipped"]
