"""The recall sweep: knee rule on constructed curves, retention policies, the reader, determinism,
real SQLite stores in tmp_path, and the model path against a scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tasks_lib.budget import BudgetStop, Ledger, key_fingerprint, write_ledger
from tasks_lib.contracts import parse_document
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.embeddings import get_embedder
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.memory.registry import MEMORY_SYSTEMS
from tasks_lib.suites.recall import (
    SweepConfig,
    SweepResult,
    find_knee,
    gate_failures,
    run_sweep,
)
from tasks_lib.suites.recall.errors import RecallError, RecallModelError
from tasks_lib.suites.recall.llm import guard_model_reader
from tasks_lib.suites.recall.reader import ABSTAIN_ANSWER, context_ranking, ranked_answer
from tasks_lib.suites.recall.results import CaseOutcome, ModelConfig
from tasks_lib.suites.recall.retention import SummaryPolicy, Turn, WindowPolicy
from tasks_lib.suites.recall.sweep import length_metrics, majority
from tasks_lib.suites.recall.variants import RECALL_VARIANTS
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


def test_reader_answers_from_the_memorys_order_not_the_latest_turn() -> None:
    """The reader adds no recency of its own: the memory ranked the old value first, so that is the answer."""
    old, new = Turn(0, "user", "The dentist appointment is at 10:00."), Turn(9, "user", "The dentist moved it to 14:30.")
    assert ranked_answer([old, new], [0.9, 0.8]) == old.text
    assert ranked_answer([new, old], [0.9, 0.8]) == new.text
    assert ranked_answer([old, new], [0.9, 0.8], abstain_below=0.95) == ABSTAIN_ANSWER  # the system's own threshold
    assert ranked_answer([], []) == ABSTAIN_ANSWER


def test_context_ranking_without_memory_orders_the_window_by_similarity_and_drops_unrelated_turns() -> None:
    retained = [Turn(3, "user", "Let us talk about bread."), Turn(4, "user", "My standup is at 9:15 now."),
                Turn(5, "assistant", "Quantum chromodynamics, gluon confinement.")]
    turns, scores = context_ranking("When is my standup?", retained, get_embedder("hashed"), k=5)
    assert turns[0].index == 4 and list(scores) == sorted(scores, reverse=True)
    assert 5 not in [t.index for t in turns]  # below the embedder's min_similarity: no candidate at all
    assert context_ranking("When is my standup?", [], get_embedder("hashed"), k=5) == ((), ())


# ------------------------------------------------------------------ whole sweeps


def small_corpus(folder: Path, turns: int = 60) -> Path:
    """Three cases (one of each kind) and `turns` neutral filler turns."""
    folder.mkdir(parents=True, exist_ok=True)
    cases = [
        {"id": "standup", "kind": "recall", "probe": "When is my standup?",
         "phrasings": ["My standup is at 9:15 now.", "The standup moved to 9:15 UTC."], "accept": ["9:15"]},
        {"id": "room", "kind": "stale", "probe": "In which room do we meet?",
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
    assert len(result.outcomes) == 2 * 44 and [o.length for o in result.outcomes] == [5] * 44 + [30] * 44
    assert list(tmp_path.iterdir()) == []  # the run's SQLite stores were created in tmp_path and deleted
    for metrics in result.metrics_by_length.values():
        assert (metrics.recall.n, metrics.staleness.n, metrics.false_recall.n, metrics.abstention.n) == (24, 10, 10, 34)
        assert metrics.recall.lower <= metrics.recall.rate <= metrics.recall.upper  # type: ignore[operator]
        assert metrics.retrieval_recall is not None and metrics.miss is not None
        assert metrics.retrieval_recall.rate >= metrics.recall.rate  # type: ignore[operator]


def test_an_offline_answer_comes_from_the_window_or_the_memorys_top_k(tmp_path: Path) -> None:
    """The reader cannot invent a fact: every hit is a fact still in the window or among the memory's top k."""
    result = run_sweep(SweepConfig(lengths=(5, 30), seed=3, embedder="hashed"), workdir=tmp_path)
    for outcome in result.outcomes:
        assert outcome.recalled is not None and outcome.recalled <= 5
        if outcome.kind == "recall" and outcome.verdict == "hit":
            assert outcome.fact_in_window or outcome.fact_rank is not None, outcome
    for metrics in result.metrics_by_length.values():
        assert metrics.availability is not None and metrics.retrieval_recall is not None
        assert metrics.availability.rate >= max(metrics.recall.rate, metrics.retrieval_recall.rate)  # type: ignore[operator]


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
    known = ", ".join(sorted([*MEMORY_SYSTEMS, *RECALL_VARIANTS]))  # every registered system and recall variant, by name
    assert "reference-first-heard" in known and "chroma" in known
    with pytest.raises(RecallError, match=re.escape(f"use {known} or none")):
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


# ------------------------------------------------------------------ retrieval level, hostile stores


