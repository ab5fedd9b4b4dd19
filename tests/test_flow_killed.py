"""A flow process killed mid-run (SIGKILL, arms in flight) and the run resumed with `memtrial rerun`:
exactly one record per (task, condition, trial). Real `memtrial` processes, each with its own
local Prefect server; the artifact root is the only thing the two share."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq

CLI = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]


def test_a_killed_flow_process_then_rerun_leaves_exactly_one_record_per_cell(tmp_path: Path) -> None:
    """The failure prevented: a rerun after a crash duplicating the arms that had finished (two records
    for one cell) or dropping the ones in flight."""
    config = tmp_path / "run.yaml"
    config.write_text("name: killed\ntasks: [rotlog-keep-count, tabmill-delimiter]\nconditions: ['off', 'on']\ntrials: 2\n"
                      f"suites: []\nartifact_root: {tmp_path / 'artifacts'}\n", encoding="utf-8")
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}, "PREFECT_HOME": str(tmp_path / "prefect")}
    flow = subprocess.Popen([*CLI, "run", "--config", str(config), "--plain"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    runs = tmp_path / "artifacts" / "runs"
    try:
        deadline = time.monotonic() + 300
        while not list(runs.rglob("record.json")):
            assert flow.poll() is None and time.monotonic() < deadline, "the run ended before any arm finished"
            time.sleep(0.1)
    finally:
        # SIGKILL the whole process group, the flow process and its local Prefect server at once (a lone
        # SIGKILL of the flow process stops that server too: tests/test_local_server.py)
        os.killpg(flow.pid, signal.SIGKILL)
        flow.wait()
    (run_dir,) = [p for p in runs.iterdir() if p.name.endswith("-calibration")]
    finished = len(list(run_dir.rglob("record.json")))
    assert not (run_dir / "records.parquet").exists() and finished < 8, "the kill came too late to test anything"

    rerun = subprocess.run([*CLI, "rerun", run_dir.name.removesuffix("-calibration"), "--plain"], env=env, cwd=tmp_path,
                           capture_output=True, text=True, timeout=600, check=False)

    assert rerun.returncode == 0, rerun.stderr[-2000:]
    cells = Counter((r["task_id"], r["condition"], r["trial"]) for r in pq.read_table(run_dir / "records.parquet").to_pylist())
    assert len(cells) == 8 and set(cells.values()) == {1}, cells
    assert len(list(run_dir.rglob("record.json"))) == 8
