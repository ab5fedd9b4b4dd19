"""The recall sweep inside the Prefect suite flow (flows/suites.py): a real Prefect run on a temporary API."""

from __future__ import annotations

import json
from datetime import UTC
from pathlib import Path

import pytest

from tasks_lib.contracts import parse_document
from tasks_lib.suites.recall import SweepResult
from tests.test_recall_sweep import small_corpus


@pytest.mark.usefixtures("prefect_harness")
def test_recall_flow_stores_the_sweep_result(tmp_path: Path) -> None:
    from flows.suites import recall_flow
    from tasks_lib.artifacts import open_store
    from tasks_lib.run.config import RunConfig

    corpus = small_corpus(tmp_path / "corpus")
    root = str(tmp_path / "artifacts")
    config = RunConfig(suites=["recall"], suite_options={"recall": {"lengths": [2, 6], "window": 4, "cases_dir": str(corpus)}})
    key = recall_flow(config, "run-1", root)
    result = parse_document(SweepResult, json.loads(open_store(root).get_bytes(key)), key)
    assert result.config.memory == "reference" and result.config.lengths == (2, 6)
    assert result.metrics_by_length[6].recall.rate == 1.0  # the reference store recalls what the 4-turn window lost
    assert result.metrics_by_length[6].false_recall.rate == 0.0


@pytest.mark.usefixtures("prefect_harness")
def test_editing_a_custom_case_folder_misses_the_cache(tmp_path: Path) -> None:
    """Same run, same options, edited cases: the stage runs again instead of serving the old result."""
    from flows.suites import recall_flow
    from tasks_lib.artifacts import open_store
    from tasks_lib.run.config import RunConfig

    corpus = small_corpus(tmp_path / "corpus")
    root = str(tmp_path / "artifacts")
    config = RunConfig(suites=["recall"], suite_options={"recall": {"lengths": [2], "window": 4, "cases_dir": str(corpus)}})

    def case_ids() -> list[str]:
        key = recall_flow(config, "run-1", root)
        return sorted({o.case_id for o in parse_document(SweepResult, json.loads(open_store(root).get_bytes(key)), key).outcomes})

    assert case_ids() == ["editor", "room", "standup"]
    document = json.loads((corpus / "cases.json").read_text())
    document["cases"] = [c for c in document["cases"] if c["id"] != "editor"]
    (corpus / "cases.json").write_text(json.dumps(document))
    assert case_ids() == ["room", "standup"]


@pytest.mark.usefixtures("prefect_harness")
def test_nightly_runs_its_suites_concurrently_with_each_other_and_the_arms(tmp_path: Path) -> None:
    """The failure prevented: suites running one after another, after the whole matrix. Task run times
    come from the Prefect API: both suites started before either finished, and before the last arm ended."""
    import asyncio
    from datetime import datetime

    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        TaskRunFilter,
        TaskRunFilterStartTime,
    )

    from flows.nightly import nightly

    corpus = small_corpus(tmp_path / "corpus")
    config = tmp_path / "suites.yaml"
    config.write_text(f"tasks: [rotlog-keep-count]\nconditions: ['off', 'on']\nsuites: [recall, retrieval]\n"
                      f"suite_options: {{recall: {{lengths: [2, 50], window: 4, cases_dir: {corpus}}}}}\n"
                      f"artifact_root: {tmp_path / 'artifacts'}\n", encoding="utf-8")
    began = datetime.now(UTC)
    result = nightly(config_path=str(config), run_id="suites-concurrent")
    assert set(result.suites) == {"recall", "retrieval"}

    async def spans() -> tuple[dict[str, tuple], list[tuple]]:
        async with get_client() as client:
            suites = await client.read_task_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=["suites-concurrent"])))
            arms = await client.read_task_runs(task_run_filter=TaskRunFilter(start_time=TaskRunFilterStartTime(after_=began)))
        return ({r.name.rsplit("-", 1)[0]: (r.start_time, r.end_time) for r in suites if r.name.startswith(("recall-sweep", "retrieval-suite"))},
                [(r.start_time, r.end_time) for r in arms if r.name.startswith("run-arm")])

    suites, arms = asyncio.run(spans())
    (recall_start, recall_end), (retrieval_start, retrieval_end) = suites["recall-sweep"], suites["retrieval-suite"]
    # The recall sweep buries facts under 50 turns so that it lasts long enough to overlap the retrieval
    # suite when both run at once (at length 2 alone, on scratch stores, it ended within 40 ms).
    assert recall_start < retrieval_end and retrieval_start < recall_end, f"the suites ran one after the other: {suites}"
    assert len(arms) == 2 and max(recall_start, retrieval_start) < max(end for _, end in arms), "the suites waited for the matrix"
