"""The public suites end to end on the real files: one disposable store per group, library and CLI agree."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.registry import memory_system_unavailable, open_memory_system
from tasks_lib.suites.public import PublicResult, registry_factory, run_locomo, run_longmemeval
from tasks_lib.suites.public.bench import load_locomo as bench_load_locomo
from tasks_lib.suites.public.bench import run_store
from tasks_lib.suites.public.locomo import LOCOMO_RULES

DATA = Path(__file__).resolve().parents[2] / "shared/data"
LOCOMO = DATA / "locomo/locomo10.json"
LME = DATA / "longmemeval/longmemeval_oracle_sample_seed_42.json"
MEMTRIAL = Path(sys.executable).with_name("memtrial")

pytestmark = pytest.mark.skipif(not (LOCOMO.is_file() and LME.is_file()), reason=f"public data not found in {DATA}")


class RecordingFactory:
    """Opens the reference store and remembers each folder and the store it opened."""

    def __init__(self) -> None:
        self.folders: list[Path] = []
        self.stores: list[MemoryAdapter] = []

    def __call__(self, folder: Path) -> MemoryAdapter:
        self.folders.append(folder)
        self.stores.append(open_memory_system("reference", folder))
        return self.stores[-1]


@pytest.fixture(scope="module")
def conv26() -> tuple[PublicResult, RecordingFactory]:
    factory = RecordingFactory()
    return run_locomo(LOCOMO, factory, memory="reference", limit=1), factory


def test_locomo_one_conversation(conv26: tuple[PublicResult, RecordingFactory]) -> None:
    result, _ = conv26
    assert (result.groups, result.questions, result.llm_calls) == (1, 150, 0)
    assert result.overall().get("turn", "recall_any", 5) >= 0.6
    assert [s.name for s in result.slices] == ["overall", "multi-hop", "open-domain", "single-hop", "temporal"]
    assert sum(s.questions for s in result.slices[1:]) == 150
    assert [q.rule for q in result.quirks] == list(LOCOMO_RULES)
    assert len(result.dataset_sha256[0]) == 64 and result.storage_bytes > 0


def test_each_group_store_is_temporary_and_deleted(conv26: tuple[PublicResult, RecordingFactory]) -> None:
    _, factory = conv26
    assert len(factory.folders) == 1 and not factory.folders[0].exists()


def test_scores_agree_with_the_benchmark_scorer_on_the_same_store(conv26: tuple[PublicResult, RecordingFactory], tmp_path: Path) -> None:
    """The reference store's ranking scored by retrieval_bench gives the same turn / session figures."""
    result, _ = conv26
    convs, _ = bench_load_locomo(LOCOMO)
    bench = run_store([c for c in convs if c.conv_id == "conv-26"], tmp_path, "hashed")
    overall = result.overall()
    for k in (1, 5, 10):
        assert overall.get("turn", "recall_any", k) == pytest.approx(bench.recall("turn", k))
        assert overall.get("session_of_top_turns", "recall_any", k) == pytest.approx(bench.recall("session", k))
        # upstream's session level grows k past the benchmark's 10-turn ranking, so it can only find more
        assert overall.get("session_any_turn", "recall_any", k) >= bench.recall("distinct_session", k) - 1e-9
        # relabelling only takes hits away: a non-evidence turn no longer retrieves its session
        assert overall.get("session", "recall_any", k) <= overall.get("session_any_turn", "recall_any", k) + 1e-9
    assert overall.get("session_any_turn", "recall_any", 1) == pytest.approx(bench.recall("distinct_session", 1))
    # with the relabelling, the first distinct session is an evidence one only when the first turn is evidence
    assert overall.get("session", "recall_any", 1) == pytest.approx(overall.get("turn", "recall_any", 1))


