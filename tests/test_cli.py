"""The memtrial command: help everywhere, JSON where it reports, one clean line on bad input."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer

from flows.cli.main import app, main
from gitrepo import MakeRepo

DIGEST = "b" * 64


def all_commands() -> list[tuple[str, Any]]:
    root = typer.main.get_command(app)
    found: list[tuple[str, Any]] = []

    def walk(prefix: str, command: Any) -> None:
        found.append((prefix, command))
        if hasattr(command, "commands"):
            for name, sub in command.commands.items():
                walk(f"{prefix} {name}".strip(), sub)

    walk("", root)
    return found


@pytest.mark.parametrize(("name", "command"), all_commands(), ids=[n or "memtrial" for n, _ in all_commands()])
def test_every_command_has_help_text(name: str, command: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert (command.help or "").strip(), f"'memtrial {name}' has no help text"
    for param in command.params:
        if param.param_type_name == "option" and param.name != "help":
            assert (param.help or "").strip(), f"'memtrial {name}' option {param.opts} has no help"
    assert main([*name.split(), "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_validate_reports_each_error_with_file_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "good" / "challenge.json"
    good.parent.mkdir()
    good.write_text(json.dumps({
        "schema_version": 1, "challenge_id": "c1", "prompt": "Do it.", "allowed_output_paths": ["src"],
        "verifier": {"runtime": "python", "asset": {"path": "v.py", "sha256": DIGEST}},
    }))
    bad = tmp_path / "bad" / "challenge.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps({
        "schema_version": 1, "challenge_id": "c1", "prompt": "Do it.", "allowed_output_paths": ["/abs"],
        "verifier": {"runtime": "python", "asset": {"path": "v.py", "sha256": "nothex"}}, "extra": 1,
    }))
    assert main(["validate", str(good), str(bad), "--json"]) == 1
    results = json.loads(capsys.readouterr().out)
    assert results[0] == {"path": str(good), "valid": True, "errors": []}
    assert results[1]["valid"] is False
    assert results[1]["errors"] == [
        f"{bad}: field 'allowed_output_paths.0': path '/abs' is absolute; give it relative to its root",
        f"{bad}: field 'verifier.asset.sha256': 'nothex' does not match the required pattern ^[0-9a-f]{{64}}$",
        f"{bad}: field 'extra': unknown field; remove it or check its spelling",
    ]
    assert main(["validate", str(good)]) == 0


def test_validate_unknown_kind_lists_the_known_ones(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(tmp_path / "x.json"), "--kind", "nope"]) == 2
    assert "known kinds: certification.json, challenge.json" in capsys.readouterr().err


def test_build_redact_certify_round_trip(make_repo: MakeRepo, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    repo, commit = make_repo({"AGENTS.md": "use tabs", "src/app.py": "print(1)\n"})
    pkg = tmp_path / "pkg"
    assert main(["corpus", "build", str(repo), "--commit", commit, "--out", str(pkg), "--json"]) == 0
    built = json.loads(capsys.readouterr().out)
    assert built["commit"] == commit and built["files"] == 2
    assert main(["certify", str(pkg), "--json"]) == 1, "unredacted agent memory is a finding"
    report = json.loads(capsys.readouterr().out)
    assert [f["kind"] for f in report["findings"]] == ["auto-loaded-context"]
    assert main(["corpus", "redact", str(pkg), "--json"]) == 0
    assert [r["path"] for r in json.loads(capsys.readouterr().out)["removed"]] == ["AGENTS.md"]
    assert main(["certify", str(pkg), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "clean"


def test_certify_with_a_task_checks_its_instruction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "tree").mkdir()
    (tmp_path / "tree" / "a.py").write_text("x = 1\n")
    task = tmp_path / "task.json"
    task.write_text(json.dumps({
        "schema_version": 1, "task_id": "t1", "kind": "convention", "instruction": "Exit with status 17 on partial delivery.",
        "check_command": ["sh", "{verifier}"], "allowed_output_paths": ["a.py"], "answer_terms": ["17"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": DIGEST}},
    }))
    assert main(["certify", str(tmp_path / "tree"), "--challenge", str(task)]) == 1
    output = capsys.readouterr().out
    assert "solution-leak" in output and "instruction" in output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["certify", "{tmp}/missing"], "the source corpus does not exist"),
        (["corpus", "build", "{repo}", "--commit", "0000000000000000000000000000000000000000", "--out", "{tmp}/o"], "does not resolve to a commit"),
        (["corpus", "build", "{tmp}/nowhere", "--out", "{tmp}/o"], "no such repository path"),
        (["corpus", "redact", "{tmp}"], "not a packaged corpus"),
    ],
    ids=["missing-corpus", "unknown-commit", "missing-repo", "not-a-package"],
)
def test_library_errors_are_one_line_without_traceback(make_repo: MakeRepo, tmp_path: Path, args: list[str], message: str) -> None:
    """Run the real console script: a user sees one line on stderr and exit status 2."""
    repo, _ = make_repo({"a.py": "x"})
    argv = [a.format(tmp=tmp_path, repo=repo) for a in args]
    exe = Path(sys.executable).with_name("memtrial")
    result = subprocess.run([str(exe), *argv], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400"})
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memtrial: error: ")
    assert message in lines[0]
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "o").exists()


def test_usage_errors_exit_2_with_a_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["corpus", "build"]) == 2
    assert "Missing argument" in capsys.readouterr().err


@pytest.mark.integration  # every bundled task's invariants: minutes
def test_corpus_check_reports_every_bundled_task_and_invariant(capsys: pytest.CaptureFixture[str]) -> None:
    """`memtrial corpus check --json` passes on the bundled corpus, per task and invariant: every
    committed task fails untouched, passes with its solution, leaks nothing and certifies clean (the
    suite's one check of the whole corpus)."""
    from tasks_lib.corpus.tasks import INVARIANTS, load_tasks

    code = main(["corpus", "check", "--json"])
    result = json.loads(capsys.readouterr().out)
    assert result["failures"] == [] and result["split_problems"] == [], result["failures"]
    assert code == 0 and result["ok"] is True
    bundled = {t.task_id for t in load_tasks(Path(__file__).resolve().parents[1] / "corpora" / "tasks")}
    assert {task["task"] for task in result["tasks"]} == bundled and len(bundled) >= 40
    assert all(task[name] == "ok" for task in result["tasks"] for name in INVARIANTS)
