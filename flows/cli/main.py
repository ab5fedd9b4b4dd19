"""The `memtrial` command: a thin edge over the library, its command tree built here.

Every command group is imported by name and registered below, so a missing module is an
ImportError at startup, never a command that silently vanishes. The registration order is the
order of `memtrial --help`: commands first, then groups (typer lists them so).

Library errors (`MemtrialError`) become one readable line on stderr and exit status 2; findings
and failed checks exit 1; success exits 0. Prefect is imported only by the commands that run flows.
"""

from __future__ import annotations

import sys

import typer

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

app = typer.Typer(
    name="memtrial",
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


app.command("validate")(validate.validate)
app.command("certify")(corpus.certify)
app.command("prereg")(grading.prereg)
app.command("admit")(grading.admit)
app.command("publish")(grading.publish)
app.command("compare")(grading.compare)
app.command("report")(report.report)
app.command("run")(run.run)
app.command("rerun")(run.rerun)
app.command("paired")(run.paired)
app.command("trend")(trend.trend)
app.command("runs")(runs.runs)
app.command("show")(runs.show)
app.command("power")(power.power)
app.command("server")(server.server)
app.command("prune-history")(server.prune_history)

app.add_typer(corpus.corpus_app, name="corpus")
app.add_typer(task.task_app, name="task")
app.add_typer(memory.memory_app, name="memory")
app.add_typer(memory.provisioner_app, name="provisioner")
app.add_typer(suite.suite_app, name="suite")
app.add_typer(budget.budget_app, name="budget")
app.add_typer(cache.cache_app, name="cache")


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