def outcome(kind: str, verdict: str, **ranks: object) -> CaseOutcome:
    return CaseOutcome(case_id="c", kind=kind, length=10, phrasing=None, verdict=verdict, passed=False,  # type: ignore[arg-type]
                       answer="", sample_verdicts=(verdict,), **ranks)  # type: ignore[arg-type]


def test_stale_case_answered_with_neither_value_is_counted_as_a_miss() -> None:
    """A stale case answered with some third value was in no metric; the `miss` column counts it."""
    m = length_metrics(10, [outcome("stale", "miss", recalled=5), outcome("stale", "stale", recalled=5),
                            outcome("stale", "hit", recalled=5)])
    assert (m.miss.k, m.miss.n, m.staleness.k) == (1, 3, 1)  # type: ignore[union-attr]


def test_retrieval_staleness_counts_the_old_value_ranked_above_its_correction() -> None:
    m = length_metrics(10, [outcome("stale", "hit", recalled=5, fact_rank=2, stale_rank=1),  # old above new: stale ranking
                            outcome("stale", "hit", recalled=5, fact_rank=1, stale_rank=3),
                            outcome("stale", "miss", recalled=5, fact_rank=None, stale_rank=4),  # only the old one recalled
                            outcome("stale", "miss", recalled=5)])
    assert m.retrieval_staleness is not None and m.retrieval_staleness.k == 2


def test_false_recall_at_retrieval_level_is_a_hit_at_or_above_the_abstention_threshold() -> None:
    cases = [outcome("false-memory", "miss", recalled=5, top_score=0.9), outcome("false-memory", "miss", recalled=5, top_score=0.3),
             outcome("false-memory", "abstained", recalled=0)]
    assert length_metrics(10, cases).retrieval_false_recall.k == 2  # type: ignore[union-attr]  # no threshold: any hit
    assert length_metrics(10, cases, abstain_below=0.5).retrieval_false_recall.k == 1  # type: ignore[union-attr]


def test_store_that_never_resolves_corrections_shows_staleness_and_the_same_retrieval_recall(tmp_path: Path) -> None:
    """reference-first-heard recalls what the reference store recalls, oldest first: the old room wins."""
    corpus = small_corpus(tmp_path / "corpus")
    runs = {name: run_sweep(SweepConfig(lengths=(2, 8), memory=name, cases_dir=str(corpus)), workdir=tmp_path)
            for name in ("reference", "reference-first-heard")}
    first_heard, reference = runs["reference-first-heard"], runs["reference"]
    assert first_heard.curve("staleness") == {2: 1.0, 8: 1.0}
    assert first_heard.curve("retrieval_staleness") == {2: 1.0, 8: 1.0}
    assert first_heard.curve("retrieval_recall") == reference.curve("retrieval_recall")
    room = [(o.fact_rank, o.stale_rank) for o in first_heard.outcomes if o.case_id == "room"]
    assert all(old is not None and (new is None or old < new) for new, old in room)


