"""Orchestration benchmark: what Prefect costs per arm, how cheap a rerun after a late failure is,
and arms/hour with 1 vs 2 parallel workers, on the calibration matrix of the bundled corpus.

    .venv/bin/python benchmarks/bench_orchestration.py [--tasks N] [--rounds R]

1. Overhead per task: the same arms run (a) through `run_attempt` with every step called directly
   and (b) as the Prefect `run-arm` task, the same `run_attempt` with its steps as nested tasks
   (persisted result, cache lookup), one at a time, inside one flow; overhead = (b - a) / arms,
   also per Prefect task run (7 per arm).
2. Rerun after a late failure: the nightly flow on the default matrix (every bundled task x off,
   on, ablate:all; no suites) fails in its last stage (report); `nightly` is re-run with the same
   run id; the rerun's time as a fraction of the failed run's.
3. Arms/hour: the paired flow with a thread pool of 1 and of 2 workers (fresh run ids, preparation
   cached beforehand).
4. Report re-render (with 2): the rerun's report built again from the same stored inputs, drawing
   its three plots (`plots.draw`, what every render did before the plot cache) vs finding them in
   the artifact store (`plots.stored_plotter`), with the aggregation alone as the floor, alternating,
   each in a fresh process (so the draw pays matplotlib's import, as a rerun's process does).

`--only rerun` runs 2 and 4 alone; `--rerender ROOT RUN` runs 4 alone on a stored run.

Everything runs in one process against Prefect's local ephemeral server, with a fresh
MEMTRIAL_HOME and artifact root in a temporary folder.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HOME = Path(tempfile.mkdtemp(prefix="memtrial-bench-orch-"))
os.environ.setdefault("MEMTRIAL_HOME", str(HOME))
os.environ.setdefault("PREFECT_LOGGING_LEVEL", "CRITICAL")
os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from flows.runtime.settings import PROJECT_ROOT, configure_prefect

configure_prefect()

from prefect import flow

from flows import stages
from flows.nightly import nightly
from flows.paired import arm_specs, paired_flow, prepare_tasks
from flows.runners import task_runner
from tasks_lib.arm.steps import run_attempt
from tasks_lib.artifacts import new_run_id
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.run.config import RunConfig, RunnerSpec

LAST_RERUN: tuple[Path, str] | None = None
"""(artifact root, agent run id) of the last rerun measurement, for the re-render."""
ARM_TASK_RUNS = 7
"""Prefect task runs per arm: run-arm and its six steps."""


def config_for(tasks: list[str], root: Path, workers: int = 1) -> RunConfig:
    return RunConfig(tasks=tasks, conditions=["off", "on"], artifact_root=str(root), runner=RunnerSpec(workers=workers))


@flow(name="bench-overhead")
def overhead_flow(config: RunConfig, artifact_root: str) -> tuple[list[float], list[float]]:
    """Wall time of each arm called directly, then as the Prefect task (one at a time)."""
    storage = stages.result_storage(artifact_root, config.result_root)
    prepared = prepare_tasks(config, str(PROJECT_ROOT), artifact_root, storage)
    agent = config.all_agents[0]

    def specs(run_id: str):  # type: ignore[no-untyped-def]
        return arm_specs(config, agent, prepared, run_id=run_id, artifact_root=artifact_root)

    direct, wrapped = [], []
    arm = stages.run_arm.with_options(result_storage=storage)
    for spec in specs(new_run_id("direct")):
        started = time.perf_counter()
        run_attempt(*stages.arm_attempt(spec))
        direct.append(time.perf_counter() - started)
    for spec in specs(new_run_id("wrapped")):
        started = time.perf_counter()
        arm(spec)
        wrapped.append(time.perf_counter() - started)
    return direct, wrapped


def rerun_fraction(tasks: list[str], root: Path) -> tuple[float, float]:
    """(seconds of the run that failed in its last stage, seconds of the rerun from cache)."""
    root.mkdir(parents=True, exist_ok=True)
    config = root / "rerun.yaml"
    config.write_text(f"tasks: [{', '.join(tasks)}]\nconditions: ['off', 'on', 'ablate:all']\nsuites: []\nartifact_root: {root / 'rerun'}\n"
                      "runner: {kind: thread, workers: 1}\n")
    run_id = new_run_id("bench")
    global LAST_RERUN
    LAST_RERUN = (root / "rerun", f"{run_id}-calibration")
    os.environ[stages.FAIL_STAGE_ENV] = "report"
    started = time.perf_counter()
    try:
        nightly(config_path=str(config), run_id=run_id)
        raise SystemExit("the injected failure did not fail the run")
    except stages.InjectedFailure:
        failed = time.perf_counter() - started
    finally:
        del os.environ[stages.FAIL_STAGE_ENV]
    started = time.perf_counter()
    nightly(config_path=str(config), run_id=run_id)
    return failed, time.perf_counter() - started


RENDER = """
import sys, time
from flows.cli.report import bundled_memory_texts
from tasks_lib.analysis.aggregate import aggregate_run
from tasks_lib.artifacts import open_store
from tasks_lib.report import build_report, plots
store, run_id, how = open_store(sys.argv[1]), sys.argv[2], sys.argv[3]
texts = bundled_memory_texts()  # what the nightly flow's report stage grades with
texts = {k: v for k, v in (texts or {}).items() if any(r.task_id == k for r in aggregate_run(store, run_id, texts).records)}
if how == "draw":
    plots.stored_plotter = lambda store: plots.draw
