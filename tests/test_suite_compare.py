"""`memtrial suite compare`: every system on every suite in its own process, measured; a crash is a failed cell."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from flows.cli.main import main
from tasks_lib.memory.adapter_config import adapter_config
from tasks_lib.suites.compare import compare_systems, headline, markdown_table

LOCOMO = Path("/work/shared/data/locomo/locomo10.json")


def test_each_cell_is_the_suites_own_number_measured_in_its_own_process(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The compare table shows what the suite itself reports (not a re-computation), with the process's
    own wall time and peak memory, and names the system's frozen adapter config."""
    assert main(["suite", "retrieval", "--memory", "reference", "--embedder", "hashed", "--json"]) in (0, 1)
    direct = json.loads(capsys.readouterr().out)["score"]
    table = tmp_path / "table.md"
    code = main(["suite", "compare", "--memory", "reference", "--suites", "retrieval", "--embedder", "hashed", "--markdown", str(table), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    (cell,) = result["cells"]
    assert cell["value"] == direct and cell["exit_code"] in (0, 1)
    assert cell["wall_seconds"] > 0 and 20 < cell["peak_rss_mb"] < 4096
    assert cell["adapter_config_digest"] == adapter_config("reference", "hashed").digest
    assert f"{direct:.3f}" in table.read_text() and "load average" in table.read_text() and "embedder hashed" in table.read_text()


def test_a_suite_run_that_crashes_is_a_failed_cell_not_a_score(tmp_path: Path) -> None:
    """Regression guard: a suite process that dies (here: an embedder that does not exist) must leave an
    empty cell with its error and make the command exit 1, never a zero that reads as a measurement."""
    result = compare_systems(["reference"], "no-such-embedder", suites=["retrieval"])
    (cell,) = result.cells
    assert cell.value is None and cell.exit_code not in (0, 1) and "no-such-embedder" in cell.error
    assert "failed: " in markdown_table(result)


def test_an_unknown_or_unavailable_embedder_runs_nothing(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """One line before any of the system x suite runs, not one failed cell per run. The machine without the
    embeddings extra is a stand-in: `find_spec` monkeypatched to hide torch (the venv has it installed)."""
    assert main(["suite", "compare", "--memory", "reference", "--suites", "retrieval", "--embedder", "no-such-embedder"]) == 2
    assert "--embedder: unknown embedder 'no-such-embedder'" in capsys.readouterr().err
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "torch" else real(name, *a))
    assert main(["suite", "compare", "--memory", "reference,chroma", "--embedder", "minilm"]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "missing module(s): torch" in err and "pip install -e '.[embeddings]'" in err


def test_unknown_system_or_suite_runs_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "compare", "--memory", "reference,redis"]) == 2
    assert "known memory systems are" in capsys.readouterr().err
    assert main(["suite", "compare", "--memory", "reference", "--suites", "retrieval,vibes"]) == 2
    assert "--suites: unknown suite(s) vibes" in capsys.readouterr().err


def test_public_and_recall_headlines_are_read_from_their_results() -> None:
    """The headline of each suite is the documented metric; a result without it is an error, not 0."""
    recall = {"metrics_by_length": {"10": {"recall": {"rate": 1.0, "lower": 0.8, "upper": 1.0}},
                                    "250": {"recall": {"rate": 0.5, "lower": 0.3, "upper": 0.7}}}}
    assert headline("recall", recall) == (0.5, (0.3, 0.7))
    public = {"slices": [{"name": "overall", "scores": [{"level": "turn", "metric": "recall_any", "k": 5, "value": 0.25}]}]}
    assert headline("locomo", public) == (0.25, None)
    with pytest.raises(StopIteration):
        headline("longmemeval", {"slices": [{"name": "overall", "scores": []}]})


@pytest.mark.slow
def test_locomo_runs_through_compare_on_a_faithful_system(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """LoCoMo (one conversation) through compare on lancedb: a real score between 0 and 1."""
    if not LOCOMO.is_file():
        pytest.skip(f"{LOCOMO} is not here")
    code = main(["suite", "compare", "--memory", "lancedb", "--suites", "locomo", "--locomo", str(LOCOMO), "--limit", "1", "--json"])
    (cell,) = json.loads(capsys.readouterr().out)["cells"]
    assert code == 0 and 0.0 < cell["value"] <= 1.0, cell
