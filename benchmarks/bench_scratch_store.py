"""Disposable stores: the reference store made and filled durable (a sync to disk per commit) and as a
scratch store (`durable=False`), on the disk under the temporary folder, against the durable store on
tmpfs (/dev/shm: no disk to sync to, the floor). Each round makes `--stores` stores of `--facts`
memories committed one at a time (as the recall sweep plants a session's turns), the three ways in
alternating order; the figures are the medians and their ratios to the floor.

    .venv/bin/python benchmarks/bench_scratch_store.py [--rounds 5] [--stores 10] [--facts 20]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from tasks_lib.memory.reference.store import SqliteMemoryStore

REALM = "trial:bench.task.on.t0"


def fill(folder: Path, stores: int, facts: int, durable: bool) -> float:
    start = time.perf_counter()
    for index in range(stores):
        with SqliteMemoryStore(folder / f"m{index}.sqlite", "hashed", durable=durable) as store:
            store.create_realm(REALM)
            for fact in range(facts):
                store.remember(REALM, [f"fact {fact} of store {index}: the build runs on node {fact * 7 % 13}"])
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--stores", type=int, default=10)
    parser.add_argument("--facts", type=int, default=20)
    args = parser.parse_args()
    ways = {"durable, tmpfs (floor)": ("/dev/shm", True), "durable, disk": (None, True), "scratch, disk": (None, False)}
    seen: dict[str, list[float]] = {name: [] for name in ways}
    for index in range(args.rounds):
        order = list(ways.items()) if index % 2 == 0 else list(reversed(ways.items()))
        for name, (where, durable) in order:
            with tempfile.TemporaryDirectory(dir=where) as folder:
                seen[name].append(fill(Path(folder), args.stores, args.facts, durable))
    floor = statistics.median(seen["durable, tmpfs (floor)"])
    print(f"load average {os.getloadavg()[0]:.1f}; {args.rounds} rounds of {args.stores} stores x {args.facts} commits; "
          f"disk: {tempfile.gettempdir()}")
    for name, times in seen.items():
        print(f"{name:24} median {statistics.median(times):6.2f} s   ratio to floor {statistics.median(times) / floor:5.2f}x")


if __name__ == "__main__":
    main()
