"""Whole CLI commands against a floor, interleaved round by round, with the load average beside them.

Absolute times on a shared 2-core machine say more about the other jobs than about the code, so
every figure here is also a ratio against a floor command timed in the same rounds: a bare
interpreter start (`python -c pass`) and `memtrial --help` (the CLI's import cost). Each round runs
every command once, in order, so load that moves during the run hits every command alike.

Prints, per command: median and max wall seconds, peak RSS (the child's `ru_maxrss`), the exit
codes seen, and the median as a multiple of each floor's median; then the load average before and
after.

    .venv/bin/python benchmarks/bench_commands.py [--rounds 3] [--set retrieval|startup]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

BIN = Path(sys.executable).parent
MEMTRIAL = str(BIN / "memtrial")
FLOORS = {
    "python -c pass": [sys.executable, "-c", "pass"],
    "memtrial --help": [MEMTRIAL, "--help"],
}
SETS = {
    "startup": {},
    "retrieval": {
        "suite retrieval (reference, hashed)": [MEMTRIAL, "suite", "retrieval", "--embedder", "hashed"],
        "suite retrieval (reference, minilm)": [MEMTRIAL, "suite", "retrieval", "--embedder", "minilm"],
    },
}


def timed(argv: list[str], cwd: str) -> tuple[float, int, int]:
    """(wall seconds, peak RSS in MB, exit code) of one run of `argv`, its output discarded."""
    started = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        os.chdir(cwd)
        try:
            os.execv(argv[0], argv)
        finally:
            os._exit(127)
    _, status, usage = os.wait4(pid, 0)
    return time.perf_counter() - started, usage.ru_maxrss // 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds; each runs every command once")
    parser.add_argument("--set", choices=sorted(SETS), default="retrieval", help="which commands besides the floors")
    args = parser.parse_args()

    commands = {**FLOORS, **SETS[args.set]}
    walls: dict[str, list[float]] = {name: [] for name in commands}
    peaks: dict[str, int] = dict.fromkeys(commands, 0)
    codes: dict[str, set[int]] = {name: set() for name in commands}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-commands-") as cwd:
        for _ in range(args.rounds):
            for name, argv in commands.items():
                wall, peak, code = timed(argv, cwd)
                walls[name].append(wall)
                peaks[name] = max(peaks[name], peak)
                codes[name].add(code)
    load_after = os.getloadavg()

    medians = {name: statistics.median(values) for name, values in walls.items()}
    floor_names = list(FLOORS)
    print(f"{'command':40} {'median s':>9} {'max s':>7} {'peak MB':>8} {'exit':>6} "
          + " ".join(f"{'x ' + f:>18}" for f in floor_names))
    for name in commands:
        ratios = " ".join(f"{medians[name] / medians[f]:>18.1f}" for f in floor_names)
        exits = ",".join(str(c) for c in sorted(codes[name]))
        print(f"{name:40} {medians[name]:>9.2f} {max(walls[name]):>7.2f} {peaks[name]:>8} {exits:>6} {ratios}")
    print(f"rounds {args.rounds}; load average before {load_before[0]:.2f} {load_before[1]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f}")


if __name__ == "__main__":
    main()
