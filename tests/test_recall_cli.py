"""`memtrial suite recall`: the table and --json carry the same numbers; gates exit 1; bad input exits 2 in one line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli.main import main
from tests.test_recall_sweep import small_corpus


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["suite", "recall", "--embedder", "hashed", *args])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_json_and_table_report_the_same_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    common = ["--sweep", "--lengths", "4,12,40", "--memory", "none", "--window", "10", "--cases", str(corpus)]
    code, text, _ = run_cli(capsys, *common, "--json")
    assert code == 0
    payload = json.loads(text)
    assert payload["gate_failures"] == []
    assert payload["knee"]["previous"] == 4 and payload["knee"]["length"] == 12
    code, table, _ = run_cli(capsys, *common)
    assert code == 0
    lines = table.splitlines()
    names = ("recall", "retrieval_recall", "availability", "staleness", "retrieval_staleness", "miss", "false_recall", "retrieval_false_recall", "abstention")
    for length, metrics in payload["metrics_by_length"].items():
        at = next(i for i, line in enumerate(lines) if line.startswith(f"│ {length} "))
        row, intervals = ([c.strip() for c in lines[i].split("│")[2:-1]] for i in (at, at + 1))
        for column, name in enumerate(names):  # every metric, answer and retrieval level, in the table as in --json
            cell = metrics[name]
            assert row[column] == f"{cell['rate']:.2f} ({cell['k']}/{cell['n']})"
            assert intervals[column] == f"[{cell['lower']:.2f}, {cell['upper']:.2f}]"
    assert "knee: between 4 and 12 turns" in table and "embedder hashed" in table and payload["config"]["embedder"] == "hashed"


def test_reference_store_single_length(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    code, text, _ = run_cli(capsys, "--length", "30", "--cases", str(corpus), "--json", "--min-score", "1.0", "--max-false-recall", "0")
    payload = json.loads(text)
    assert code == 0, payload["gate_failures"]
    assert list(payload["metrics_by_length"]) == ["30"] and payload["knee"] is None
    assert payload["metrics_by_length"]["30"]["recall"]["k"] == 1


def test_the_table_names_the_embedder_the_figures_come_from(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression (#35): after `make demo` (minilm) the suite's default (hashed) showed recall 0.17 where the
    demo showed 0.46, and nothing in the output said the embedder differed."""
    code, table, _ = run_cli(capsys, "--length", "30", "--cases", str(small_corpus(tmp_path / "corpus")))
    assert code == 0
    assert "recall suite: memory reference, embedder hashed," in " ".join(table.split()), table


def test_gate_below_the_bar_exits_1_naming_metric_and_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    code, _, err = run_cli(capsys, "--length", "40", "--memory", "none", "--cases", str(corpus), "--min-score", "0.9")
    assert code == 1
    assert "gate: recall at length 40 is 0.000 (0/1), below the minimum 0.900" in err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sweep", "--lengths", "10,x"], "--lengths '10,x': give comma-separated whole numbers"),
        (["--memory", "nope"], "unknown memory system 'nope'"),
        (["--policy", "fifo", "--memory", "none"], "--policy: Input should be 'window' or 'summary'"),
        (["--base-url", "http://127.0.0.1:9"], "--base-url and --model go together"),
        (["--min-score", "5"], "--min-score 5.0: give a rate between 0 and 1"),
        (["--knee-drop", "0"], "--knee-drop: Input should be greater than 0"),
        (["--samples", "0", "--base-url", "http://127.0.0.1:9/v1", "--model", "m"], "--samples: Input should be greater than or equal to 1"),
        (["--memory", "none", "--filler-dataset", "/nonexistent/locomo.json"], "/nonexistent/locomo.json: cannot read it"),
        (["--base-url", "https://paid.example/v1", "--model", "m"], "may cost money: give a budget guard config (--budget FILE"),
        (["--base-url", "https://paid.example/v1", "--model", "m", "--budget", "/nonexistent/budget.yaml"],
         "/nonexistent/budget.yaml: budget configuration file does not exist"),
        (["--base-url", "http://127.0.0.1:9/v1", "--model", "m", "--temperature", "0.7"], "--temperature: temperature 0.7 with 1 sample(s)"),
    ],
    ids=["bad-lengths", "unknown-memory", "unknown-policy", "url-without-model", "bar-out-of-range", "knee-drop-zero",
         "no-samples", "missing-dataset", "paid-endpoint-without-budget", "missing-budget-file", "sampling-without-majority"],
)
def test_bad_input_is_one_line_and_exit_2(capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    code, _, err = run_cli(capsys, *args)
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("memtrial: error: ") and message in err


def test_bad_case_file_names_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus = small_corpus(tmp_path / "corpus")
    cases = json.loads((corpus / "cases.json").read_text())
    cases["cases"][0]["accept"] = ["10:45"]
    (corpus / "cases.json").write_text(json.dumps(cases))
    code, _, err = run_cli(capsys, "--memory", "none", "--cases", str(corpus))
    assert code == 2
    assert f"{corpus / 'cases.json'}: field 'cases[0].phrasings[0]': does not state any of ['10:45']" in err


def test_artifacts_appends_a_trend_snapshot_with_the_knee(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tasks_lib.analysis.trend import load_trend, regressions
    from tasks_lib.artifacts import open_store

    corpus = small_corpus(tmp_path / "corpus")
    root = str(tmp_path / "artifacts")
    common = ["--sweep", "--lengths", "4,12", "--memory", "none", "--window", "10", "--cases", str(corpus), "--artifacts", root]
    assert run_cli(capsys, *common)[0] == 0
    code, text, _ = run_cli(capsys, *common, "--window", "20", "--curve", "wider", "--json")
    trend = json.loads(text)["trend"]
    assert code == 0 and trend.startswith(f"{root}/trend/wider/") and trend.endswith(".parquet")
    (narrow,) = load_trend(open_store(root), "recall")
    assert narrow.knee == 12.0 and narrow.scores["recall_at_4"] == 1.0 and narrow.scores["recall_at_12"] == 0.0
    assert narrow.gated["recall_at_12"] == "higher" and narrow.gated["false_recall_at_4"] == "lower"
    assert "abstention_at_4" in narrow.scores and "abstention_at_4" not in narrow.gated
    assert narrow.gated["retrieval_recall_at_12"] == "higher" and narrow.gated["retrieval_staleness_at_4"] == "lower"
    assert "miss_at_4" in narrow.scores and "miss_at_4" not in narrow.gated  # a regression in the ranking is gated too
    (wide,) = load_trend(open_store(root), "wider")
    assert wide.knee is None and wide.comparability_key != narrow.comparability_key  # another window, another curve
    same = wide.model_copy(update={"comparability_key": narrow.comparability_key, "config_digest": narrow.config_digest})
    assert "recall: knee moved from 12 to none" in regressions(narrow, same, narrow.gated)
