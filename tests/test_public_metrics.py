"""LongMemEval's official retrieval metrics, against values computed by hand."""

from __future__ import annotations

import math

import pytest

from tasks_lib.suites.public.metrics import (
    dcg,
    evaluate_retrieval,
    mean_scores,
    ndcg,
    score_question,
    session_of_top_turns,
    turn_to_session,
)

SESSION_OF = {"s1_1": "s1", "s1_2": "s1", "s2_1": "s2", "s3_1": "s3", "s3_2": "s3"}
CORPUS = list(SESSION_OF)


@pytest.mark.parametrize(
    ("ranked", "relevant", "corpus", "k", "expected"),
    [
        (["a", "x", "b", "y"], {"a", "b"}, ["a", "b", "x", "y"], 1, (1.0, 0.0, 1.0)),
        # dcg = 1 + 0 + 1/log2(3); ideal = 1 + 1 (rank 2 is not discounted upstream)
        (["a", "x", "b", "y"], {"a", "b"}, ["a", "b", "x", "y"], 3, (1.0, 1.0, (1 + 1 / math.log2(3)) / 2)),
        (["x", "a"], {"a"}, ["a", "x"], 2, (1.0, 1.0, 1.0)),
        (["x", "y", "a"], {"a"}, ["a", "x", "y"], 2, (0.0, 0.0, 0.0)),
        (["x", "y", "a"], {"a"}, ["a", "x", "y"], 3, (1.0, 1.0, 1 / math.log2(3))),
        # nothing relevant: any 0, all 1 (all() of nothing), ndcg 0
        (["x", "y"], set(), ["x", "y"], 2, (0.0, 1.0, 0.0)),
        # ideal DCG counts relevant ids of the corpus, also those the ranking never returned
        (["a"], {"a", "b"}, ["a", "b", "x"], 5, (1.0, 0.0, 1 / 2)),
    ],
    ids=["k1", "k3-rank3-discount", "rank2-undiscounted", "miss", "rank3", "no-relevant", "truncated-ranking"],
)
def test_evaluate_retrieval_hand_values(ranked: list[str], relevant: set[str], corpus: list[str], k: int, expected: tuple[float, float, float]) -> None:
    got = evaluate_retrieval(ranked, relevant, corpus, k)
    assert got[:2] == expected[:2]
    assert got[2] == pytest.approx(expected[2])


def test_dcg_first_two_ranks_weigh_one() -> None:
    assert dcg([1, 1, 1, 1], 4) == pytest.approx(1 + 1 + 1 / math.log2(3) + 1 / math.log2(4))
    assert dcg([], 3) == 0.0 and dcg([1, 1], 1) == 1.0


def test_ndcg_is_one_for_a_perfect_ranking_and_never_above() -> None:
    assert ndcg(["a", "b", "x"], {"a", "b"}, ["x", "a", "b"], 3) == pytest.approx(1.0)
    assert ndcg(["b", "a", "x"], {"a", "b"}, ["x", "a", "b"], 10) == pytest.approx(1.0)


def test_turn_to_session_grows_k_until_k_distinct_sessions() -> None:
    """k=2 over [s1, s1, s2, ...]: k grows to 3, so s2 is in; ndcg over session ids with duplicates."""
    ranked = ["s1_1", "s1_2", "s2_1", "s3_1", "s3_2"]
    any_, all_, score = turn_to_session(ranked, {"s2_1"}, CORPUS, SESSION_OF, 2)
    assert (any_, all_) == (1.0, 1.0)
    assert score == pytest.approx(1 / math.log2(3))  # relevant at rank 3; ideal: one relevant corpus entry (s2)
    # the sessions of the top 2 turns are only s1: issue #4's reading misses
    assert session_of_top_turns(ranked, {"s2_1"}, SESSION_OF, 2) == (0.0, 0.0)


def test_turn_to_session_relevant_session_counts_every_turn_of_it_in_ideal() -> None:
    """Two relevant turns in s3: ideal DCG@1 is 1; the ranking's s3 at rank 1 gives 1."""
    ranked = ["s3_2", "s1_1", "s3_1", "s2_1", "s1_2"]
    assert turn_to_session(ranked, {"s3_1", "s3_2"}, CORPUS, SESSION_OF, 1) == (1.0, 1.0, 1.0)
    # k=2: effective k stays 2 (s3, s1 distinct); ideal [1, 1] (two s3 turns) = 2, actual [1, 0] = 1
    assert turn_to_session(ranked, {"s3_1", "s3_2"}, CORPUS, SESSION_OF, 2) == (1.0, 1.0, 0.5)


def test_turn_to_session_stops_at_the_corpus_end() -> None:
    """Fewer sessions than k: k grows past the corpus and every session is in."""
    ranked = ["s1_1", "s2_1"]
    assert turn_to_session(ranked, {"s2_1"}, ["s1_1", "s2_1"], SESSION_OF, 5)[:2] == (1.0, 1.0)


def test_score_question_and_mean_by_slice() -> None:
    a = score_question("g", "q1", "x", ["s1_1", "s2_1"], {"s2_1"}, CORPUS, SESSION_OF, (1, 3))
    b = score_question("g", "q2", "y", ["s2_1", "s1_1"], {"s2_1"}, CORPUS, SESSION_OF, (1, 3))
    assert a.values[("turn", "recall_any", 1)] == 0.0 and b.values[("turn", "recall_any", 1)] == 1.0
    assert ("session_of_top_turns", "ndcg", 1) not in a.values
    means = mean_scores([a, b])
    assert means[("turn", "recall_any", 1)] == 0.5 and means[("turn", "recall_any", 3)] == 1.0
    assert mean_scores([a, b], lambda r: r.slice == "y")[("turn", "recall_any", 1)] == 1.0
    assert mean_scores([a, b], lambda r: False) == {}
