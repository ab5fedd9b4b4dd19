"""Benchmark: how late a sandboxed command's exit is seen (`procs.wait_exit` on a pidfd, as the local
sandbox waits) against `Popen.wait(timeout=0.05)` in a loop (the local sandbox before, which polls with
sleeps of up to 50 ms) and the floor, a blocking `Popen.wait()` (waitpid: wakes at the exit).

Each round starts `sleep 0.07` once per way, alternating, and times start to reaped; the figure is the
median over rounds minus the 70 ms the child sleeps (the lateness), and its ratio to the floor's.

    .venv/bin/python benchmarks/bench_wait.py [--rounds 40]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable

from tasks_lib.sandbox.procs import wait_exit

CHILD = ["sleep", "0.07"]
SLEEP = 0.07


def polled(proc: subprocess.Popen[bytes]) -> None:
    while True:
        try:
            proc.wait(timeout=0.05)
            return
        except subprocess.TimeoutExpired:
            continue


def pidfd(proc: subprocess.Popen[bytes]) -> None:
    while not wait_exit(proc, 0.05):
        continue


def floor(proc: subprocess.Popen[bytes]) -> None:
    proc.wait()


def timed(way: Callable[[subprocess.Popen[bytes]], None]) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(CHILD)
    way(proc)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    rounds = parser.parse_args().rounds
    ways = {"floor (blocking wait)": floor, "wait_exit (pidfd)": pidfd, "Popen.wait(timeout=0.05) loop": polled}
    seen: dict[str, list[float]] = {name: [] for name in ways}
    for index in range(rounds):
        order = list(ways.items()) if index % 2 == 0 else list(reversed(ways.items()))
        for name, way in order:
            seen[name].append(timed(way))
    base = statistics.median(seen["floor (blocking wait)"]) - SLEEP
    print(f"load average {os.getloadavg()[0]:.1f}; {rounds} rounds; lateness = median(start to reaped) - {SLEEP * 1000:.0f} ms")
    for name, times in seen.items():
        late = statistics.median(times) - SLEEP
        print(f"{name:32} lateness {late * 1000:6.1f} ms   ratio to floor {late / base:5.2f}x")


if __name__ == "__main__":
    main()
