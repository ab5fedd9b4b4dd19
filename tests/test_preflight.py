"""Early refusal: a bad name is one line before any flow starts (no run id, no Prefect server, nothing stored)."""

from __future__ import annotations

from pathlib import Path

import pytest

from flows.cli.main import main

CASES = {
    "unknown-agent": (["--agent", "clod-code"], "field 'agents[1].name': unknown agent 'clod-code'; known agents: calibration"),
    "unknown-task": (["--tasks", "logship-partial-exi"], "field 'tasks': unknown task(s) logship-partial-exi; known tasks: alertfan-sms-channel, auditq"),
    "duplicate-condition": (["--conditions", "off,on,off"], "field 'conditions': off listed more than once"),
    "unknown-lane": (["--conditions", "off,ablate:graf"], "ablate:graf: no such lane of the reference memory system"),
    "unknown-sandbox": (["--sandbox", "podman"], "field 'sandbox': Input should be 'local' or 'docker'"),
}


@pytest.mark.parametrize(("args", "message"), list(CASES.values()), ids=list(CASES))
def test_a_bad_name_is_refused_before_the_flow_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                      args: list[str], message: str) -> None:
    """Regression: a typo in a name surfaced only after Prefect's server had started (~20 s), or, for a
    duplicate condition, never: the matrix silently ran the condition twice."""
    artifacts = tmp_path / "artifacts"
    assert main(["paired", *args, "--artifacts", str(artifacts)]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err, err
    assert "paired run" not in err and not artifacts.exists(), "nothing started, nothing stored"


def test_a_run_config_with_a_bad_name_is_refused_before_the_flow_starts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "run.yaml"
    config.write_text(f"name: typo\ntasks: [nope]\nconditions: ['off', 'on']\nsuites: []\nartifact_root: {tmp_path / 'artifacts'}\n")
    assert main(["run", "--config", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"{config}: field 'tasks': unknown task(s) nope" in err and err.count("\n") == 1, err
    assert not (tmp_path / "artifacts").exists()


def test_version_names_the_release_and_commit(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("memtrial 0.1.0+")
