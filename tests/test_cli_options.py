"""A CLI option more than one command takes is defined once (`flows.cli.options`), with its environment
variable: the same flag says the same thing on every command, and the artifact root is found the same
way by every command that reads runs."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer

from flows.cli.main import app, main
from tasks_lib.settings import ARTIFACT_ROOT

MEANINGS = {
    "--artifacts": (2, "the artifact root runs are read from and written to; the suites' opt-in trend root (no default)"),
    "--config": (2, "a run config; a budget config"),
    "--dataset": (2, "LoCoMo's one file; LongMemEval's files"),
    "--env": (2, "a provisioner's KEY=VALUE; the variable holding a key"),
    "--k": (2, "memories one recall returns; the cut-offs scored (repeatable)"),
    "--kind": (3, "a contract kind; a task kind; a memory kind"),
    "--memory": (2, "one memory system; a list of them (suite compare)"),
    "--min-score": (2, "recall at every length; Recall@5"),
    "--model": (2, "the preregistered agent's model; the recall reader's model"),
    "--out": (5, "a report file, a plot, a release folder, a corpus folder, a frozen store"),
    "--plain": (2, "plain progress lines; the hook's bare memory block"),
    "--realm": (2, "the realm used; the realm exported to the agent (memory serve)"),
    "--seed": (2, "the power simulation's seed; the recall suite's phrasing seed"),
    "--socket-dir": (2, "a new socket folder (serve); the served one (stop)"),
    "--store": (3, "the store read and written; the replica served; the store frozen"),
    "--tasks": (2, "task ids; a number of tasks (power)"),
    "--trials": (2, "trials per task and condition; power's, defaulting to the run's"),
}
"""Flags that mean different things on different commands, with how many meanings and which."""

READS_RUNS = {"run", "paired", "rerun", "report", "runs", "show", "trend", "power", "prereg", "admit", "compare", "publish",
              "cache list", "cache clear"}
"""The commands that read or write runs under an artifact root."""


def _commands(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[tuple[str, Any]]:
    command = typer.main.get_command(app) if command is None else command
    subcommands = getattr(command, "commands", None)
    if not subcommands:
        yield " ".join(path), command
        return
    for name, sub in subcommands.items():
        yield from _commands(sub, (*path, name))


def _options() -> dict[str, dict[tuple[str, str | None], list[str]]]:
    """flag -> (help, envvar) -> the commands declaring it so."""
    found: dict[str, dict[tuple[str, str | None], list[str]]] = defaultdict(lambda: defaultdict(list))
    for name, command in _commands():
        for param in command.params:
            if param.param_type_name == "option":
                for flag in param.opts:
                    found[flag][(param.help, param.envvar)].append(name)
    return found


def test_a_flag_says_the_same_thing_on_every_command() -> None:
    """`--artifacts` had four help texts on seven commands, one of them wrong about the default; a flag
    copied into a new command with its own wording drifts the same way."""
    drifted = {flag: sorted(meanings.values()) for flag, meanings in _options().items()
               if len(meanings) > MEANINGS.get(flag, (1, ""))[0]}
    assert not drifted, f"define the option once in flows/cli/options.py (or declare a new meaning in MEANINGS): {drifted}"


def test_every_command_that_reads_runs_takes_the_one_artifact_root_option() -> None:
    """Each takes `--artifacts` (alias `--artifact-root`) with the same help and MEMTRIAL_ARTIFACT_ROOT
    as its environment variable, shown in its --help."""
    takers = {(help_, envvar): sorted(commands) for (help_, envvar), commands in _options()["--artifact-root"].items()}
    assert len(takers) == 1, takers
    [(_, envvar)] = takers
    assert envvar == ARTIFACT_ROOT.name
    assert set(next(iter(takers.values()))) == READS_RUNS


def test_an_artifact_root_from_the_environment_is_used_and_named_as_the_environment(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The option's environment variable is the fallback, not a command-line value: a root that cannot be
    used is refused naming MEMTRIAL_ARTIFACT_ROOT, never `--artifacts`, which the user did not give."""
    monkeypatch.setenv(ARTIFACT_ROOT.name, str(tmp_path / "env-root"))
    assert main(["runs"]) == 0
    assert f"no runs under {tmp_path / 'env-root'}/runs/" in capsys.readouterr().out
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv(ARTIFACT_ROOT.name, str(blocker))
    code = main(["paired", "--tasks", "no-such-task"])
    err = capsys.readouterr().err
    assert code == 2 and ARTIFACT_ROOT.name in err and "--artifacts" not in err, err
