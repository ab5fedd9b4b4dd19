"""`memtrial server`: one local Prefect server that every later `memtrial` command reuses; and
`memtrial prune-history`: Prefect's database kept in bounds.

Without a server each `run`, `rerun` and `paired` starts one of its own (~6 s) and stops it at exit.
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
    from flows.runtime.localserver import SERVER_FILE, api_url, prefect_home, run_standing
    from flows.runtime.settings import configure_prefect

    configure_prefect()
    out.print(f"export PREFECT_API_URL={api_url(port)}", markup=False, highlight=False)
    err.print(f"memtrial: Prefect server on 127.0.0.1:{port}, database in {prefect_home()}; memtrial commands with this "
              f"PREFECT_HOME reuse it ({SERVER_FILE}); Ctrl-C stops it", markup=False, highlight=False)
    run_standing(port)


def prune_history(
    older_than_days: Annotated[float, typer.Option("--older-than-days", min=0, help="Delete flow runs that ended more than this many days ago.")] = 30,
) -> None:
    """Delete Prefect's record of flow runs (their task runs, states and logs) that ended more than
    N days ago, from the Prefect API memtrial uses (PREFECT_API_URL, a running memtrial server, else
    the local database). Cached stage results live in the artifact root and stay."""
    from datetime import UTC, datetime, timedelta

    from flows.cli.run import _api_ready, _start_prefect

    _start_prefect()
    _api_ready()
    from flows.runtime.history import prune_flow_runs

    cutoff = datetime.now(UTC) - timedelta(days=older_than_days)
    deleted = prune_flow_runs(cutoff)
    out.print(f"deleted {deleted} flow run(s) that ended before {cutoff:%Y-%m-%d %H:%M:%S} UTC", markup=False, highlight=False)
