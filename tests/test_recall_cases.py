"""The recall corpus contract: bundled data valid, bad files named by file and field, LoCoMo filler rules."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.errors import ContractError
from tasks_lib.suites.recall.cases import MAX_SHARED_WORDS, load_cases, load_filler, shared_words
from tasks_lib.suites.recall.errors import RecallError
from tasks_lib.suites.recall.filler import FillerSource, bury_order, locomo_filler
from tasks_lib.suites.recall.sweep import BUNDLED_CASES

LOCOMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo10.json"

GOOD_CASE: dict[str, Any] = {
    "id": "standup", "kind": "recall", "probe": "When is my standup?",
    "phrasings": ["My standup is at 9:15.", "Standup moved to 9:15 UTC."], "accept": ["9:15"],
}


def write_cases(folder: Path, cases: list[dict[str, Any]]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cases.json").write_text(json.dumps({"schema_version": 1, "cases": cases}))
    return folder


def test_bundled_corpus_is_valid_and_deep_enough() -> None:
    cases = load_cases(BUNDLED_CASES)
    conversations = load_filler(BUNDLED_CASES, cases)
    kinds = {kind: sum(c.kind == kind for c in cases) for kind in ("recall", "stale", "false-memory")}
    assert kinds == {"recall": 24, "stale": 10, "false-memory": 10} and len(cases) >= 40
    assert all(len(c.phrasings) >= 2 for c in cases if c.kind != "false-memory")
    assert sum(len(c.turns) for c in conversations) >= 250 + 2  # the deepest default burial plus the planted turns


def test_bundled_probes_are_paraphrases_not_word_matches() -> None:
    """A probe repeating its fact's words lets a keyword match pass for memory: at most one shared content word."""
    for case in load_cases(BUNDLED_CASES):
        for text in (*case.phrasings, *case.corrections):
            assert len(shared_words(case.probe, text)) <= MAX_SHARED_WORDS, (case.id, text)


def test_bundled_cases_plant_distractors_and_ask_in_domain_false_memory_probes() -> None:
    """Every case competes with a distractor in the same store; a false-memory probe names something that exists."""
    cases = load_cases(BUNDLED_CASES)
    assert all(case.distractors for case in cases)
    for case in (c for c in cases if c.kind == "false-memory"):
        assert any(shared_words(case.probe, text) for text in case.distractors), case.id


@pytest.mark.parametrize(
    ("change", "field", "message"),
    [
        ({"phrasings": ["My standup is at 9:15.", "Standup is early."]}, "cases[0].phrasings[1]", "does not state"),
        ({"probe": "Is standup at 9:15?"}, "cases[0].probe", "gives away"),
        ({"phrasings": ["My standup is at 9:15."]}, "cases.0", "at least 2 phrasings"),
        ({"kind": "stale", "reject": ["10:00"], "corrections": ["Now 9:15.", "9:15 instead."],
          "phrasings": ["Standup is at 10:00.", "It's 10:00."]}, "", ""),
        ({"kind": "stale", "reject": ["10:00"], "corrections": ["Now 9:15.", "Still 10:00 and 9:15."],
          "phrasings": ["Standup is at 10:00.", "It's 10:00."]}, "cases[0].corrections[1]", "assert none of"),
        ({"kind": "false-memory"}, "cases.0", "plants nothing"),
        ({"extra": 1}, "cases.0.extra", ""),
        ({"accept": [True]}, "cases.0", ""),
        ({"probe": "When is my standup meeting at UTC?", "phrasings": ["My standup meeting is at 9:15.", "Standup moved to 9:15 UTC."]},
         "cases[0].phrasings[0]", "shares 2 content words with the probe (meet, standup)"),
        ({"kind": "stale", "reject": ["10:00"], "probe": "When does the daily sync move?", "phrasings": ["Sync is at 10:00.", "It's 10:00."],
          "corrections": ["The daily sync moved to 9:15.", "9:15 now."]}, "cases[0].corrections[0]", "shares 3 content words"),
        ({"distractors": ["Leo's standup is at 9:15 too."]}, "cases[0].distractors[0]", "states the case's own value"),
    ],
    ids=["phrasing-without-value", "probe-leaks-answer", "one-phrasing", "valid-stale", "correction-asserts-old",
         "false-memory-with-phrasings", "unknown-field", "boolean-value", "probe-repeats-the-facts-words",
         "correction-repeats-the-probes-words", "distractor-states-the-answer"],
)
def test_case_contract_names_file_and_field(tmp_path: Path, change: dict[str, Any], field: str, message: str) -> None:
    case = {**copy.deepcopy(GOOD_CASE), **change}
    folder = write_cases(tmp_path, [case])
    if not field:
        if "extra" in change or change.get("accept") == [True]:
            with pytest.raises(ContractError) as caught:
                load_cases(folder)
            assert str(folder / "cases.json") in str(caught.value)
        else:
            assert load_cases(folder)[0].kind == "stale"
        return
    with pytest.raises(ContractError) as caught:
        load_cases(folder)
    text = str(caught.value)
    assert str(folder / "cases.json") in text and f"'{field}" in text and message in text


