"""What reusing a running local Prefect server saves a small run: `memtrial run --config
configs/smoke.yaml` starting a server of its own vs the same command with `memtrial server`
running, side by side, with a floor (a process that sets up Prefect as memtrial does and runs one
empty flow on the running server).

    .venv/bin/python benchmarks/bench_server_reuse.py [--rounds R]

A fresh MEMTRIAL_HOME (and PREFECT_HOME in it) in a temporary folder; one warm-up run first, so
preparation and the corpus check come from cache in every timed run, as in a user's second run.
The rounds interleave the three commands so load drift hits them alike.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEMTRIAL = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]
FLOOR = """
from flows.cli.run import _api_ready, _start_prefect
_start_prefect(); _api_ready()
from prefect import flow
flow(name="floor")(lambda: None)()
"""


def timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(argv, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--port", type=int, default=0, help="port of the memtrial server (default: a free one)")
    args = parser.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memtrial-bench-server-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    env.update({"MEMTRIAL_HOME": str(home), "PREFECT_HOME": str(home / "prefect"), "PREFECT_SERVER_ANALYTICS_ENABLED": "false"})
    smoke = [*MEMTRIAL, "run", "--config", str(ROOT / "configs" / "smoke.yaml"), "--plain"]
    print(f"cores: {os.cpu_count()}; load average at start: {os.getloadavg()[0]:.1f}")
    server_down = {**env, "PREFECT_HOME": str(home / "prefect-own")}  # no server recorded here: each run starts its own
    print(f"warm-up run (preparation into the cache): {timed(smoke, server_down):.1f} s")
    from flows.runtime.localserver import free_port, running_server

    port = args.port or free_port()
    server = subprocess.Popen([*MEMTRIAL, "server", "--port", str(port)], env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        while running_server(home / "prefect") is None:
            if server.poll() is not None:
                raise SystemExit("memtrial server did not start")
            time.sleep(0.1)
        own, reused, floor = [], [], []
        for round_ in range(args.rounds):
            own.append(timed(smoke, server_down))
            reused.append(timed(smoke, env))
            floor.append(timed([sys.executable, "-c", FLOOR], env))
            print(f"[{round_}] own server {own[-1]:.1f} s, memtrial server reused {reused[-1]:.1f} s, floor {floor[-1]:.1f} s; "
                  f"load {os.getloadavg()[0]:.1f}")
    finally:
        server.send_signal(signal.SIGINT)
        server.wait(30)
    a, b, f = statistics.median(own), statistics.median(reused), statistics.median(floor)
    print(f"median: own server {a:.1f} s, reused {b:.1f} s (saves {a - b:.1f} s, {100 * (a - b) / a:.0f}% of the run), "
          f"floor {f:.1f} s; own/reused {a / b:.2f}x, reused/floor {b / f:.2f}x")


if __name__ == "__main__":
    main()
