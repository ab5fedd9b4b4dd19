"""`memtrial run` / `rerun` / `paired` refuse bad input with one line before any flow starts; a paid
agent never runs without the budget guard's config."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.cli.main import main
from flows.paired import pair_guard
from tasks_lib.errors import MemtrialError
from tasks_lib.run.config import AgentSpec, RunConfig


def test_run_with_a_bad_config_exits_2_naming_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "bad.yaml"
    config.write_text("trials: 0\n", encoding="utf-8")
    assert main(["run", "--config", str(config), "--plain"]) == 2
    error = capsys.readouterr().err.strip().splitlines()
    assert error == [f"memtrial: error: {config}: field 'trials': Input should be greater than or equal to 1"]


def test_run_with_a_missing_config_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--config", str(tmp_path / "nope.yaml")]) == 2
    assert "nope.yaml: document: file does not exist" in capsys.readouterr().err


def test_rerun_of_an_unknown_run_says_where_it_looked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rerun", "run-20990101-000000-abcdef"]) == 2
    assert "no stored config at" in capsys.readouterr().err
    assert main(["rerun", "run-20990101-000000-abcdef", "--artifacts", str(tmp_path)]) == 2
    assert "runs/run-20990101-000000-abcdef/run-config.json does not exist" in capsys.readouterr().err


def test_paired_with_an_unknown_condition_is_refused_before_running(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["paired", "--conditions", "off,sometimes", "--plain"]) == 2
    assert "conditions.1" in capsys.readouterr().err


def test_a_paid_agent_without_a_budget_config_cannot_run() -> None:
    config = RunConfig(agents=[AgentSpec(name="claude-code")])
    with pytest.raises(MemtrialError, match="'claude-code' can spend money but the run config has no budget.config"):
        pair_guard(config, config.all_agents[1], "run-x", "/tmp/unused")


def test_a_paid_agent_with_a_budget_config_gets_the_pair_guard(tmp_path: Path) -> None:
    from flows.budget import PairGuard

    config = RunConfig(agents=[AgentSpec(name="claude-code")], budget={"config": str(tmp_path / "budget.yaml")})  # type: ignore[arg-type]
    guard = pair_guard(config, config.all_agents[1], "run-x", str(tmp_path))
    assert isinstance(guard, PairGuard) and guard.agent == "claude-code"


def test_run_on_the_smoke_config_says_where_the_report_is(prefect_harness: None, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """The main job end to end on the bundled smoke config: records, graded tables and the report."""
    import json

    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.artifacts import open_store

    root = tmp_path / "artifacts"
    assert main(["run", "--config", str(PROJECT_ROOT / "configs" / "smoke.yaml"), "--artifacts", str(root), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    (agent,) = result["agents"]
    assert agent["agent"] == "calibration" and agent["attempts"] == 4 and result["excluded"] == {}
    assert agent["report"] == f"{root}/runs/{agent['run_id']}/report.html"
    store = open_store(root)
    assert store.exists(f"runs/{agent['run_id']}/report.html") and store.exists(agent["tables"]["grades.parquet"])
    assert store.exists(f"runs/{result['run_id']}/run-config.json")


def test_a_failed_suite_gate_reaches_the_summary_the_report_and_the_exit_status(prefect_harness: None, tmp_path: Path,
                                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `memtrial run` printed a failed retrieval gate and exited 0, and the report's "Read before
    trusting" never named it: a gate that fails is a distrust warning everywhere, and the run exits 1."""
    import json

    from tasks_lib.analysis.grading import GradingSummary
    from tasks_lib.artifacts import open_store, run_key

    gates = tmp_path / "gates.json"
    gates.write_text('{"schema_version": 1, "recall_at_5_min": 1.0}')  # no embedder reaches 1.0 on the bundled cases
    config = tmp_path / "run.yaml"
    config.write_text(f"name: gated\ntasks: [rotlog-keep-count]\nconditions: ['off', 'on']\nsuites: [retrieval]\n"
                      f"suite_options: {{retrieval: {{gates: {gates}}}}}\n")
    root = tmp_path / "artifacts"
    assert main(["run", "--config", str(config), "--artifacts", str(root)]) == 1
    printed = capsys.readouterr().out
    assert "DISTRUST (calibration): suite retrieval: gate recall_at_5_min failed" in printed, printed
    answer = printed[printed.index("answer (calibration):"):].splitlines()
    assert printed.index("DISTRUST (calibration)") < printed.index("answer (calibration):")  # the warnings first
    assert answer[1].startswith("  success on - off: ") and "delivery on: 1/1 attempts confirmed" in printed.splitlines()[-1], answer
    (agent_run,) = [line.split("runs/")[1].split("/")[0] for line in printed.splitlines() if line.startswith("report (calibration)")]
    summary = open_store(root).get_json(run_key(agent_run, "summary.json"), GradingSummary)
    assert [d for d in summary.distrust if "recall_at_5_min" in d] and set(summary.distrust) <= set(summary.warnings)
    report = (root / "runs" / agent_run / "report.html").read_text()
    assert "suite retrieval: gate recall_at_5_min failed" in report.split("Read before trusting")[1].split("</ul>")[0]
    assert json.loads((root / "runs" / agent_run / "run-warnings.json").read_text())["warnings"] == list(summary.distrust[:1])


def test_paired_exits_1_and_prints_each_distrust_warning(prefect_harness: None, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `memtrial paired` exited 0 whatever its grading said; a memory system that delivered
    none of the planted memories must be printed as a distrust warning and fail the command."""
    import sys

    from test_hostile_forged_delivery import SERVES_OTHERS

    script = tmp_path / "serves_others.py"
    script.write_text(SERVES_OTHERS)
    root = tmp_path / "artifacts"
    argv = ["paired", "--embedder", "hashed", "--tasks", "logship-partial-exit", "--conditions", "off,on", "--artifacts", str(root), "--plain",
            "--provisioner", f"{sys.executable} {script}", "--provisioner-env", f"MEMTRIAL_PROVISIONER_STATE={tmp_path / 'state'}",
            "--provisioner-env", "MEMTRIAL_PROVISIONER_SERVE=ro"]
    assert main(argv) == 1
    printed = capsys.readouterr().out
    distrust = [line for line in printed.splitlines() if line.startswith("DISTRUST (calibration): ")]
    assert any("delivered: none of the planted ones on 1 of 1 on attempts" in line for line in distrust), printed
    lines = printed.splitlines()  # the answer is where people look: the last lines, after the warnings
    answer = lines.index("answer (calibration):")
    assert lines[answer - len(distrust):answer] == distrust and lines[answer + 1].startswith("  success on - off: ")
    assert lines[-1] == "  delivery on: 0/1 attempts confirmed", printed