def test_duplicate_ids_are_rejected(tmp_path: Path) -> None:
    folder = write_cases(tmp_path, [GOOD_CASE, GOOD_CASE])
    with pytest.raises(ContractError, match=r"cases\[1\]\.id': duplicate id 'standup'"):
        load_cases(folder)


def test_filler_that_states_a_case_value_is_named(tmp_path: Path) -> None:
    folder = write_cases(tmp_path, [GOOD_CASE])
    (folder / "filler.json").write_text(json.dumps({"schema_version": 1, "conversations": [
        {"topic": "x", "turns": [{"speaker": "user", "text": "Lunch at noon?"}, {"speaker": "assistant", "text": "Or 9:15, before the rush."}]},
    ]}))
    with pytest.raises(ContractError, match=r"filler.json: field 'conversations\[0\].turns\[1\]': states a case value \(standup:9:15\)"):
        load_filler(folder, load_cases(folder))


def test_missing_cases_file_is_a_contract_error(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match="cases.json: document: file does not exist"):
        load_cases(tmp_path)


def test_bury_order_is_a_seeded_prefix() -> None:
    source = FillerSource("t", tuple(tuple(("user", f"c{c} t{t}") for t in range(4)) for c in range(10)))
    deep = bury_order(source, 7, "case", 30)
    assert bury_order(source, 7, "case", 10) == deep[:10]  # deeper burial extends the same order
    assert bury_order(source, 7, "case", 30) == deep  # deterministic
    assert bury_order(source, 8, "case", 30) != deep  # shuffled per seed
    assert [t for t in deep if t[1].startswith("c0 ")] in ([], [("user", f"c0 t{i}") for i in range(4)], [("user", f"c0 t{i}") for i in range(2)])
    with pytest.raises(RecallError, match="length 41 needs 41 filler turns but t has 40"):
        bury_order(source, 7, "case", 41)


@pytest.mark.skipif(not LOCOMO.exists(), reason="../shared/data/locomo/locomo10.json is not present")
def test_locomo_filler_rules_on_the_real_file() -> None:
    cases = load_cases(BUNDLED_CASES)
    source = locomo_filler(LOCOMO, cases)
    assert source.turns > 5000  # all ten conversations, every session list
    assert len(source.conversations) == 272  # one per session_N list in the file
    # the quirks met in the real file are counted, never a crash: every turn there has text
    assert source.dropped.get("turn-without-text", 0) == 0
    assert source.dropped.get("turn-states-a-case-value", 0) >= 1
    assert {speaker for conversation in source.conversations for speaker, _ in conversation} == {"user", "assistant"}


def test_locomo_filler_counts_malformed_sessions_and_turns(tmp_path: Path) -> None:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps([{"conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo",
        "session_1": [{"speaker": "Ann", "text": "Hi Bo"}, {"speaker": "Bo"}, {"speaker": "Bo", "text": "  "},
                      {"speaker": "Bo", "text": "See you at 9:15"}],
        "session_2": "not a list", "session_2_date_time": "1 May",
    }}]))
    source = locomo_filler(path, [load_cases(write_cases(tmp_path / "c", [GOOD_CASE]))[0]])
    assert source.conversations == ((("user", "Hi Bo"),),)
    assert source.dropped == {"turn-without-text": 2, "turn-states-a-case-value": 1, "session-not-a-list": 1}


@pytest.mark.parametrize(("content", "message"), [("{", "cannot read it"), ('{"a": 1}', "JSON list"), ("[1]", r"'\[0\].conversation'")],
                         ids=["not-json", "not-a-list", "no-conversation"])
def test_locomo_filler_bad_files(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(RecallError, match=message):
        locomo_filler(path, [])