started = time.perf_counter()
if how == "floor":
    aggregate_run(store, run_id, texts)
else:
    build_report(store, run_id, memory_texts=texts)
print(time.perf_counter() - started)
"""
"""Times, in a fresh process, `build_report` drawing its plots (`draw`), finding them stored (`stored`),
or the floor: the aggregation that `build_report` starts with, alone (`floor`)."""


def rerender(root: Path, run_id: str, how: str) -> float:
    """Seconds of `how` (RENDER) on `run_id` in a fresh process."""
    import subprocess

    done = subprocess.run([sys.executable, "-c", RENDER, str(root), run_id, how], capture_output=True, text=True, check=True,
                          cwd=PROJECT_ROOT)
    return float(done.stdout.split()[-1])


def rerender_rounds(root: Path, run_id: str, rounds: int) -> None:
    """Print draw / stored / floor side by side, alternating, `rounds` times, and their medians."""
    times: dict[str, list[float]] = {"draw": [], "stored": [], "floor": []}
    rerender(root, run_id, "stored")  # the plots of these inputs into the store
    for _ in range(rounds):
        for how in times:
            times[how].append(rerender(root, run_id, how))
    draw, stored, floor = (statistics.median(times[h]) for h in ("draw", "stored", "floor"))
    print(f"report re-render in a fresh process, median of {rounds}: drawing the plots {draw:.2f} s, plots from the store "
          f"{stored:.2f} s, floor (aggregation alone) {floor:.2f} s; render beyond the floor {draw - floor:.2f} s vs "
          f"{stored - floor:.2f} s; load {os.getloadavg()[0]:.1f} ({', '.join(f'{h} {[round(t, 2) for t in v]}' for h, v in times.items())})")


def arms_per_hour(tasks: list[str], root: Path, workers: int) -> tuple[float, int]:
    config = config_for(tasks, root / "throughput", workers)
    run = paired_flow.with_options(task_runner=task_runner(config.runner))
    run(config, new_run_id("warm"), str(PROJECT_ROOT), str(root / "throughput"))  # preparation cached from here on
    started = time.perf_counter()
    result = run(config, new_run_id(f"w{workers}"), str(PROJECT_ROOT), str(root / "throughput"))
    elapsed = time.perf_counter() - started
    return len(result.records) / elapsed * 3600, len(result.records)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tasks", type=int, default=4, help="bundled tasks in the overhead and throughput matrix (x off/on)")
    parser.add_argument("--rerun-tasks", type=int, default=0, help="bundled tasks in the rerun measurement (0: all)")
    parser.add_argument("--rounds", type=int, default=1, help="repetitions of each measurement")
    parser.add_argument("--only", choices=["all", "rerun"], default="all", help="rerun: only the rerun and re-render measurements")
    parser.add_argument("--rerender-rounds", type=int, default=3, help="alternating rounds of the report re-render measurement")
    parser.add_argument("--rerender", nargs=2, metavar=("ROOT", "RUN"), help="only the re-render measurement, on a stored run")
    args = parser.parse_args()
    if args.rerender:
        rerender_rounds(Path(args.rerender[0]), args.rerender[1], args.rerender_rounds)
        return
    every = [t.task_id for t in load_tasks(PROJECT_ROOT / "corpora" / "tasks")]
    tasks, rerun_tasks = every[: args.tasks], every[: args.rerun_tasks or len(every)]
    root = HOME / "bench"
    print(f"calibration matrix: {len(tasks)} tasks x off/on = {2 * len(tasks)} arms; cores: {os.cpu_count()}; "
          f"load average: {os.getloadavg()[0]:.1f}")
    for round_ in range(args.rounds):
        if args.only == "all":
            direct, wrapped = overhead_flow(config_for(tasks, root / f"overhead{round_}"), str(root / f"overhead{round_}"))
            per_arm = (sum(wrapped) - sum(direct)) / len(direct)
            print(f"[{round_}] arm direct median {statistics.median(direct):.2f} s, as Prefect task median {statistics.median(wrapped):.2f} s; "
                  f"overhead {per_arm:.3f} s per arm = {per_arm / ARM_TASK_RUNS * 1000:.0f} ms per Prefect task run")
        failed, rerun = rerun_fraction(rerun_tasks, root / f"rerun{round_}")
        print(f"[{round_}] nightly ({3 * len(rerun_tasks)} arms) failing in its last stage {failed:.1f} s; "
              f"rerun from cache {rerun:.1f} s = {100 * rerun / failed:.1f}% of the run; load {os.getloadavg()[0]:.1f}")
        assert LAST_RERUN is not None
        rerender_rounds(*LAST_RERUN, args.rerender_rounds)
        if args.only == "rerun":
            continue
        for workers in (1, 2):
            rate, arms = arms_per_hour(tasks, root / f"w{workers}-{round_}", workers)
            print(f"[{round_}] {workers} worker(s): {rate:.0f} arms/hour ({arms} arms)")


if __name__ == "__main__":
    main()
