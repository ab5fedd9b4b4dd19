"""`memtrial server`: one local Prefect server that every later `memtrial` command reuses.

Without it each `run`, `rerun` and `paired` starts a server of its own (~6 s) and stops it at exit.
"""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.common import err, out


def server(
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 the Prefect API listens on.")] = 4200,
) -> None:
    """Run a local Prefect server on 127.0.0.1 (until Ctrl-C) that `memtrial` commands in the same
    PREFECT_HOME reuse without starting their own; prints the PREFECT_API_URL line for other processes."""
    from flows.localserver import SERVER_FILE, api_url, prefect_home, run_standing
    from flows.settings import configure_prefect

    configure_prefect()
    out.print(f"export PREFECT_API_URL={api_url(port)}", markup=False, highlight=False)
    err.print(f"memtrial: Prefect server on 127.0.0.1:{port}, database in {prefect_home()}; memtrial commands with this "
              f"PREFECT_HOME reuse it ({SERVER_FILE}); Ctrl-C stops it", markup=False, highlight=False)
    run_standing(port)
