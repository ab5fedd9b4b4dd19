"""`memtrial suite ...`: the conversational and retrieval memory suites.

Each suite's commands live in their own module (`suite_<name>.py`) and add themselves to
`suite_app` on import; this module imports the ones present and registers the group.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import typer

from flows.cli.main import app

suite_app = typer.Typer(help="Run the memory suites: recall sweep, offline retrieval, LongMemEval, LoCoMo.", no_args_is_help=True)
SUITE_MODULES = ("suite_recall", "suite_retrieval", "suite_public")

for _name in SUITE_MODULES:
    if (Path(__file__).parent / f"{_name}.py").exists():
        importlib.import_module(f"flows.cli.{_name}")

if suite_app.registered_commands:
    app.add_typer(suite_app, name="suite")
