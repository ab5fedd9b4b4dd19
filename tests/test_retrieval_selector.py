"""The automatic-injection policy: canonical direct facts are injected, wrong bindings abstain; ranking metrics."""

from __future__ import annotations

import math

import pytest

from tasks_lib.suites.retrieval.policy import run_policy_probes
from tasks_lib.suites.retrieval.ranking import first_rank, hit_at, mean, ndcg_at, reciprocal_rank
from tasks_lib.suites.retrieval.selector import select_automatic
from tasks_lib.suites.retrieval.suite import bundled_cases
from tasks_lib.text import stem_asked_terms as stem

TABLE = [
    ("ownership", "What is my blood type?", ["My blood type is O negative."], 0),
    ("possessive-chain", "When is my sister's birthday?", ["My sister's birthday is on 4 March."], 0),
    ("named-owner", "Where does Ravi work?", ["Ravi works at Infosys as a data engineer."], 0),
    ("second-hit-is-the-fact", "Who is my landlord?", ["The landlord of the café is Mr. Brown.", "My landlord is Mr. Okafor."], 1),
    ("frame-word-ignored", "What is my home Wi-Fi network called?", ["My home Wi-Fi network is called Larkspur."], 0),
    ("curly-apostrophe", "When is my sister’s birthday?", ["My sister’s birthday is on 4 March."], 0),
    ("another-owner", "When is my birthday?", ["My sister's birthday is on 4 March."], None),
    ("inverse-relation", "Who manages Ravi?", ["Ravi manages Priya on the payments team."], None),
    ("reported-speech", "Where does Maria live?", ["Maria said her brother Tom lives in Lisbon."], None),
    ("coordinated-verbs", "Who booked the concert tickets?", ["Anna bought the concert tickets and Ben booked the hotel."], None),
    ("subordinate-object", "Which laptop belongs to Omar?", ["The laptop that Omar repaired belongs to Sara."], None),
    ("unknown-value", "What is Priya's phone number?", ["Priya's phone number isn't known yet."], None),
    ("not-the-user", "What is my favourite colour?", ["Her favourite colour is teal."], None),
    ("two-answers", "When is Alex's flight?", ["Alex's flight is at 7:10.", "Alex's flight is at 9:45."], None),
    ("live-conversation", "What did I just say about the budget?", ["My budget is 2,000 euros."], None),
    ("not-covered", "What is Ravi's phone number?", ["Ravi works at Infosys."], None),
    ("nothing-recalled", "Where does Anna live?", [], None),
    ("beyond-the-slice", "Where does Anna live?", ["x one", "x two", "x three", "x four", "x five", "Anna lives in Lisbon."], None),
]


@pytest.mark.parametrize(("question", "texts", "expected"), [t[1:] for t in TABLE], ids=[t[0] for t in TABLE])
def test_selector_policy(question: str, texts: list[str], expected: int | None) -> None:
    assert select_automatic(question, texts) == expected


def test_stems_join_inflections() -> None:
    assert stem("lives") == stem("lived") == stem("living") == stem("live")
    assert stem("manages") == stem("manage")
    assert stem("class") == "class"


def test_bundled_policy_probes_all_pass() -> None:
    _, _, policy = bundled_cases()
    results = run_policy_probes(policy)
    assert [r.id for r in results if not r.passed] == []
    assert {r.expected for r in results} == {"inject", "abstain"}


def test_ranking_metrics() -> None:
    ranked = ["a", "b", None, "c", "b"]
    assert first_rank(ranked, {"c"}) == 4 and first_rank(ranked, {"z"}) is None
    assert hit_at(ranked, {"c"}, 4) and not hit_at(ranked, {"c"}, 3)
    assert reciprocal_rank(ranked, {"b", "c"}) == 0.5 and reciprocal_rank(ranked, {"z"}) == 0.0
    assert ndcg_at(["a"], {"a"}, 8) == 1.0
    # relevant at rank 2 of 2 relevant -> (1/log2(3)) / (1 + 1/log2(3)); a repeat of the same key gains nothing
    assert math.isclose(ndcg_at(["x", "b", "b"], {"b", "c"}, 8), (1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    assert ndcg_at(["x"], set(), 8) == 0.0
    assert mean([]) is None and mean([1.0, 0.0]) == 0.5