def test_groups_are_isolated_stores() -> None:
    """Three LongMemEval records: three folders, each store holding only its own record's turns."""
    factory = RecordingFactory()
    seen: list[int] = []
    original = factory.__call__

    def counting(folder: Path) -> MemoryAdapter:
        store = original(folder)
        real_recall = store.recall

        def recall(realm: str, query: str, k: int = 5, lanes=None):  # type: ignore[no-untyped-def]
            seen.append(len(store.live_ids(realm)))  # type: ignore[attr-defined]
            return real_recall(realm, query, k, lanes)

        store.recall = recall  # type: ignore[method-assign]
        return store

    result = run_longmemeval([LME], counting, limit=3)
    assert result.groups == 3 and len(set(factory.folders)) == 3
    assert not any(f.exists() for f in factory.folders)
    records = json.loads(LME.read_text())[:3]
    assert seen == [sum(1 for s in r["haystack_sessions"] for t in s if t["role"] == "user") for r in records]


def test_a_failing_adapter_still_deletes_its_folder(tmp_path: Path) -> None:
    folders: list[Path] = []

    def broken(folder: Path) -> MemoryAdapter:
        folders.append(folder)
        store = open_memory_system("reference", folder)
        store.remember = lambda realm, items: (_ for _ in ()).throw(RuntimeError("disk full"))  # type: ignore[method-assign]
        return store

    with pytest.raises(RuntimeError, match="disk full"):
        run_longmemeval([LME], broken, limit=1)
    assert folders and not folders[0].exists()


@pytest.mark.skipif(bool(memory_system_unavailable("chroma")), reason="chroma not installed")
def test_another_memory_system_runs_through_the_same_entry_point() -> None:
    result = run_longmemeval([LME], registry_factory("chroma"), memory="chroma", limit=2)
    assert result.questions == 2 and result.memory == "chroma"


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MEMTRIAL), "suite", *args], capture_output=True, text=True, timeout=300, check=False)


def test_cli_json_and_tables_give_the_same_numbers() -> None:
    args = ["longmemeval", "--dataset", str(LME), "--embedder", "hashed", "--limit", "4", "--k", "1", "--k", "5"]
    as_json = _cli(*args, "--json")
    assert as_json.returncode == 0, as_json.stderr
    result = PublicResult.model_validate(json.loads(as_json.stdout))
    assert result.ks == (1, 5) and result.questions == 4 and result.embedder == "hashed"  # the output names its embedder
    tables = _cli(*args)
    assert tables.returncode == 0, tables.stderr
    for s in result.slices:
        for level, metric in (("turn", "recall_any"), ("turn", "ndcg"), ("session", "recall_all")):
            row = next(
                line for line in tables.stdout.splitlines()
                if f" {s.name} " in line and f" {metric} " in line and line in tables.stdout.split(f": {level} level")[1].split(" level")[0]
            )
            assert f"{s.get(level, metric, 1):.3f}" in row and f"{s.get(level, metric, 5):.3f}" in row
    assert "quirk rules:" in tables.stdout and "LLM calls 0" in tables.stdout and "(embedder hashed)" in tables.stdout
    assert "session level (official)" in tables.stdout and "session_any_turn level (not official)" in tables.stdout


