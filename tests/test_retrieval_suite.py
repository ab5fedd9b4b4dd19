"""The offline retrieval suite on the real SQLite reference store: it measures, reports, and its gates fail when they should.

The faulty adapters below are the reference store with one deliberate defect each (named as
such): they exist to prove that a gate can fail.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.memory.adapter import MAX_K, Accounting, MemoryHit, MemoryItem
from tasks_lib.memory.env import ABLATE_LANES_ENV
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.suites.retrieval import (
    RetrievalGates,
    RetrievalResult,
    bundled_cases,
    load_case_set,
    run_retrieval_suite,
)

CASES, GRAPH, POLICY = bundled_cases()
NO_GRAPH = RetrievalGates(graph_calibration=False)


def reference(folder: Path) -> SqliteMemoryStore:
    folder.mkdir(parents=True, exist_ok=True)
    return SqliteMemoryStore(folder / "memory.sqlite", "hashed")


def failed(result: RetrievalResult) -> set[str]:
    return {g.name for g in result.gates if not g.passed}


@pytest.fixture(scope="module")
def bundled() -> tuple[RetrievalResult, list[Path]]:
    folders: list[Path] = []

    def factory(folder: Path) -> SqliteMemoryStore:
        folders.append(folder)
        return reference(folder)

    result = run_retrieval_suite(factory, CASES, graph_cases=GRAPH, policy=POLICY, adapter_name="reference")
    return result, folders


def test_the_disposable_store_is_created_and_removed(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    _, folders = bundled
    assert len(folders) == 2  # the suite's store and the calibration's store
    assert all(not f.exists() and not f.parent.exists() for f in folders)


def test_every_question_is_reported_with_its_top_texts(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    result, _ = bundled
    assert [c.id for c in result.cases] == [c.id for _, c in CASES.cases()]
    for row in result.cases:
        if row.hit_at_5 is False:
            assert all(t.text for t in row.top)  # a miss shows what came back instead (possibly nothing)
        assert len(row.top) <= 5
    assert result.counts["paraphrase"] == 12 and result.groups == len(CASES.groups)


def test_efficiency_is_read_from_the_adapters_accounting(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    result, _ = bundled
    e = result.efficiency
    assert e.llm_calls == 0 and e.llm_tokens == 0 and e.llm_cost_usd == 0.0
    assert e.queries == len(result.cases)
    # the reference store embeds every remember batch once and every semantic query once
    assert e.embedding_texts == e.memories_stored + e.queries and e.vector_coverage == 1.0
    assert e.storage_bytes > 0 and e.index_ms > 0 and e.search_ms_p95 >= e.search_ms_mean > 0
    assert e.context_bytes_top_5 > e.automatic_context_bytes > 0
    assert 0 < (e.duplicate_ratio or 0) < 1  # the duplicates group stores exact copies; the reference store does not merge them


def test_reference_store_claims(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    """What the reference store promises: no stale values, abstention holds, one-hop graph expansion pays off without leaks."""
    result, _ = bundled
    q = result.quality
    assert q.stale_recall == 0.0 and q.false_recall == 0.0
    assert q.abstention["ambiguous-binding"] == 1.0 and q.unanswerable_abstention == 1.0
    assert result.graph is not None
    gain = (result.graph.recall_at_5_on["multi-hop"] or 0) - (result.graph.recall_at_5_off["multi-hop"] or 0)
    assert gain >= 0.10 and result.graph.leaks == 0 and result.graph.required_misses == 0
    assert result.graph.embedding_calls_per_query == 1.0 and result.graph.llm_calls == 0
    by_name = {g.name: g for g in result.gates}
    assert by_name["recall_at_5_min"].value == q.recall_at_5 == result.score
    assert result.passed == all(g.passed for g in result.gates)


def test_the_suite_is_deterministic(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    first, _ = bundled
    again = run_retrieval_suite(reference, CASES, NO_GRAPH, policy=POLICY, adapter_name="reference")
    assert again.quality == first.quality
    assert [(c.id, c.rank, c.automatic) for c in again.cases] == [(c.id, c.rank, c.automatic) for c in first.cases]


class ForgetsSupersession(SqliteMemoryStore):
    """FAULTY ON PURPOSE: drops subjects, supersedes and corrections, so old values stay live."""

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        plain = [MemoryItem(text=i.text, speaker=i.speaker, timestamp=i.timestamp, session=i.session) if isinstance(i, MemoryItem) else i for i in items]
        return super().remember(realm, plain)


class RanksBackwards(SqliteMemoryStore):
    """FAULTY ON PURPOSE: returns the worst matches first."""

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        return list(reversed(super().search(realm, query, MAX_K, lanes)))[:k]


class CallsAChatModel(SqliteMemoryStore):
    """FAULTY ON PURPOSE: its accounting reports one chat-model call per recall."""

    calls = 0

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        self.calls += 1
        return super().search(realm, query, k, lanes)

    def accounting(self) -> Accounting:
        return super().accounting().model_copy(update={"llm_calls": self.calls, "llm_tokens": 40 * self.calls})


def run_with(adapter_class: type[SqliteMemoryStore], gates: RetrievalGates = NO_GRAPH) -> RetrievalResult:
    def factory(folder: Path) -> SqliteMemoryStore:
        folder.mkdir(parents=True, exist_ok=True)
        return adapter_class(folder / "memory.sqlite", "hashed")

    return run_retrieval_suite(factory, CASES, gates, graph_cases=GRAPH, policy=POLICY, adapter_name=adapter_class.__name__.lower())


def test_stale_gate_fails_when_old_values_are_served() -> None:
    result = run_with(ForgetsSupersession)
    assert "stale_recall_max" in failed(result) and (result.quality.stale_recall or 0) > 0.05
    assert any(c.stale_in_top_5 for c in result.cases if c.case_class == "update")


def test_ranking_gates_fail_for_a_backwards_ranking() -> None:
    result = run_with(RanksBackwards)
    assert {"recall_at_5_min", "mrr_min"} <= failed(result) and not result.passed


def test_llm_gate_reads_the_adapters_own_counter() -> None:
    result = run_with(CallsAChatModel)
    assert result.efficiency.llm_calls == len(result.cases) and result.efficiency.llm_tokens == 40 * len(result.cases)
    assert "llm_calls_max" in failed(result)


def test_graph_gate_fails_with_the_graph_lane_ablated(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ABLATE_LANES_ENV, "graph")
    result = run_with(SqliteMemoryStore, RetrievalGates())
    assert result.graph is not None and result.graph.recall_at_5_on == result.graph.recall_at_5_off
    assert "graph_multi_hop_gain_min" in failed(result)


class NoGraphLane(SqliteMemoryStore):
    """An adapter without a graph lane (the reference store's other lanes)."""

    LANES = ("keyword", "semantic", "corrections")


def test_calibration_without_a_graph_lane_fails_and_says_why() -> None:
    result = run_with(NoGraphLane, RetrievalGates())
    gate = next(g for g in result.gates if g.name == "graph_calibration")
    assert not gate.passed and "no 'graph' lane" in gate.detail and result.graph is None


def test_gates_from_a_file_can_pass_a_small_case_set(tmp_path: Path) -> None:
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "tiny.json").write_text(json.dumps({
        "schema_version": 1, "group": "tiny", "description": "two facts and two probes",
        "memories": [{"key": "city", "text": "Anna lives in Lisbon."}, {"key": "blood", "text": "My blood type is O negative."}],
        "cases": [
            {"id": "t-city", "class": "direct", "question": "Where does Anna live?", "relevant": ["city"], "automatic": "inject"},
            {"id": "t-blood", "class": "direct", "question": "What is my blood type?", "relevant": ["blood"], "automatic": "inject"},
            {"id": "t-ood", "class": "out-of-domain", "question": "What is the capital of Peru?", "automatic": "abstain"},
            {"id": "t-miss", "class": "missing-attribute", "question": "What is Anna's phone number?", "automatic": "abstain"},
            {"id": "t-amb", "class": "ambiguous-binding", "question": "When is Anna's blood test?", "automatic": "abstain"},
            {"id": "t-upd", "class": "update", "question": "Where does Anna live now?", "relevant": ["city"], "stale": ["blood"]},
        ],
    }))
    tiny = load_case_set(folder)
    gates = RetrievalGates(direct_probes_min=2, ambiguous_probes_min=1, graph_calibration=False)
    result = run_retrieval_suite(reference, tiny, gates, policy=POLICY)
    assert result.quality.recall_at_1 == 1.0 and result.quality.direct_coverage == 1.0
    assert result.passed, failed(result)
    strict = run_retrieval_suite(reference, tiny, RetrievalGates(graph_calibration=False), policy=POLICY)
    assert {"direct_probes_min", "ambiguous_probes_min"} <= failed(strict)


def test_an_empty_population_fails_its_gate() -> None:
    """A gate that checked nothing is not a pass: without policy probes the policy gate fails."""
    tiny_cases = CASES.model_copy(update={"groups": CASES.groups[:1]})
    result = run_retrieval_suite(reference, tiny_cases, NO_GRAPH, policy=None)
    policy_gate = next(g for g in result.gates if g.name == "policy_pass_min")
    assert policy_gate.value is None and not policy_gate.passed
    stale_gate = next(g for g in result.gates if g.name == "stale_recall_max")
    assert stale_gate.value is None and not stale_gate.passed  # the first group holds no update case


def test_result_serialises_and_round_trips(bundled: tuple[RetrievalResult, list[Path]]) -> None:
    result, _ = bundled
    data: dict[str, Any] = json.loads(result.model_dump_json())
    assert RetrievalResult.model_validate(data) == result
