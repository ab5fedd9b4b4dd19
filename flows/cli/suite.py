"""`memtrial suite ...`: the conversational and retrieval memory suites.

Each suite's commands live in their own module (`suite_<name>.py`); this module imports each by
name and registers its commands on `suite_app`, which `flows.cli.main` adds as the `suite` group.
"""

from __future__ import annotations

import typer

from flows.cli import suite_compare, suite_public, suite_recall, suite_retrieval

suite_app = typer.Typer(help="Run the memory suites: recall sweep, offline retrieval, LongMemEval, LoCoMo; compare memory systems on all of them.", no_args_is_help=True)

suite_app.command("recall")(suite_recall.recall)
suite_app.command("retrieval")(suite_retrieval.suite_retrieval)
suite_app.command("locomo")(suite_public.locomo)
suite_app.command("longmemeval")(suite_public.longmemeval)
suite_app.command("compare")(suite_compare.compare)
