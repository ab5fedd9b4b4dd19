"""score_answer: boundaries, negation, stale-beats-hit, integers, abstention (seed 001's harness failure modes)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tasks_lib.suites.recall import score_answer
from tasks_lib.suites.recall.scoring import tokens

CASES = [
    # (answer, accept, reject, verdict)
    ("Your standup is at 9:15.", "9:15", None, "hit"),
    ("Your standup is at 19:15.", "9:15", None, "miss"),  # substring 9:15 inside 19:15 must not count
    ("It's at 09:15 UTC.", "9:15", None, "hit"),  # leading zero normalised
    ("It moved to 9:15am.", "9:15", None, "hit"),  # unit glued to the value
    ("9:150 is not a time", "9:15", None, "miss"),
    ("Standup is not 10:00.", "10:00", None, "miss"),  # "not 10:00" is not a hit for 10:00
    ("It's no longer at 10:00.", "10:00", None, "miss"),
    ("It isn't 10:00 any more.", "10:00", None, "miss"),
    ("No, it is 10:00.", "10:00", None, "hit"),  # the comma ends the negation's reach
    ("No doubt it is 10:00.", "10:00", None, "hit"),  # a bare "no" negates only the next token
    ("There is no 10:00 slot.", "10:00", None, "miss"),
    ("Standup is at 14:00, not 10:00.", "14:00", "10:00", "hit"),  # rejected value negated
    ("Standup is at 14:00 instead of 10:00.", "14:00", "10:00", "hit"),
    ("It's 10:00 or maybe 14:00.", "14:00", "10:00", "stale"),  # both asserted: the rejected one fails it
    ("Standup is at 10:00.", "14:00", "10:00", "stale"),
    ("The code is 4817.", 4817, None, "hit"),  # integer answer
    ("The code is 48170.", 4817, None, "miss"),
    ("The budget is 12,500 euros.", 12500, None, "hit"),  # thousands separator
    ("I have three cats.", 3, None, "hit"),  # number word
    ("I have 13 cats.", 3, None, "miss"),
    ("It is 3.5 hours.", 3, None, "miss"),
    ("Launch WITHOUT the export button.", "without the export button", None, "hit"),  # case-insensitive phrase
    ("Launch without the new export button.", "without the export button", None, "miss"),  # phrase must be contiguous
    ("I don't know.", "9:15", None, "abstained"),
    ("I don\u2019t know, you never told me.", "9:15", None, "abstained"),  # curly apostrophe
    ("", "9:15", None, "abstained"),
    ("Probably in the morning.", "9:15", None, "miss"),
    ("I don't know, but 9:15 I think.", "9:15", None, "hit"),  # a stated value outranks a hedge
    ("You use vim.", (), ("vim", "emacs"), "stale"),  # false-memory probe: invented value
    ("You like Sublime Text.", (), ("vim",), "miss"),  # false-memory probe: any concrete answer is not an abstention
    ("You never mentioned an editor.", (), ("vim",), "abstained"),
    ("Spot b17, level two.", "B17", None, "hit"),
    ("Spot B171.", "B17", None, "miss"),
    ("My dog is Biscuits.", ("Biscuit",), None, "miss"),  # token match, not prefix
    ("March 14 or 14 March", ("14 March", "March 14"), None, "hit"),
]


@pytest.mark.parametrize(("answer", "accept", "reject", "verdict"), CASES, ids=[f"{i}-{c[3]}" for i, c in enumerate(CASES)])
def test_score_answer_table(answer: str, accept: object, reject: object, verdict: str) -> None:
    assert score_answer(answer, accept, reject) == verdict  # type: ignore[arg-type]


def test_tokens_keep_times_words_and_clause_breaks() -> None:
    assert tokens("Moved to 09:15am, not 10:00! Don\u2019t") == ("moved", "to", "9:15", "am", "|", "not", "10:0", "|", "don't")


@pytest.mark.parametrize(("accept", "problem"), [(True, TypeError), ([1.5], TypeError), ("!!", ValueError)], ids=["bool", "float", "no-tokens"])
def test_unusable_values_are_errors_not_misses(accept: object, problem: type[Exception]) -> None:
    with pytest.raises(problem):
        score_answer("anything", accept)  # type: ignore[arg-type]


def test_answer_must_be_text() -> None:
    with pytest.raises(TypeError, match="answer"):
        score_answer(None, "9:15")  # type: ignore[arg-type]


# ------------------------------------------------------------------ properties (hypothesis)

WORDS = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=2, max_size=8).filter(
    lambda w: w not in {"no", "not", "nor", "never", "except", "formerly", "previously"}
)


@given(st.integers(0, 10**6), st.integers(0, 10**6))
def test_integers_match_exactly(said: int, expected: int) -> None:
    assert score_answer(f"It is {said}.", expected) == ("hit" if said == expected else "miss")


@given(st.integers(0, 23), st.integers(0, 59), st.integers(1, 9))
def test_a_time_never_matches_inside_a_longer_time(hour: int, minute: int, digit: int) -> None:
    time = f"{hour}:{minute:02d}"
    assert score_answer(f"At {digit}{time} sharp.", time) == "miss"
    assert score_answer(f"At {time} sharp.", time) == "hit"


@given(st.lists(WORDS, min_size=1, max_size=3).map(" ".join))
def test_a_negated_value_is_never_a_hit_and_a_rejected_one_always_fails(value: str) -> None:
    assert score_answer(f"It is not {value}.", value) != "hit"
    assert score_answer(f"It is {value}, or 14:00.", "14:00", value) == "stale"
