"""`memtrial power`: the smallest success difference the task-clustered test detects, a thin edge over
`tasks_lib.analysis.power`."""

from __future__ import annotations

from typing import Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, out
from flows.cli.grading import _store
from flows.cli.options import ArtifactRootOpt


def power(
    tasks: Annotated[int | None, typer.Option(help="Tasks in the corpus (default with --run: the run's tasks).")] = None,
    trials: Annotated[int | None, typer.Option(help="Trials per task and condition (default with --run: the run's).")] = None,
    baseline: Annotated[float | None, typer.Option(help="Stated off success rate of every task, in [0, 1].")] = None,
    run: Annotated[str | None, typer.Option("--run", help="Stored run whose observed per-task off rates are the baseline.")] = None,
    artifacts: ArtifactRootOpt = None,
    alpha: Annotated[float, typer.Option(help="Two-sided level of the sign-flip test.")] = 0.05,
    target: Annotated[float, typer.Option("--power", help="Power the difference must reach.")] = 0.8,
    replicates: Annotated[int, typer.Option(help="Simulated corpora per difference (Monte Carlo error shrinks as 1/sqrt).")] = 2000,
    seed: Annotated[int, typer.Option(help="Seed of the simulation.")] = 20261204,
    as_json: JsonFlag = False,
) -> None:
    """Print the smallest success difference the task-clustered sign-flip test detects with 80% power at the
    5% level, simulated from a stated baseline or a stored run's per-task off rates, with its Monte Carlo error."""
    from tasks_lib.analysis.power import (
        PowerError,
        detectable_difference,
        run_detectable_difference,
    )
    from tasks_lib.run.index import require_run
    from tasks_lib.run.records import read_records
    from tasks_lib.run.seal import verify_run

    if (baseline is None) == (run is None):
        raise PowerError("give exactly one baseline: --baseline P (a stated off rate) or --run RUN_ID (observed off rates)")
    if run is not None:
        store = _store(artifacts)
        files = require_run(store, run)
        verify_run(store, run)  # as grading does: nothing is planned from a run whose evidence changed or lost its seal
        records = read_records(store, run, files)
        result = run_detectable_difference(records, tasks=tasks, trials=trials, run_label=f"run {run}", replicates=replicates,
                                           seed=seed, alpha=alpha, target=target)
    else:
        if tasks is None or trials is None:
            raise PowerError("--tasks and --trials are required with --baseline (a stored run gives them with --run)")
        result = detectable_difference(tasks, trials, [baseline or 0.0], resample=True, baseline=f"stated {baseline:.2f}",
                                       alpha=alpha, target=target, replicates=replicates, seed=seed)
    if as_json:
        emit_json(result.model_dump(mode="json"))
        return
    from tasks_lib.report.wording import power_capped, power_result

    out.print(power_result(result, design=False))
    capped = power_capped(result)
    if capped:
        out.print(f"capped: {capped}")
    out.print(f"size check: at no difference the test rejects in {result.null_power:.3f} of simulated corpora (alpha {alpha})")
    out.print(f"method: {result.method}")
