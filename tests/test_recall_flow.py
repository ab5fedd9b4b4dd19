"""The recall sweep inside the Prefect suite flow (flows/suites.py): a real Prefect run on a temporary API."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tasks_lib.contracts import parse_document
from tasks_lib.suites.recall import SweepResult
from tests.test_recall_sweep import small_corpus


@pytest.mark.usefixtures("prefect_harness")
def test_recall_flow_stores_the_sweep_result(tmp_path: Path) -> None:
    from flows.suites import recall_flow
    from tasks_lib.artifacts import open_store
    from tasks_lib.runconfig import RunConfig

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
    from tasks_lib.runconfig import RunConfig

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