def test_cli_locomo_runs_with_limit_and_writes_its_rankings(tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    done = _cli("locomo", "--dataset", str(LOCOMO), "--embedder", "hashed", "--limit", "1", "--json", "--rankings", str(tmp_path / "r.parquet"))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["questions"] == 150
    assert len(set(pq.read_table(tmp_path / "r.parquet").column("question_id").to_pylist())) == 150


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["locomo", "--dataset", "/nonexistent/locomo10.json"], "--dataset: /nonexistent/locomo10.json is not a file"),
        (["locomo", "--dataset", str(LME), "--limit", "1"], "field 'sample_id' is missing"),
        (["longmemeval", "--dataset", str(LME), "--k", "0"], "--k: 0 given"),
        (["longmemeval", "--dataset", str(LME), "--roles", "system"], "roles"),
        (["longmemeval", "--dataset", str(LME), "--memory", "nope"], "unknown name 'nope'"),
        (["locomo", "--dataset", str(LOCOMO), "--rankings", "/nonexistent/r.parquet"], "--rankings: /nonexistent is not a folder"),
    ],
    ids=["missing-file", "wrong-format", "bad-k", "bad-role", "unknown-memory", "rankings-folder-missing"],
)
def test_cli_bad_input_is_one_line_exit_2(args: list[str], message: str) -> None:
    done = _cli(*args)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr and "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_rankings_parquet_lets_anyone_rescore_without_memtrial(tmp_path: Path) -> None:
    """Every scored question's ranking is in the Parquet table (ids, ranks, sessions, scores) and re-scores to the result's figures."""
    import pyarrow.parquet as pq

    from tasks_lib.suites.public.rankings import RANKINGS_SCHEMA, RankingRow, rankings_parquet

    rows: list[RankingRow] = []
    result = run_longmemeval([LME], registry_factory("reference"), limit=6, rankings=rows)
    path = tmp_path / "rankings.parquet"
    path.write_bytes(rankings_parquet(rows))
    table = pq.read_table(path)
    assert table.schema.equals(RANKINGS_SCHEMA) and table.num_rows == len(rows) > 0
    data = table.to_pylist()
    questions = list(dict.fromkeys(r["question_id"] for r in data))
    assert len(questions) == result.questions == 6
    for qid in questions:
        mine = [r for r in data if r["question_id"] == qid]
        assert [r["rank"] for r in mine] == list(range(1, len(mine) + 1))
        assert [r["score"] for r in mine] == sorted((r["score"] for r in mine), reverse=True)
        assert all(r["official_session_id"] in (r["session_id"], f"noans:{r['session_id']}") for r in mine)
    for k in result.ks:
        turn_hits = [any(r["relevant"] for r in data if r["question_id"] == q and r["rank"] <= k) for q in questions]
        assert sum(turn_hits) / len(questions) == pytest.approx(result.overall().get("turn", "recall_any", k))


def test_short_rankings_counts_a_truncated_ranking_that_covers_every_session() -> None:
    """A ranking cut at the recall depth that names every session is still short: upstream's grown k reads past its end."""
    from tasks_lib.suites.public.longmemeval import load_longmemeval
    from tasks_lib.suites.public.metrics import official_sessions, short_ranking
    from tasks_lib.suites.public.rankings import RankingRow

    rows: list[RankingRow] = []
    result = run_longmemeval([LME], registry_factory("reference"), ks=(1, 5, 10), limit=8, depth=10, rankings=rows)
    groups, _ = load_longmemeval([LME], limit=8)
    covering = expected = 0
    for group in groups:
        session_of = {t.turn_id: t.session for t in group.turns}
        question = group.questions[0]
        official = official_sessions(session_of, question.relevant_turns)
        ranked = [r.turn_id for r in rows if r.question_id == question.question_id and r.turn_id is not None]
        short = short_ranking(ranked, list(session_of), official, 10)
        expected += short
        covering += short and {official[t] for t in ranked} == set(official.values())
    assert result.short_rankings == expected and covering > 0
    assert short_ranking(["a1", "b1"], ["a1", "a2", "b1"], {"a1": "a", "a2": "a", "b1": "b"}, 10)
    assert not short_ranking(["a1", "a2", "b1"], ["a1", "a2", "b1"], {"a1": "a", "a2": "a", "b1": "b"}, 10)


def test_external_suite_stores_each_datasets_rankings_beside_its_result(tmp_path: Path) -> None:
    """The external suite stage writes `external-<dataset>-rankings.parquet` next to `external.json`, one per dataset."""
    import io

    import pyarrow.parquet as pq

    from flows.suites import external_suite
    from tasks_lib.artifacts import open_store, suite_key, suite_rankings_key
    from tasks_lib.suites.options import ExternalOptions

    root = str(tmp_path / "artifacts")
    options = ExternalOptions(locomo=str(LOCOMO), longmemeval=[str(LME)], limit=1)
    key = external_suite.fn(root, "run-x", options, "hashed", "d", "c")
    store = open_store(root)
    assert key == suite_key("run-x", "external")
    stored = json.loads(store.get_bytes(key))
    for dataset in ("locomo", "longmemeval"):
        table = pq.read_table(io.BytesIO(store.get_bytes(suite_rankings_key("run-x", "external", dataset))))
        assert len(set(table.column("question_id").to_pylist())) == stored[dataset]["questions"] > 0
