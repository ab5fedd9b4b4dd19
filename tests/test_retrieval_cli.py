"""`memtrial suite retrieval`: tables, JSON with the same numbers, gates file, --min-score, report file and trend snapshot."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from flows.cli.main import main
from tasks_lib.analysis.trend import load_trend
from tasks_lib.artifacts import open_store


def test_json_report_and_snapshot(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = tmp_path / "gates.json"
    gates.write_text(json.dumps({"schema_version": 1, "recall_at_5_min": 0.5, "mrr_min": 0.5}))
    root = tmp_path / "artifacts"
    report = tmp_path / "out" / "report.json"
    args = ["suite", "retrieval", "--embedder", "hashed", "--gates", str(gates), "--artifacts", str(root), "--report", str(report), "--json"]
    code = main(args)
    payload = json.loads(capsys.readouterr().out)
    assert code == (0 if payload["passed"] else 1)
    assert payload["adapter"] == "reference" and payload["embedder"] == "hashed"
    assert {g["name"]: g["threshold"] for g in payload["gates"]}["recall_at_5_min"] == 0.5
    assert len(payload["cases"]) == sum(payload["counts"].values())
    saved = json.loads(report.read_text())
    assert saved["quality"] == payload["quality"] and saved["cases"] == payload["cases"]
    curve = load_trend(open_store(root), "retrieval")
    assert len(curve) == 1 and curve[0].scores["recall_at_5"] == payload["quality"]["recall_at_5"]
    assert payload["trend"].startswith(f"{root}/trend/retrieval/") and payload["trend"].endswith(".parquet")
    assert curve[0].build.startswith("memtrial ")
    # --min-score just above the measured score fails; the numbers do not change
    bar = min(1.0, payload["score"] + 0.01)
    assert main([*args[:-1], "--min-score", str(bar)]) == 1
    text = capsys.readouterr().out
    assert f"< --min-score {bar}" in text
    assert main(["trend", "--artifacts", str(root), "--json"]) == 0  # same build, same numbers: no regression
    assert json.loads(capsys.readouterr().out)["regressions"] == []


def test_text_output_lists_every_question_and_the_texts_of_misses(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["suite", "retrieval", "--embedder", "hashed", "--report", str(tmp_path / "r.json")])
    printed = capsys.readouterr()
    result = json.loads((tmp_path / "r.json").read_text())
    assert code == (0 if result["passed"] else 1)
    for case in result["cases"]:
        assert case["id"] in printed.out
    misses = [c for c in result["cases"] if c["hit_at_5"] is False]
    for miss in misses:
        assert f"{miss['id']}: {miss['question']}" in printed.out
        for recalled in miss["top"]:
            assert recalled["text"] in printed.out
    for gate in result["gates"]:
        assert gate["name"] in printed.out
    if not result["passed"]:
        assert "FAILED gates" in printed.out and "retrieval gate(s) failed" in printed.err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--memory", "nope"], "unknown name 'nope'; known memory systems are"),
        (["--min-score", "1.5"], "--min-score: 1.5 is outside 0..1"),
        (["--gates", "MISSING"], "MISSING: document: file does not exist"),
    ],
    ids=["unknown-memory", "min-score-range", "missing-gates-file"],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["suite", "retrieval", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_bad_gates_field_names_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gates = tmp_path / "gates.json"
    gates.write_text(json.dumps({"schema_version": 1, "recall_min": 0.5}))
    assert main(["suite", "retrieval", "--gates", str(gates)]) == 2
    assert f"{gates}: field 'recall_min': unknown field" in capsys.readouterr().err


def test_each_configuration_has_its_own_default_curve() -> None:
    from flows.cli.suite_retrieval import default_curve

    assert default_curve("reference", "hashed") == "retrieval"
    assert default_curve("chroma", "hashed") == "retrieval-chroma-hashed"
    assert default_curve("reference", "minilm") == "retrieval-reference-minilm"
