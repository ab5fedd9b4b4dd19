"""`memtrial cache list|clear`: the cached stage results a rerun or a later run re-uses (`flows.runtime.cache`).

Registered in `flows.cli.main` as the `cache` group. Neither command starts Prefect. An unknown stage
or task, or `clear` with nothing named, is one line and exit 2.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, out, summary_table
from flows.cli.options import ArtifactRootOpt
from tasks_lib.errors import MemtrialError

if TYPE_CHECKING:
    from tasks_lib.artifacts import ArtifactStore

cache_app = typer.Typer(help="The cached stage results a rerun re-uses: list them, clear them whole, per task or per stage.",
                        no_args_is_help=True)

ResultRootOpt = Annotated[str | None, typer.Option("--result-root", help="The run config's result_root, when it names one (default: <artifact root>/prefect-results).")]
COLUMNS = ["stage", "tasks", "run", "label", "stored (UTC)", "key"]


def _stores(root: str | None, result_root: str | None) -> tuple[str, ArtifactStore, ArtifactStore]:
    from flows.runtime.cache import index_root, results_root
    from flows.runtime.settings import default_artifact_root
    from tasks_lib.artifacts import open_store

    results = results_root(root or default_artifact_root(), result_root)
    return results, open_store(results), open_store(index_root(results))


@cache_app.command("list")
def cache_list(root: ArtifactRootOpt = None, result_root: ResultRootOpt = None, as_json: JsonFlag = False) -> None:
    """List the cached stage results: stage, tasks, run, when; a rerun re-uses each of them."""
    from flows.runtime.cache import list_entries

    where, results, index = _stores(root, result_root)
    entries = list_entries(results, index)
    if as_json:
        emit_json([e.model_dump(mode="json") for e in entries])
        return
    if not entries:
        out.print(f"no cached stage results under {where}")
        return
    rows = [{"stage": e.stage, "tasks": ",".join(e.tasks) or "-", "run": e.run_id or "-", "label": e.label or "-",
             "stored (UTC)": e.stored_at.strftime("%Y-%m-%d %H:%M:%S") if e.stored_at.timestamp() else "-", "key": e.key}
            for e in entries]
    out.print(summary_table(rows, COLUMNS, f"{len(entries)} cached stage result(s) under {where}"))


@cache_app.command("clear")
def cache_clear(
    root: ArtifactRootOpt = None,
    result_root: ResultRootOpt = None,
    everything: Annotated[bool, typer.Option("--all", help="Clear every cached stage result.")] = False,
    stage: Annotated[str | None, typer.Option("--stage", help="Clear only this stage's results (a name 'memtrial cache list' shows, e.g. corpus-invariants).")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Clear only the results that cover this task id.")] = None,
) -> None:
    """Clear cached stage results (whole, per stage, per task, or a stage of one task): the next run computes them."""
    from flows.runtime.cache import clear, list_entries, select

    if everything == (stage is not None or task is not None):
        raise MemtrialError("memtrial cache clear: name what to clear: --all, or --stage NAME and/or --task ID "
                            "(see 'memtrial cache list')")
    where, results, index = _stores(root, result_root)
    entries = list_entries(results, index)
    chosen = entries if everything else select(entries, stage, task)
    count = clear(results, index, chosen)
    out.print(f"cleared {count} cached stage result(s) under {where}; the next run computes them again")
