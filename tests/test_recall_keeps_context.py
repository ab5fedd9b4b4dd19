"""The recall sweep's memory-backed agent keeps its context (issue #31 item 7).

Before, the memory-backed offline reader answered only from the memory's first recalled memory while
the reader without memory read its window, and the suite commands defaulted to the `hashed` embedder,
which cannot bridge the bundled paraphrased probes: with MiniLM the reference store answered 0.46 of
fresh facts at length 10 where no memory answered 0.67, and with the default every system scored 0.
This runs `memtrial suite recall --sweep` with its defaults (the nightly's embedder, window 20, k 5,
seed 0) at lengths 10 and 40 (every fact in the window, then every fact past it; the default 100 and
250 only repeat the second reading and took 5 of the test's 7 minutes) on the bundled recall cases
(all 24 of them: the stale and false-memory cases measure other things) and the bundled filler.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from flows.cli.common import DEFAULT_EMBEDDER
from flows.cli.main import main
from tasks_lib.memory.embeddings import embedder_available
from tasks_lib.suites.recall.sweep import BUNDLED_CASES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(embedder_available(DEFAULT_EMBEDDER) is not None, reason=f"{DEFAULT_EMBEDDER}: {embedder_available(DEFAULT_EMBEDDER)}"),
]

LENGTHS = ["--lengths", "10,40"]
RUNS: dict[str, list[str]] = {"reference": LENGTHS, "reference, k = 1": [*LENGTHS, "--recall-k", "1"],
                              "no memory": [*LENGTHS, "--memory", "none"]}
"""The three sessions the issue asks the default sweep to separate, as CLI options over the defaults."""


def recall_cases(folder: Path) -> Path:
    """The bundled recall-kind cases and the bundled filler, in `folder`."""
    folder.mkdir(parents=True)
    bundled = json.loads((BUNDLED_CASES / "cases.json").read_text())
    bundled["cases"] = [c for c in bundled["cases"] if c["kind"] == "recall"]
    (folder / "cases.json").write_text(json.dumps(bundled))
    (folder / "filler.json").write_text((BUNDLED_CASES / "filler.json").read_text())
    return folder


def sweep(capsys: pytest.CaptureFixture[str], cases: Path, options: list[str]) -> dict[str, Any]:
    """`memtrial suite recall --sweep --json` over `cases` with the defaults and `options`, in this process."""
    code = main(["suite", "recall", "--sweep", "--cases", str(cases), "--json", *options])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    return json.loads(printed.out)


def recall_at(result: dict[str, Any], length: int, field: str = "recall") -> float:
    return result["metrics_by_length"][str(length)][field]["rate"]


def test_default_sweep_separates_reference_k1_and_no_memory_and_memory_never_falls_below_its_window(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Prevents a memory-backed agent that loses its own context (scoring below no memory while the fact
    is still in its window) and a default embedder that makes every system read the same (0 everywhere)."""
    cases = recall_cases(tmp_path / "cases")
    runs = {name: sweep(capsys, cases, options) for name, options in RUNS.items()}
    for result in runs.values():
        assert result["config"]["embedder"] == DEFAULT_EMBEDDER and result["config"]["lengths"] == [10, 40]
    reference, k1, none = runs["reference"], runs["reference, k = 1"], runs["no memory"]
    # length 10: every fact is still in the 20-turn window; the memory-backed agent never does worse, case by case
    alone = {o["case_id"]: o["verdict"] for o in none["outcomes"] if o["length"] == 10}
    assert all(o["fact_in_window"] for o in none["outcomes"] if o["length"] == 10)
    for result in (reference, k1):
        lost = [o["case_id"] for o in result["outcomes"] if o["length"] == 10 and alone[o["case_id"]] == "hit" and o["verdict"] != "hit"]
        assert lost == [], f"{result['config']['recall_k']}: answered worse than no memory with the fact in the window: {lost}"
        assert recall_at(result, 10) >= recall_at(none, 10) > 0
    # past the window no memory knows nothing; the reference store separates from it, and k = 5 from k = 1
    assert recall_at(none, 40, "availability") == 0.0 and recall_at(none, 40) == 0.0
    assert recall_at(reference, 40, "availability") > recall_at(k1, 40, "availability") > 0.0
    assert recall_at(reference, 40) > recall_at(k1, 40) > 0.0
