"""The one line per suite `memtrial run` prints, read back from the stored results (flows/suites.py)."""

from __future__ import annotations

from pathlib import Path

from flows.suites import suite_headline
from tasks_lib.artifacts import LocalStore
from tasks_lib.suites.recall import SweepConfig, run_sweep
from tasks_lib.suites.retrieval import RetrievalGates, bundled_cases, run_retrieval_suite
from tests.test_recall_sweep import small_corpus
from tests.test_retrieval_suite import reference


def test_retrieval_headline_names_every_failed_gate_with_value_and_bar(tmp_path: Path) -> None:
    cases, graph, policy = bundled_cases()
    strict = RetrievalGates(recall_at_5_min=1.0)  # a bar the offline default cannot reach: something must fail
    result = run_retrieval_suite(reference, cases, strict, graph_cases=graph,
                                 policy=policy, adapter_name="reference")
    LocalStore(tmp_path).put_bytes("r.json", result.model_dump_json().encode())
    line = suite_headline("retrieval", str(tmp_path), "r.json")
    failed = [g for g in result.gates if not g.passed]
    assert failed, "the strict bar must fail"
    assert f"{len(result.gates) - len(failed)}/{len(result.gates)} gates held" in line
    for gate in failed:
        assert f"{gate.name} " in line and f"{gate.op} {gate.threshold:g}" in line
    assert all(f"{g.name} " not in line.split("FAILED", 1)[1] for g in result.gates if g.passed)


def test_recall_headline_shows_the_curve_and_the_knee(tmp_path: Path) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    result = run_sweep(SweepConfig(memory="none", lengths=(2, 6), window=4, cases_dir=str(corpus)), workdir=tmp_path)
    LocalStore(tmp_path / "a").put_bytes("s.json", result.model_dump_json().encode())
    line = suite_headline("recall", str(tmp_path / "a"), "s.json")
    assert line.startswith("recall by length {2: ")
    assert (f"knee between {result.knee.previous} and {result.knee.length} turns" if result.knee else "no knee") in line
    assert f"6: {result.metrics_by_length[6].recall.rate:.2f}" in line
