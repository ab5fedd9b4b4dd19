"""LongMemEval adapter on the real sample files: every quirk rule counted, each with a test on real records."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.memory.adapter import MAX_TEXT_BYTES
from tasks_lib.suites.public.groups import DatasetError
from tasks_lib.suites.public.longmemeval import LONGMEMEVAL_RULES, load_longmemeval

DATA = Path(__file__).resolve().parents[2] / "shared/data/longmemeval"
SAMPLE = DATA / "longmemeval_oracle_sample_seed_42.json"
FILES = [SAMPLE, DATA / "longmemeval_example.json", DATA / "longmemeval_example2.json", DATA / "longmemeval_sample.json"]

pytestmark = pytest.mark.skipif(not all(f.is_file() for f in FILES), reason=f"LongMemEval samples not found in {DATA}")


@pytest.fixture(scope="module")
def records() -> list[dict[str, Any]]:
    return json.loads(SAMPLE.read_text(encoding="utf-8"))


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "lme.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_all_files_counts() -> None:
    """101 distinct ids: 1 repeat, 4 abstentions, 6 assistant-only evidence records out, 91 scored."""
    groups, log = load_longmemeval(FILES)
    assert len(groups) == 91
    assert dict(log.counts) == {
        "duplicate_question_id": 1,
        "abstention_skipped": 4,
        "answer_integer": 8,
        "role_not_indexed": 1097,
        "no_relevant_turn_skipped": 6,
    }
    assert set(log.counts) <= set(LONGMEMEVAL_RULES)


def test_duplicate_question_id_across_files_is_skipped() -> None:
    """longmemeval_example.json and longmemeval_example2.json both hold 09ba9854_abs."""
    _, log = load_longmemeval([DATA / "longmemeval_example.json", DATA / "longmemeval_example2.json"])
    assert log["duplicate_question_id"] == 1 and log["abstention_skipped"] == 1


def test_abstention_records_are_not_scored() -> None:
    groups, log = load_longmemeval([DATA / "longmemeval_sample.json"])
    assert [g.group_id for g in groups] == ["6a1eabeb"] and log["abstention_skipped"] == 1


def test_user_turns_only_by_default_with_upstream_ids(records: list[dict[str, Any]]) -> None:
    """Turn ids are <session id>_<turn number from 1>; relevant = user has_answer turns of answer sessions."""
    groups, _ = load_longmemeval([SAMPLE], limit=1)
    rec = records[0]
    expected = {
        f"{sid}_{i + 1}"
        for sid, session in zip(rec["haystack_session_ids"], rec["haystack_sessions"])
        for i, t in enumerate(session)
        if t["role"] == "user" and t["has_answer"] and sid in rec["answer_session_ids"]
    }
    assert groups[0].questions[0].relevant_turns == expected and expected
    assert {t.speaker for t in groups[0].turns} == {"user"}
    assert groups[0].turns[0].timestamp == rec["haystack_dates"][0]


def test_assistant_evidence_needs_assistant_turns(records: list[dict[str, Any]]) -> None:
    """single-session-assistant records are counted out with user turns only, scored with both roles."""
    assistant = [r["question_id"] for r in records if r["question_type"] == "single-session-assistant"]
    groups, log = load_longmemeval([SAMPLE])
    assert log["no_relevant_turn_skipped"] == len(assistant) == 6
    both, log2 = load_longmemeval([SAMPLE], roles=("user", "assistant"))
    assert log2["no_relevant_turn_skipped"] == 0 and log2["role_not_indexed"] == 0
    assert set(assistant) <= {g.group_id for g in both} and len(both) == len(groups) + 6


def test_integer_answers_are_counted(records: list[dict[str, Any]]) -> None:
    _, log = load_longmemeval([SAMPLE])
    assert log["answer_integer"] == sum(1 for r in records if not isinstance(r["answer"], str)) == 8


@pytest.mark.parametrize(
    ("rule", "edit"),
    [
        ("haystack_lists_unequal", lambda r: r["haystack_dates"].pop()),
        ("answer_session_not_in_haystack", lambda r: r["answer_session_ids"].append("answer_nowhere")),
        ("role_unknown", lambda r: r["haystack_sessions"][0][1].update(role="system")),
        ("has_answer_missing", lambda r: r["haystack_sessions"][0][0].pop("has_answer")),
        ("has_answer_outside_answer_session", lambda r: (r["answer_session_ids"].remove(r["haystack_session_ids"][-1]) if len(r["answer_session_ids"]) > 1 else None)),
        ("empty_turn_skipped", lambda r: r["haystack_sessions"][0][2].update(content=" ")),
        ("turn_text_truncated", lambda r: r["haystack_sessions"][0][2].update(content="é" * MAX_TEXT_BYTES)),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_rules_that_do_not_fire_on_the_files_fire_on_edited_real_records(records: list[dict[str, Any]], tmp_path: Path, rule: str, edit: Any) -> None:
    """Edit a real multi-session record (several answer sessions, has_answer user turns in each)."""
    rec = copy.deepcopy(next(r for r in records if r["question_type"] == "multi-session" and len(r["answer_session_ids"]) > 2))
    edit(rec)
    groups, log = load_longmemeval([_write(tmp_path, [rec])])
    assert log[rule] >= 1, rule
    if rule in ("haystack_lists_unequal", "answer_session_not_in_haystack"):
        assert groups == []
    if rule == "turn_text_truncated":
        assert max(len(t.text.encode()) for t in groups[0].turns) <= MAX_TEXT_BYTES


def test_unknown_role_option_is_an_error() -> None:
    with pytest.raises(DatasetError, match="roles"):
        load_longmemeval([SAMPLE], roles=("system",))


@pytest.mark.parametrize(
    ("content", "message"),
    [("[", "cannot read it as JSON"), ('{"a": 1}', "not a list of records"), ('[{"question_id": "q"}]', "field 'question_type' is missing")],
    ids=["not-json", "not-a-list", "missing-field"],
)
def test_bad_files_raise_one_clear_error(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(DatasetError, match=message) as error:
        load_longmemeval([path])
    assert str(path) in str(error.value)


def test_session_level_reads_noans_turns_as_another_session_as_upstream(records: list[dict[str, Any]]) -> None:
    """A non-evidence turn of an answer session ranked first does not retrieve that session at the official level."""
    from tasks_lib.suites.public.metrics import official_sessions, score_question

    groups, _ = load_longmemeval([SAMPLE], limit=1)
    group = groups[0]
    question = group.questions[0]
    session_of = {t.turn_id: t.session for t in group.turns}
    official = official_sessions(session_of, question.relevant_turns)
    other = next(t for t in group.turns if t.turn_id not in question.relevant_turns and official[t.turn_id] != t.session)
    assert official[other.turn_id] == f"noans:{other.session}"
    corpus = [t.turn_id for t in group.turns]
    scores = score_question(group.group_id, question.question_id, question.slice, [other.turn_id], question.relevant_turns, corpus, session_of, (1,))
    assert scores.values[("session", "recall_any", 1)] == 0.0 and scores.values[("turn", "recall_any", 1)] == 0.0
    assert scores.values[("session_any_turn", "recall_any", 1)] == 1.0
    best = min(question.relevant_turns)
    scores = score_question(group.group_id, question.question_id, question.slice, [best], question.relevant_turns, corpus, session_of, (1,))
    assert scores.values[("session", "recall_any", 1)] == 1.0


def _upstream_turn_ids(record: dict[str, Any]) -> list[str]:
    """The corpus ids upstream's `process_item_flat_index` gives a record's user turns (turn granularity)."""
    ids = []
    for sid, session in zip(record["haystack_session_ids"], record["haystack_sessions"]):
        for i, turn in enumerate(session):
            if turn["role"] == "user":
                plain = f"{sid}_{i + 1}"
                ids.append(plain if "answer" not in sid or turn["has_answer"] else plain.replace("answer", "noans"))
    return ids


def test_official_session_relabelling_partitions_turns_as_upstream_ids_do(records: list[dict[str, Any]]) -> None:
    """Per question, the relabelled sessions group the turns exactly as upstream's stripped ids, with the same evidence sessions."""
    from tasks_lib.suites.public.metrics import official_sessions

    groups = {g.group_id: g for g in load_longmemeval([SAMPLE])[0]}
    checked = 0
    for record in records:
        group = groups.get(record["question_id"])
        if group is None:
            continue
        upstream = _upstream_turn_ids(record)
        assert [t.turn_id for t in group.turns] == [u.replace("noans", "answer") for u in upstream]
        relevant = group.questions[0].relevant_turns
        ours = official_sessions({t.turn_id: t.session for t in group.turns}, relevant)
        theirs = {t.turn_id: "_".join(u.split("_")[:-1]) for t, u in zip(group.turns, upstream)}
        pairing = set(zip((ours[t] for t in ours), (theirs[t] for t in ours)))
        assert len(pairing) == len({a for a, _ in pairing}) == len({b for _, b in pairing})
        assert {ours[t] for t in relevant} == {a for a, b in pairing if "answer" in b}
        checked += 1
    assert checked == len(groups) == 89


