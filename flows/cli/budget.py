"""`memtrial budget ...`: run the money fence's preflight by hand, and fingerprint a key.

Registered in `flows.cli.main` as the `budget` group. Library errors become one line and exit 2; a
refused preflight exits 1.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, out
from tasks_lib.errors import MemtrialError
from tasks_lib.settings import BUDGET_CONFIG

CONFIG_ENV = BUDGET_CONFIG.name

budget_app = typer.Typer(help="The budget guard (money fence): check a key and its headroom before paying.", no_args_is_help=True)


@budget_app.command("check")
def budget_check(
    config: Annotated[Path | None, typer.Option("--config", help=f"Budget config, or a run config with a 'budget:' section (default ${CONFIG_ENV}).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run steps 1-3 (key identity, per-key ceiling, shared headroom) now; exit 1 when a paid pair could not start."""
    from tasks_lib.budget import load_budget_config, open_source, preflight

    path = config or (Path(BUDGET_CONFIG.text()) if BUDGET_CONFIG.text() else None)
    if path is None:
        raise MemtrialError(f"--config: missing; give a budget config file (or set ${CONFIG_ENV})")
    settings = load_budget_config(path)
    now = datetime.now(UTC)
    decision = preflight(settings, open_source(settings, path.parent, os.environ, now), os.environ.get(settings.key_env), now)
    if as_json:
        emit_json(decision.model_dump(mode="json"))
    else:
        for step in decision.steps:
            out.print(f"{step.status:10} {step.step:16} {step.detail}")
        out.print(f"{'allowed' if decision.allowed else 'REFUSED'}: {decision.reason} ({decision.source})")
    if not decision.allowed:
        raise typer.Exit(1)


@budget_app.command("fingerprint")
def budget_fingerprint(
    env: Annotated[str, typer.Option("--env", help="Environment variable holding the key (the key is never printed).")],
) -> None:
    """Print the SHA-256 fingerprint of the key in an environment variable, for 'key_sha256'."""
    from tasks_lib.budget import key_fingerprint

    value = os.environ.get(env, "")
    if not value:
        raise MemtrialError(f"--env: ${env} is not set or empty; export the key there first")
    out.print(key_fingerprint(value))
