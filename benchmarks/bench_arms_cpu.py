"""Two code trees side by side on the same paired matrix: wall and CPU seconds of `memtrial paired`.

Each round runs the calibration agent's matrix (`--tasks`, conditions off, on, ablate:all, one trial)
once with each tree, alternating which goes first, each in a fresh process with a fresh artifact root,
MEMTRIAL_HOME and PREFECT_HOME (so both pay the same preparation). CPU is the user + system time of
the command and every process it waited for (`RUSAGE_CHILDREN`), the figure a loaded shared machine
disturbs least; wall time is printed beside it. The figures are the ratios of the two trees' medians.

    git worktree add --detach /tmp/base COMMIT   # a checkout: the fixtures are built from its git objects
    .venv/bin/python benchmarks/bench_arms_cpu.py --against /tmp/base [--rounds 3] [--tasks A,B,...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

THIS = Path(__file__).resolve().parents[1]
TASKS = "rotlog-keep-count,tabmill-delimiter,logship-partial-exit,certwatch-renew-window,pagekit-last-page,urlkit-slug-accents"


def one_run(tree: Path, tasks: str) -> tuple[float, float, int]:
    """(wall, cpu, exit status) of one `memtrial paired` with `tree`'s code."""
    with tempfile.TemporaryDirectory(prefix="bench-arms-") as scratch:
        home = Path(scratch)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_API", "MEMTRIAL_"))}
        env.update(PYTHONPATH=str(tree), PREFECT_HOME=str(home / "prefect"), MEMTRIAL_HOME=str(home / "memtrial"),
                   PREFECT_SERVER_ANALYTICS_ENABLED="false", MEMTRIAL_ARTIFACT_ROOT=str(home / "artifacts"))
        argv = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))",
                "paired", "--agent", "calibration", "--tasks", tasks, "--conditions", "off,on,ablate:all",
                "--trials", "1"]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(argv, cwd=tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, check=False)
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        sys.exit(f"{tree}: memtrial paired exited {done.returncode}; no figure is reported:\n{done.stderr.decode()[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, done.returncode


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--against", type=Path, required=True, help="the other code tree (a worktree or an archive of a commit)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tasks", default=TASKS)
    args = parser.parse_args()
    trees = {"this": THIS, "against": args.against.resolve()}
    seen: dict[str, list[tuple[float, float, int]]] = {name: [] for name in trees}
    load = os.getloadavg()[0]
    for index in range(args.rounds):
        order = list(trees.items()) if index % 2 == 0 else list(reversed(trees.items()))
        for name, tree in order:
            seen[name].append(one_run(tree, args.tasks))
            print(f"round {index + 1} {name}: wall {seen[name][-1][0]:.1f} s, cpu {seen[name][-1][1]:.1f} s, exit {seen[name][-1][2]}",
                  flush=True)
    medians = {name: (statistics.median(w for w, _, _ in runs), statistics.median(c for _, c, _ in runs)) for name, runs in seen.items()}
    tasks = len(args.tasks.split(","))
    print(f"{tasks} tasks x 3 conditions, {args.rounds} rounds; load average {load:.1f} before, {os.getloadavg()[0]:.1f} after")
    for name, (wall, cpu) in medians.items():
        print(f"{name:8} median wall {wall:6.1f} s   median cpu {cpu:6.1f} s")
    print(f"this / against: wall {medians['this'][0] / medians['against'][0]:.2f}x, cpu {medians['this'][1] / medians['against'][1]:.2f}x")


if __name__ == "__main__":
    main()
