"""LoCoMo adapter on the real locomo10.json: every quirk rule counted, each with a test on the real data."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.memory.adapter import MAX_TEXT_BYTES
from tasks_lib.suites.public.groups import DatasetError
from tasks_lib.suites.public.locomo import LOCOMO_RULES, load_locomo

LOCOMO = Path(__file__).resolve().parents[2] / "shared/data/locomo/locomo10.json"

pytestmark = pytest.mark.skipif(not LOCOMO.is_file(), reason=f"LoCoMo data not found at {LOCOMO}")


@pytest.fixture(scope="module")
def raw() -> list[dict[str, Any]]:
    return json.loads(LOCOMO.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def loaded() -> tuple[list[Any], Any]:
    return load_locomo(LOCOMO)


def _question(groups: list[Any], qid: str) -> Any:
    return next(q for g in groups for q in g.questions if q.question_id == qid)


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "locomo.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_whole_file_counts(loaded: tuple[list[Any], Any]) -> None:
    """10 conversations, 5,882 turns, 1,536 scored questions; every rule's count on the real file."""
    groups, log = loaded
    assert len(groups) == 10 and sum(len(g.turns) for g in groups) == 5882
    assert sum(len(g.questions) for g in groups) == 1536
    assert dict(log.counts) == {
        "dated_session_without_turns": 16,
        "image_caption_appended": 1226,
        "answer_integer": 6,
        "adversarial_only_answer": 444,
        "category_not_scored": 446,
        "evidence_entry_split": 4,
        "evidence_token_unparseable": 2,
        "evidence_zero_padding_removed": 1,
        "evidence_id_not_in_conversation": 2,
        "question_without_evidence_skipped": 4,
    }
    assert set(log.counts) <= set(LOCOMO_RULES)


def test_dated_sessions_without_dialogue_are_counted_not_indexed(loaded: tuple[list[Any], Any]) -> None:
    """conv-26 has dates for sessions 20-35 and no dialogue: 19 sessions indexed."""
    conv = loaded[0][0]
    assert conv.group_id == "conv-26" and len({t.session for t in conv.turns}) == 19


def test_image_caption_is_appended(raw: list[dict[str, Any]], loaded: tuple[list[Any], Any]) -> None:
    turn = next(t for t in raw[0]["conversation"]["session_1"] if t.get("blip_caption"))
    stored = next(t for t in loaded[0][0].turns if t.turn_id == turn["dia_id"])
    assert stored.text == f"{turn['text']} [shares a photo: {turn['blip_caption']}]"


@pytest.mark.parametrize(
    ("qid", "expected"),
    [
        ("conv-26/q37", {"D8:6", "D9:17"}),
        ("conv-49/q31", {"D9:1", "D4:4", "D4:6"}),
        ("conv-42/q88", {"D1:18", "D1:20"}),
        ("conv-43/q18", {"D1:14", "D2:7", "D4:7", "D5:15", "D20:21", "D26:36"}),
        ("conv-50/q69", {"D30:5"}),
        ("conv-47/q38", {"D18:1", "D18:7"}),
    ],
    ids=["split-semicolon", "split-spaces", "unparseable-D", "unparseable-D:11:26", "zero-padding", "not-in-conversation"],
)
def test_evidence_rules_on_real_questions(loaded: tuple[list[Any], Any], qid: str, expected: set[str]) -> None:
    assert _question(loaded[0], qid).relevant_turns == expected


def test_questions_without_evidence_and_category_5_are_not_scored(loaded: tuple[list[Any], Any]) -> None:
    ids = {q.question_id for g in loaded[0] for q in g.questions}
    assert not {"conv-26/q30", "conv-26/q46", "conv-50/q39", "conv-50/q42"} & ids
    assert {q.slice for g in loaded[0] for q in g.questions} == {"multi-hop", "temporal", "open-domain", "single-hop"}


def test_category_5_can_be_asked_for(raw: list[dict[str, Any]]) -> None:
    """Category 5 has evidence too; choosing it scores it instead of counting it out."""
    groups, log = load_locomo(LOCOMO, categories=(5,), limit=1)
    assert log["category_not_scored"] == sum(1 for q in raw[0]["qa"] if q["category"] != 5)
    assert groups[0].questions and {q.slice for q in groups[0].questions} == {"adversarial"}


def test_integer_answers_are_counted_and_do_not_break_loading(raw: list[dict[str, Any]], loaded: tuple[list[Any], Any]) -> None:
    integer = [(r["sample_id"], i) for r in raw for i, q in enumerate(r["qa"]) if not isinstance(q.get("answer", ""), str)]
    assert len(integer) == loaded[1]["answer_integer"] == 6


def test_limit_reads_the_first_conversations() -> None:
    groups, _ = load_locomo(LOCOMO, limit=2)
    assert [g.group_id for g in groups] == ["conv-26", "conv-30"]


def test_rules_that_do_not_fire_on_the_file_fire_on_an_edited_copy(raw: list[dict[str, Any]], tmp_path: Path) -> None:
    """A real conversation with: a session's date removed, an empty turn, a huge turn, category 9."""
    conv = copy.deepcopy(raw[1])
    dialogue = conv["conversation"]
    del dialogue["session_2_date_time"]
    dialogue["session_1"][0] = {**dialogue["session_1"][0], "text": "  "}
    dialogue["session_1"][1] = {**dialogue["session_1"][1], "text": "é" * MAX_TEXT_BYTES}
    conv["qa"][0] = {**conv["qa"][0], "category": 9}
    groups, log = load_locomo(_write(tmp_path, [conv]))
    assert (log["session_without_date"], log["empty_turn_skipped"], log["turn_text_truncated"], log["category_unknown"]) == (1, 1, 1, 1)
    turns = {t.turn_id: t for t in groups[0].turns}
    assert dialogue["session_1"][0]["dia_id"] not in turns
    assert len(turns[dialogue["session_1"][1]["dia_id"]].text.encode()) <= MAX_TEXT_BYTES
    assert all(t.timestamp is None for t in groups[0].turns if t.session == "D2")


@pytest.mark.parametrize(
    ("content", "message"),
    [("not json", "cannot read it as JSON"), ("{}", "not a list of conversations"), ('[{"sample_id": "x"}]', "field 'conversation' is missing")],
    ids=["not-json", "not-a-list", "missing-field"],
)
def test_bad_files_raise_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message) as error:
        load_locomo(path)
    assert str(path) in str(error.value)


def test_category_table_matches_what_the_questions_ask(loaded: tuple[list[Any], Any]) -> None:
    """A wrong category table (e.g. 1 single-hop, 3 multi-hop) would mislabel every slice: the data pins it.

    Temporal questions mostly ask "When"; multi-hop questions cite evidence in several sessions and
    single-hop ones almost never (see `CATEGORY_NAMES` for upstream's scorer, the other source).
    """
    by_slice: dict[str, list[Any]] = {}
    for group in loaded[0]:
        for question in group.questions:
            by_slice.setdefault(question.slice, []).append(question)

    def share(name: str, test: Any) -> float:
        return sum(map(test, by_slice[name])) / len(by_slice[name])

    def sessions(q: Any) -> int:
        return len({t.split(":")[0] for t in q.relevant_turns})

    assert share("temporal", lambda q: q.text.startswith("When")) > 0.7
    assert share("multi-hop", lambda q: sessions(q) > 1) > 0.9
    assert share("single-hop", lambda q: sessions(q) > 1) < 0.01
    assert max(share(s, lambda q: q.text.startswith("When")) for s in ("multi-hop", "open-domain", "single-hop")) < 0.05
