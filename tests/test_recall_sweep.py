"""The recall sweep: knee rule on constructed curves, retention policies, the reader, determinism,
real SQLite stores in tmp_path, and the model path against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks_lib.contracts import parse_document
from tasks_lib.suites.recall import (
    SweepConfig,
    SweepResult,
    find_knee,
    gate_failures,
    run_sweep,
)
from tasks_lib.suites.recall.errors import RecallError, RecallModelError
from tasks_lib.suites.recall.reader import ABSTAIN_ANSWER, extract_answer
from tasks_lib.suites.recall.results import ModelConfig
from tasks_lib.suites.recall.retention import SummaryPolicy, Turn, WindowPolicy
from tasks_lib.suites.recall.sweep import majority
from tests.scripted_openai import ScriptedOpenAI, final

# ------------------------------------------------------------------ the knee


@pytest.mark.parametrize(
    ("curve", "knee"),
    [
        ({10: 1.0, 40: 0.92, 100: 0.58, 250: 0.25}, (40, 100)),  # seed 001's curve: flat, then the cliff
        ({10: 1.0, 40: 1.0, 100: 1.0, 250: 1.0}, None),  # flat
        ({10: 0.9, 40: 0.7, 100: 0.7}, None),  # a drop of exactly 20 points is not past the bar
        ({10: 0.9, 40: 0.69, 100: 0.2}, (10, 40)),  # first length past the bar, not the steepest step
        ({250: 0.1, 10: 1.0, 40: 0.95}, (40, 250)),  # lengths need not arrive sorted
        ({10: 0.5, 40: 0.9, 100: 0.2}, (40, 100)),  # measured from the shortest length, not the best
        ({10: 1.0}, None),
    ],
    ids=["seed-curve", "flat", "exactly-at-bar", "first-not-steepest", "unsorted", "from-shortest", "single-length"],
)
def test_knee_on_constructed_curves(curve: dict[int, float], knee: tuple[int, int] | None) -> None:
    found = find_knee(curve, 20.0)
    assert (None if found is None else (found.previous, found.length)) == knee


def test_knee_threshold_is_a_parameter_and_bad_curves_are_errors() -> None:
    curve = {10: 1.0, 40: 0.92, 100: 0.58}
    assert find_knee(curve, 5.0).length == 40  # type: ignore[union-attr]
    assert find_knee(curve, 50.0) is None
    with pytest.raises(ValueError, match="empty"):
        find_knee({})
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        find_knee({10: 1.5})


def test_majority_ties_go_to_the_worse_verdict() -> None:
    assert majority(["hit", "hit", "stale"]) == "hit"
    assert majority(["hit", "stale", "miss"]) == "stale"
    assert majority(["hit", "abstained"]) == "abstained"


# ------------------------------------------------------------------ session parts


def test_window_keeps_the_last_turns_and_summary_keeps_salient_sentences() -> None:
    window, summary = WindowPolicy(2), SummaryPolicy(2, 1)
    turns = [Turn(0, "user", "My locker code is 4817. Nice weather."), Turn(1, "assistant", "ok"), Turn(2, "user", "fine"), Turn(3, "user", "sure")]
    for turn in turns:
        window.observe(turn)
        summary.observe(turn)
    assert [t.index for t in window.retained()] == [2, 3]
    assert [t.text for t in summary.retained()] == ["My locker code is 4817.", "fine", "sure"]


def test_reader_prefers_the_latest_equally_relevant_turn_and_abstains_on_nothing() -> None:
    turns = [Turn(0, "user", "The dentist appointment is at 10:00."), Turn(5, "user", "Lunch was good."),
             Turn(9, "user", "The dentist moved my appointment to 14:30.")]
    assert extract_answer("When is my dentist appointment?", turns) == turns[2].text
    assert extract_answer("What is my blood type?", turns) == ABSTAIN_ANSWER
    assert extract_answer("When is my dentist appointment?", []) == ABSTAIN_ANSWER


# ------------------------------------------------------------------ whole sweeps


def small_corpus(folder: Path, turns: int = 60) -> Path:
    """Three cases (one of each kind) and `turns` neutral filler turns."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = [
        {"id": "standup", "kind": "recall", "probe": "When is my standup?",
         "phrasings": ["My standup is at 9:15 now.", "The standup moved to 9:15 UTC."], "accept": ["9:15"]},
        {"id": "room", "kind": "stale", "probe": "Which room is the design review in?",
         "phrasings": ["The design review is in room Orion.", "We booked room Orion for the design review."],
         "corrections": ["The design review moved to room Vega.", "Design review is in room Vega now."],
         "accept": ["Vega"], "reject": ["Orion"]},
        {"id": "editor", "kind": "false-memory", "probe": "Which text editor do I prefer?", "reject": ["vim"]},
    ]
    (folder / "cases.json").write_text(json.dumps({"schema_version": 1, "cases": cases}))
    topics = ["bread", "plants", "guitar", "bikes", "chess", "coffee"]
    conversations = [
        {"topic": topic, "turns": [{"speaker": "user" if i % 2 == 0 else "assistant", "text": f"Let us talk about {topic}, point {i}."}
                                   for i in range(turns // len(topics))]}
        for topic in topics
    ]
    (folder / "filler.json").write_text(json.dumps({"schema_version": 1, "conversations": conversations}))
    return folder


def test_bundled_suite_on_the_reference_store_in_tmp_path(tmp_path: Path) -> None:
    result = run_sweep(SweepConfig(lengths=(5, 30), seed=3), workdir=tmp_path)
    assert sorted(result.metrics_by_length) == [5, 30]
    assert len(result.outcomes) == 2 * 24 and [o.length for o in result.outcomes] == [5] * 24 + [30] * 24
    assert list(tmp_path.iterdir()) == []  # the run's SQLite stores were created in tmp_path and deleted
    for metrics in result.metrics_by_length.values():
        assert (metrics.recall.n, metrics.staleness.n, metrics.false_recall.n, metrics.abstention.n) == (12, 6, 6, 18)
        assert metrics.recall.lower <= metrics.recall.rate <= metrics.recall.upper  # type: ignore[operator]
    # the reference store finds the planted facts at both depths; the reader never invents one
    assert result.metrics_by_length[30].recall.rate == 1.0
    assert result.metrics_by_length[30].false_recall.rate == 0.0


def test_same_seed_same_numbers_other_seed_other_phrasings(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    config = SweepConfig(lengths=(5, 30), seed=3, cases_dir=str(corpus))
    first = run_sweep(config, workdir=tmp_path)
    assert first.model_dump() == run_sweep(config, workdir=tmp_path).model_dump()
    seeds = {s: run_sweep(config.model_copy(update={"seed": s, "memory": "none"})) for s in range(4, 9)}
    assert {tuple(o.phrasing for o in r.outcomes) for r in seeds.values()} != {tuple(o.phrasing for o in first.outcomes)}


def test_window_without_memory_falls_off_at_the_window_and_the_knee_says_so(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    result = run_sweep(SweepConfig(lengths=(4, 12, 40), memory="none", window=10, cases_dir=str(corpus)))
    assert result.curve("recall") == {4: 1.0, 12: 0.0, 40: 0.0}
    assert result.knee is not None and (result.knee.previous, result.knee.length) == (4, 12)
    # the reader abstains rather than guessing; at 12 the stale case's correction (6 turns back) is still in the window
    assert result.curve("abstention") == {4: 0.0, 12: 0.5, 40: 1.0}
    assert result.curve("false_recall") == {4: 0.0, 12: 0.0, 40: 0.0}
    assert gate_failures(result, min_recall=0.5) == [
        "recall at length 12 is 0.000 (0/1), below the minimum 0.500",
        "recall at length 40 is 0.000 (0/1), below the minimum 0.500",
    ]
    assert gate_failures(result) == []
    stored = json.loads(result.model_dump_json())  # what a flow stores as an artifact reads back unchanged
    assert parse_document(SweepResult, stored, "recall.json") == result


def test_stale_case_plays_old_value_then_correction(tmp_path: Path) -> None:
    """The correction comes after the old value, so a session that keeps only the last turn answers right."""
    corpus = small_corpus(tmp_path / "corpus")
    result = run_sweep(SweepConfig(lengths=(0, 2), memory="none", window=1, cases_dir=str(corpus)))
    room = {o.length: o for o in result.outcomes if o.case_id == "room"}
    assert room[0].verdict == "hit" and "Vega" in room[0].answer
    assert room[2].verdict == "abstained"  # one filler turn after the correction pushed it out of a 1-turn window


def test_bad_configuration_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(RecallError, match="strictly increasing"):
        run_sweep(SweepConfig(lengths=(40, 10), memory="none"))
    with pytest.raises(RecallError, match="use chroma, mcp-memory, reference or none"):
        run_sweep(SweepConfig(memory="nope"))
    corpus = small_corpus(tmp_path / "corpus", turns=12)
    with pytest.raises(RecallError, match="length 50 needs 50 filler turns"):
        run_sweep(SweepConfig(lengths=(50,), memory="none", cases_dir=str(corpus)))


# ------------------------------------------------------------------ the model path


def test_model_answers_are_scored_with_majority_of_three(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    replies = [
        final("It is at 9:15."), final("9:15 UTC."), final("I don't know."),  # standup: hit, hit, abstained -> hit
        final("Room Orion."), final("Room Vega, not Orion."), final("Orion."),  # room: stale, hit, stale -> stale
        final("You prefer vim."), final("I don't know."), final("I don't know."),  # editor: stale, abstained x2 -> abstained
    ]
    with ScriptedOpenAI(replies) as server:
        model = ModelConfig(base_url=server.base_url, model="scripted", samples=3)
        result = run_sweep(SweepConfig(lengths=(6,), cases_dir=str(corpus), model=model), workdir=tmp_path)
    verdicts = {o.case_id: (o.verdict, o.sample_verdicts) for o in result.outcomes}
    assert verdicts == {
        "standup": ("hit", ("hit", "hit", "abstained")),
        "room": ("stale", ("stale", "hit", "stale")),
        "editor": ("abstained", ("stale", "abstained", "abstained")),
    }
    assert result.model_calls == 9
    body = server.bodies[0]
    assert body["model"] == "scripted" and body["temperature"] == 0.0
    prompt = body["messages"][1]["content"]
    assert "Question: When is my standup?" in prompt and "9:15" in prompt  # the recalled fact reached the model
    m = result.metrics_by_length[6]
    assert (m.recall.k, m.staleness.k, m.false_recall.k, m.abstention.k) == (1, 1, 0, 0)


def test_model_endpoint_failure_is_a_recall_model_error(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    with ScriptedOpenAI([]) as server:  # an exhausted script answers HTTP 500
        model = ModelConfig(base_url=server.base_url, model="scripted")
        with pytest.raises(RecallModelError, match="HTTP 500"):
            run_sweep(SweepConfig(lengths=(2,), memory="none", cases_dir=str(corpus), model=model))


def test_any_ask_step_and_any_adapter_plug_in(tmp_path: Path) -> None:
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    corpus = small_corpus(tmp_path / "corpus")
    seen: list[tuple[str, int, int]] = []
    opened: list[Path] = []

    def always_abstain(question: str, retained: tuple, recalled: tuple) -> list[str]:
        seen.append((question, len(retained), len(recalled)))
        return ["I don't know."]

    def factory(folder: Path) -> SqliteMemoryStore:
        opened.append(folder)
        folder.mkdir(parents=True)
        return SqliteMemoryStore(folder / "m.sqlite", "hashed")

    result = run_sweep(SweepConfig(lengths=(3, 8), memory="my-store", window=4, cases_dir=str(corpus)),
                       ask=always_abstain, memory_factory=factory, workdir=tmp_path)
    assert [p.name for p in opened] == ["standup", "room", "editor"]  # one fresh store per case
    assert ("When is my standup?", 4, 5) in seen  # the window and the top-5 recall reached the ask step
    assert result.curve("abstention") == {3: 1.0, 8: 1.0} and result.curve("false_recall") == {3: 0.0, 8: 0.0}
    with pytest.raises(RecallError, match="must return a non-empty list of texts"):
        run_sweep(SweepConfig(lengths=(3,), memory="none", cases_dir=str(corpus)), ask=lambda q, r, m: [])
