"""Does the flow process stay cheap as the matrix grows? Calibration arms on 2 local Dask workers
at several matrix sizes: the flow process's peak memory (RSS) and the time it spends outside arms,
per arm, side by side.

    .venv/bin/python benchmarks/bench_scale.py [--sizes 100,250,500] [--tasks 25] [--budget-minutes M]

The matrix is `--tasks` bundled tasks x off/on x trials, trials = size / (2 x tasks). Each size runs
in a process of its own (so its peak RSS, `ru_maxrss` of that process alone, is its own), against one
`memtrial server` started here (its start and memory are not the flow's), in one artifact root whose
preparation a warm-up run (trials 1) cached first. Arms run on a local Dask cluster of 2 worker
processes; the flow process (client and scheduler) only submits arms and collects records.

Time outside arms = the paired flow's wall minus the union of its `run-arm` task runs' intervals
(Prefect's start and end times): submission, preparation read from cache, collecting and storing
records, provenance, and any moment no arm runs. Linear or better means the per-arm figures do not
rise with the size. Sizes left when `--budget-minutes` is spent are skipped, and said so.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMTRIAL = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]


def union_seconds(intervals: list[tuple[float, float]]) -> float:
    """Total length covered by the intervals."""
    total, end = 0.0, float("-inf")
    for start, stop in sorted(intervals):
        if stop <= end:
            continue
        total += stop - max(start, end)
        end = stop
    return total


async def arm_intervals(flow_run_name: str) -> list[tuple[float, float]]:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowRunFilter,
        FlowRunFilterName,
        TaskRunFilter,
        TaskRunFilterName,
    )

    async with get_client() as client:
        (flow_run,) = await client.read_flow_runs(flow_run_filter=FlowRunFilter(name=FlowRunFilterName(any_=[flow_run_name])))
        spans, offset = [], 0
        while True:
            page = await client.read_task_runs(flow_run_filter=FlowRunFilter(id={"any_": [flow_run.id]}),  # type: ignore[arg-type]
                                               task_run_filter=TaskRunFilter(name=TaskRunFilterName(like_="run-arm-")),
                                               limit=200, offset=offset)
            spans += [(r.start_time.timestamp(), r.end_time.timestamp()) for r in page if r.start_time and r.end_time]
            if len(page) < 200:
                return spans
            offset += 200


def child(size: int, tasks: int, root: str) -> None:
    """One size: run the paired flow, print one JSON line of figures."""
    from flows.runtime.settings import PROJECT_ROOT, configure_prefect

    configure_prefect()
    from flows.paired import paired_flow
    from flows.runners import ready_task_runner
    from tasks_lib.artifacts import new_run_id
    from tasks_lib.corpus.tasks import load_tasks
    from tasks_lib.run.config import RunConfig, RunnerSpec

    chosen = [t.task_id for t in load_tasks(PROJECT_ROOT / "corpora" / "tasks")][:tasks]
    trials = max(1, size // (2 * tasks))
    config = RunConfig(tasks=chosen, conditions=["off", "on"], trials=trials, artifact_root=root,
                       runner=RunnerSpec(kind="dask", workers=2))
    run_id = new_run_id(f"scale{size}")
    started = time.perf_counter()
    result = paired_flow.with_options(task_runner=ready_task_runner(config.runner))(config, run_id, str(PROJECT_ROOT), root)
    wall = time.perf_counter() - started
    inside = union_seconds(asyncio.run(arm_intervals(run_id)))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"size": size, "arms": len(result.records), "cached": result.arms_cached, "wall": wall, "inside": inside,
                      "outside": wall - inside, "peak_rss_mb": peak_mb, "load": os.getloadavg()[0]}), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,250,500")
    parser.add_argument("--tasks", type=int, default=25)
    parser.add_argument("--budget-minutes", type=float, default=60.0)
    parser.add_argument("--child", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--root", default="", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child, args.tasks, args.root)
        return
    home = Path(tempfile.mkdtemp(prefix="memtrial-bench-scale-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update({"MEMTRIAL_HOME": str(home), "PREFECT_HOME": str(home / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
                "PREFECT_LOGGING_LEVEL": "CRITICAL", "PREFECT_SERVER_LOGGING_LEVEL": "CRITICAL", "DASK_LOGGING__DISTRIBUTED": "error"})
    sys.path.insert(0, str(ROOT))
    from flows.runtime.localserver import free_port, running_server

    port = free_port()
    server = subprocess.Popen([*MEMTRIAL, "server", "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    env["PREFECT_API_URL"] = f"http://127.0.0.1:{port}/api"
    deadline = time.monotonic() + 60 * args.budget_minutes
    print(f"cores: {os.cpu_count()}; {args.tasks} tasks x off/on; 2 local Dask workers; load average at start: {os.getloadavg()[0]:.1f}", flush=True)

    def one(size: int) -> dict[str, float] | None:
        done = subprocess.run([sys.executable, __file__, "--child", str(size), "--tasks", str(args.tasks), "--root", str(home / "artifacts")],
                              env=env, cwd=ROOT, capture_output=True, text=True, check=False)
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        if done.returncode != 0 or not lines:
            print(f"size {size} failed (exit {done.returncode}): {done.stderr[-1500:]}", flush=True)
            return None
        return json.loads(lines[-1])

    try:
        while running_server(home / "prefect") is None:
            if server.poll() is not None:
                raise SystemExit("memtrial server did not start")
            time.sleep(0.2)
        warm = one(2 * args.tasks)
        print(f"warm-up ({2 * args.tasks} arms, preparation into the cache): {warm}", flush=True)
        rows = []
        for size in [int(s) for s in args.sizes.split(",")]:
            if time.monotonic() > deadline:
                print(f"size {size}: skipped, --budget-minutes {args.budget_minutes:g} spent", flush=True)
                continue
            row = one(size)
            if row is None:
                continue
            rows.append(row)
            print(f"{row['arms']:4d} arms: wall {row['wall']:7.1f} s, outside arms {row['outside']:6.1f} s = "
                  f"{1000 * row['outside'] / row['arms']:5.0f} ms/arm, peak RSS {row['peak_rss_mb']:6.0f} MB = "
                  f"{1024 * row['peak_rss_mb'] / row['arms']:6.0f} KB/arm, load {row['load']:.1f}", flush=True)
        if len(rows) > 1:
            first, last = rows[0], rows[-1]
            growth = last["arms"] / first["arms"]
            print(f"x{growth:.1f} arms: outside-arm time x{last['outside'] / first['outside']:.2f}, "
                  f"peak RSS x{last['peak_rss_mb'] / first['peak_rss_mb']:.2f}", flush=True)
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)


if __name__ == "__main__":
    main()