def test_a_file_of_abstention_records_only_is_a_clear_result_not_a_key_error(
    records: list[dict[str, Any]], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Two real abstention records alone: zero questions, both counted, a note; the CLI says so in one error line, exit 2."""
    from flows.cli.main import main
    from tasks_lib.suites.public import registry_factory, run_longmemeval

    abstentions = [r for r in records if r["question_id"].endswith("_abs")]
    assert len(abstentions) == 2
    path = _write(tmp_path, abstentions)
    result = run_longmemeval([path], registry_factory("reference"))
    assert (result.groups, result.questions, result.overall().scores) == (0, 0, ())
    assert next(q.count for q in result.quirks if q.rule == "abstention_skipped") == 2
    assert result.notes and "abstention_skipped 2" in result.notes[0] and "abstention record(s)" in result.notes[0]
    for extra in ([], ["--json"]):
        assert main(["suite", "longmemeval", "--dataset", str(path), *extra]) == 2
        printed = capsys.readouterr()
        assert "Traceback" not in printed.err and len(printed.err.strip().splitlines()) == 1
        assert "no question was scored" in printed.err and "abstention_skipped 2" in printed.err
        if extra:
            assert json.loads(printed.out)["questions"] == 0
        else:
            assert "note: no question was scored" in printed.out