def test_memory_abstention_threshold_turns_weak_hits_into_abstentions(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    base = SweepConfig(lengths=(4, 50), cases_dir=str(corpus))
    never = run_sweep(base, workdir=tmp_path)
    strict = run_sweep(base.model_copy(update={"abstain_below": 1e6}), workdir=tmp_path)
    alone = run_sweep(base.model_copy(update={"memory": "none"}))
    # the memory declines every recall; the agent still answers from its own window, as without memory
    assert [(o.case_id, o.length, o.verdict) for o in strict.outcomes] == [(o.case_id, o.length, o.verdict) for o in alone.outcomes]
    assert all(o.verdict == "abstained" for o in strict.outcomes if o.length == 50)
    assert strict.curve("retrieval_false_recall") == {4: 0.0, 50: 0.0}
    editor = next(o for o in never.outcomes if o.case_id == "editor")
    assert (editor.verdict == "abstained") == (editor.top_score is None)  # without a threshold any hit is an answer


def test_result_written_before_the_retrieval_fields_still_reads(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    stored = json.loads(run_sweep(SweepConfig(lengths=(2, 4), memory="none", cases_dir=str(corpus))).model_dump_json())
    stored.pop("retrieval_knee")
    for metrics in stored["metrics_by_length"].values():
        for name in ("miss", "retrieval_recall", "retrieval_staleness", "retrieval_false_recall"):
            metrics.pop(name)
    for case in stored["outcomes"]:
        for name in ("recalled", "fact_rank", "stale_rank", "top_score"):
            case.pop(name)
    old = parse_document(SweepResult, stored, "old-recall.json")
    assert old.curve("retrieval_recall") == {2: None, 4: None} and old.curve("recall")[2] is not None


# ------------------------------------------------------------------ the model reader's budget guard

KEY = "sk-recall-eval-0001"


def budget_file(tmp_path: Path, balance: float) -> Path:
    write_ledger(tmp_path / "ledger.json", Ledger(opening_balance_usd=balance, key_ceiling_usd=20.0, key_status="active"))
    path = tmp_path / "budget.json"
    path.write_text(json.dumps({"provider": "ledger", "key_env": "RECALL_EVAL_KEY", "key_sha256": key_fingerprint(KEY),
                                "production_reserve_usd": 50.0, "pair_cap_usd": 10.0, "arm_ceiling_usd": 5.0,
                                "ledger_path": "ledger.json"}))
    return path


def test_paid_endpoint_without_a_budget_is_refused_before_any_request(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    model = ModelConfig(base_url="http://10.255.255.1:9/v1", model="paid")
    with pytest.raises(RecallModelError, match="--budget"):
        run_sweep(SweepConfig(lengths=(2,), cases_dir=str(corpus), model=model))


def test_budget_guard_refusal_stops_the_model_reader_before_its_first_request(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A balance that would eat the production reserve: the guard refuses, no request is ever sent."""
    corpus = small_corpus(tmp_path / "corpus")
    monkeypatch.setenv("RECALL_EVAL_KEY", KEY)
    model = ModelConfig(base_url="http://10.255.255.1:9/v1", model="paid", budget_config=str(budget_file(tmp_path, balance=55.0)))
    with pytest.raises(BudgetStop, match="shared-headroom"):
        run_sweep(SweepConfig(lengths=(2,), cases_dir=str(corpus), model=model))
    monkeypatch.setenv("RECALL_EVAL_KEY", "sk-production-key")
    with pytest.raises(BudgetStop, match="key-identity"):
        guard_model_reader(model.base_url, model.budget_config)
    monkeypatch.setenv("RECALL_EVAL_KEY", KEY)
    allowed = guard_model_reader(model.base_url, str(budget_file(tmp_path, balance=100.0)))
    assert allowed is not None and allowed.allowed
    assert guard_model_reader("http://127.0.0.1:8000/v1", None) is None  # a local model costs nothing


def test_sampling_above_zero_temperature_needs_a_majority_of_three() -> None:
    with pytest.raises(ValueError, match="3 or more samples"):
        ModelConfig(base_url="http://127.0.0.1:1/v1", model="m", temperature=0.7)
    assert ModelConfig(base_url="http://127.0.0.1:1/v1", model="m", temperature=0.7, samples=3).samples == 3


LOCOMO = Path(__file__).resolve().parents[1] / ".." / "shared" / "data" / "locomo" / "locomo10.json"


@pytest.mark.skipif(not LOCOMO.is_file(), reason="the LoCoMo file is not on this machine")
def test_locomo_filler_buries_a_fact_under_a_thousand_turns(tmp_path: Path) -> None:
    """Lengths to 1,000 need more than the authored 304 turns: LoCoMo filler, read at run time from the user's path."""
    corpus = small_corpus(tmp_path / "corpus")
    with pytest.raises(RecallError, match="length 1000 needs 1000 filler turns"):
        run_sweep(SweepConfig(lengths=(1000,), memory="none", cases_dir=str(corpus)))
    result = run_sweep(SweepConfig(lengths=(10, 1000), cases_dir=str(corpus), filler_dataset=str(LOCOMO)), workdir=tmp_path)
    assert result.filler == str(LOCOMO)
    standup = {o.length: o for o in result.outcomes if o.case_id == "standup"}
    assert standup[1000].recalled == 5 and standup[10].fact_rank is not None


class NewestFirstStore(SqliteMemoryStore):
    """A broken memory (a real reference store underneath): whatever the question, it serves its newest
    memories first, with the best score of the recall."""

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        hits = super().search(realm, query, 100, lanes)
        order = {memory_id: i for i, memory_id in enumerate(self.live_ids(realm))}
        top = max((h.score for h in hits), default=1.0)
        newest = sorted(hits, key=lambda hit: -order.get(hit.id, -1))[:k]
        return [h.model_copy(update={"score": top}) for h in newest]


def test_a_memory_that_serves_noise_first_cannot_make_the_agent_forget_its_window(tmp_path: Path) -> None:
    """Prevents the memory-backed agent losing its own context: the offline reader used to answer with the
    memory's first memory only, so a store serving its newest (filler) turns first scored below no memory
    while the fact sat in the window. Now the agent reads its window too: at lengths where every turn is
    still in the window it answers exactly as the agent without memory does."""
    corpus = small_corpus(tmp_path / "corpus")
    config = SweepConfig(lengths=(2, 8), embedder="hashed", cases_dir=str(corpus))
    noisy = run_sweep(config, workdir=tmp_path,
                      memory_factory=lambda folder: (folder.mkdir(parents=True, exist_ok=True), NewestFirstStore(folder / "m.sqlite", "hashed"))[1])
    alone = run_sweep(config.model_copy(update={"memory": "none"}))
    assert [o.fact_rank for o in noisy.outcomes if o.kind == "recall"] != [1, 1]  # the store really buries the fact
    assert [(o.case_id, o.length, o.verdict) for o in noisy.outcomes] == [(o.case_id, o.length, o.verdict) for o in alone.outcomes]
    assert noisy.curve("recall") == alone.curve("recall") == {2: 1.0, 8: 1.0}
    assert noisy.curve("availability") == {2: 1.0, 8: 1.0}  # the fact was in the window
