"""The `memtrial` command: a thin edge over the library, its command tree built here.

Every command group is imported by name and registered below, so a missing module is an
ImportError at startup, never a command that silently vanishes. `COMMANDS` is the order of
`memtrial --help` and its panels, the order of a user's day: run a measurement and read it, then
the memory suites, then authoring, preregistered studies and upkeep.

Library errors (`MemtrialError`) become one readable line on stderr and exit status 2; findings
and failed checks exit 1; success exits 0. Prefect is imported only by the commands that run flows.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import typer
from typer.core import TyperGroup

from flows.cli import (
    budget,
    cache,
    corpus,
    grading,
    memory,
    power,
    report,
    run,
    runs,
    server,
    suite,
    task,
    trend,
    validate,
)
from flows.cli.common import err
from tasks_lib.errors import MemtrialError


class _DayOrder(TyperGroup):
    """Lists commands and groups together in COMMANDS' order (typer would list every group after every command)."""

    def list_commands(self, ctx: Any) -> list[str]:  # typer's vendored click Context
        order = [name for name, _, _ in COMMANDS]
        return sorted(self.commands, key=lambda name: order.index(name) if name in order else len(order))


app = typer.Typer(
    name="memtrial",
    cls=_DayOrder,
    help="Measure whether a memory system makes an AI agent better.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

def _version(show: bool) -> None:
    if show:
        from flows.runtime.settings import build_under_test

        print(build_under_test())
        raise typer.Exit(0)


@app.callback()
def _options(
    version: bool = typer.Option(False, "--version", help="Print memtrial's version and commit, then exit.", callback=_version, is_eager=True),
) -> None:
    """Measure whether a memory system makes an AI agent better."""


RUN_PANEL = "Run and read a measurement"
SUITES_PANEL = "Memory suites (no agent)"
AUTHORING_PANEL = "Author tasks and memory systems"
STUDY_PANEL = "Preregistered studies"
UPKEEP_PANEL = "Set-up and upkeep"

COMMANDS: tuple[tuple[str, Callable[..., None] | typer.Typer, str], ...] = (
    ("run", run.run, RUN_PANEL),
    ("paired", run.paired, RUN_PANEL),
    ("report", report.report, RUN_PANEL),
    ("runs", runs.runs, RUN_PANEL),
    ("show", runs.show, RUN_PANEL),
    ("rerun", run.rerun, RUN_PANEL),
    ("suite", suite.suite_app, SUITES_PANEL),
    ("trend", trend.trend, SUITES_PANEL),
    ("task", task.task_app, AUTHORING_PANEL),
    ("corpus", corpus.corpus_app, AUTHORING_PANEL),
    ("certify", corpus.certify, AUTHORING_PANEL),
    ("validate", validate.validate, AUTHORING_PANEL),
    ("memory", memory.memory_app, AUTHORING_PANEL),
    ("provisioner", memory.provisioner_app, AUTHORING_PANEL),
    ("power", power.power, STUDY_PANEL),
    ("prereg", grading.prereg, STUDY_PANEL),
    ("admit", grading.admit, STUDY_PANEL),
    ("compare", grading.compare, STUDY_PANEL),
    ("publish", grading.publish, STUDY_PANEL),
    ("budget", budget.budget_app, UPKEEP_PANEL),
    ("cache", cache.cache_app, UPKEEP_PANEL),
    ("server", server.server, UPKEEP_PANEL),
    ("prune-history", server.prune_history, UPKEEP_PANEL),
)
"""Every command and group in the order of a user's day, each in its help panel: run, read the result
and rerun first, then the suites, then authoring, studies and upkeep."""

for name, target, panel in COMMANDS:
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=name, rich_help_panel=panel)
    else:
        app.command(name, rich_help_panel=panel)(target)


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status instead of raising.

    Usage errors are reported by typer (exit 2); a MemtrialError becomes one line on stderr
    and exit 2; commands signal findings or failed checks with exit 1.
    """
    try:
        app(args=argv, prog_name="memtrial", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except MemtrialError as error:
        err.print(f"memtrial: error: {error}")
        return 2
    return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())


if __name__ == "__main__":  # python -m flows.cli.main, as the console script
    entry()
