"""The delivery hook's cost per prompt, beside its floor: a bare interpreter (`python -c pass`).

Four commands, interleaved round by round so machine noise hits all of them alike:
- floor: `python -c pass`;
- off: the hook of an arm without memory (the realm, no store: it must cost about the floor);
- on: the hook recalling through a delivery witness serving a reference store of one task's
  memories, as every arm with memory now runs (target: well under 100 ms);
- on-file: the hook opening that store file itself (a hand-run hook with MEMORY_DB set).

Prints the median wall time of each and the ratios to the floor, in one run.

    .venv/bin/python benchmarks/bench_hook.py [--rounds 15]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tasks_lib.arm.steps import memory_env
from tasks_lib.memory.delivery.witness import DeliveryWitness
from tasks_lib.memory.env import AGENT_ENV, REALM_ENV, STORE_ENV
from tasks_lib.memory.reference.store import SqliteMemoryStore

REALM = "project:0123456789abcdef"
MEMORIES = [
    "logship send: a partially acknowledged delivery must exit with status 17; the ops pager rule matches exactly that status.",
    "logship keeps a spool file on disk until every record in it was accepted, so a rejected record is retried on the next run.",
]
EVENT = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "Give a partially acknowledged delivery its own exit status."})


def _time(argv: list[str], env: dict[str, str], stdin: str) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, input=stdin.encode(), capture_output=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{argv}: exit {done.returncode}: {done.stderr.decode(errors='replace').strip()}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    hook = [sys.executable, "-m", "tasks_lib.memory.delivery.hook"]
    base = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIAL_") and k not in AGENT_ENV}
    with tempfile.TemporaryDirectory() as scratch:
        store_path = Path(scratch) / "memory.sqlite"
        store = SqliteMemoryStore(store_path)
        store.create_realm(REALM)
        store.remember(REALM, MEMORIES)
        store.close()
        root = Path(scratch) / "root"
        root.mkdir(mode=0o700)
        witness = DeliveryWitness(SqliteMemoryStore(store_path, create=False, read_only=True), REALM, root, served_by="bench").start()
        commands = {
            "floor": ([sys.executable, "-c", "pass"], base),
            "off": (hook, {**base, REALM_ENV: REALM}),  # an arm without memory: the realm, no store
            "on": (hook, {**base, **memory_env("on", REALM, witness.socket_path)}),
            "on-file": (hook, {**base, REALM_ENV: REALM, STORE_ENV: str(store_path)}),
        }
        times: dict[str, list[float]] = {name: [] for name in commands}
        try:
            for _ in range(args.rounds):
                for name, (argv, env) in commands.items():
                    times[name].append(_time(argv, env, EVENT))
        finally:
            receipt = witness.close()
        if len(receipt.recalls) != args.rounds or not all(r.ids for r in receipt.recalls):
            raise SystemExit(f"the witness served {len(receipt.recalls)} recalls, not one with hits per round: the on path is not measured")
    medians = {name: statistics.median(values) for name, values in times.items()}
    for name, value in medians.items():
        print(f"{name:6s} median {value * 1000:7.1f} ms  ({value / medians['floor']:.2f}x the floor)")


if __name__ == "__main__":
    main()
