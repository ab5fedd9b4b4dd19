"""One Prefect API: with PREFECT_API_URL set, a `memtrial` process starts no temporary server and its
runs land in that API; without it each process starts (and stops) its own, memtrial's rather than
Prefect's (`flows.runtime.localserver`, `tests/test_local_server.py`). Prefect's database holds only history:
a rerun on a fresh database still takes every completed stage from the artifact root.
Real `memtrial` processes, a real Prefect API (the test harness) on 127.0.0.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from flows.stages import FAIL_STAGE_ENV

TEMPORARY = "Starting temporary server"
"""What Prefect logs when it starts its own temporary server (memtrial never lets it)."""
OWNED = "started a local Prefect server"
"""What memtrial says when it starts a server for the command."""
CLI = [sys.executable, "-c", "import sys; from flows.cli.main import main; sys.exit(main(sys.argv[1:]))"]


def memtrial(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CLI, *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def smoke_config(tmp_path: Path) -> Path:
    config = tmp_path / "one.yaml"
    config.write_text(f"name: api-test\ntasks: [rotlog-keep-count]\nconditions: ['off', 'on']\nsuites: []\n"
                      f"artifact_root: {tmp_path / 'artifacts'}\n", encoding="utf-8")
    return config


def clean_env(tmp_path: Path, prefect_home: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API")}
    return {**env, "PREFECT_HOME": str(tmp_path / prefect_home), "MEMTRIAL_STAGE_TRACE": str(tmp_path / "trace.tsv"),
            "PREFECT_LOGGING_LEVEL": "INFO"}


def test_a_rerun_on_a_fresh_prefect_database_takes_every_completed_stage_from_the_artifact_root(tmp_path: Path) -> None:
    """The failure prevented: pruning Prefect's database (the documented way to keep it in bounds)
    silently costing a full, paid re-run because the cache lived in the database."""
    env = clean_env(tmp_path, "prefect-a")
    first = memtrial(["run", "--config", str(smoke_config(tmp_path)), "--plain", "--json"], {**env, FAIL_STAGE_ENV: "report"}, tmp_path)
    assert first.returncode != 0 and "report" in first.stderr
    assert OWNED in first.stderr, "without PREFECT_API_URL a server of its own is expected (negative control)"
    assert TEMPORARY not in first.stderr, "Prefect started its own temporary server (it outlives a killed flow process)"
    (run_id,) = [p.name for p in (tmp_path / "artifacts" / "runs").iterdir() if p.name.endswith("-calibration")]
    run_id = run_id.removesuffix("-calibration")
    trace = tmp_path / "trace.tsv"
    before = len(trace.read_text().splitlines())

    again = memtrial(["rerun", run_id, "--plain"], clean_env(tmp_path, "prefect-b"), tmp_path)  # a fresh database

    assert again.returncode == 0, again.stderr[-2000:]
    rerun = Counter(line.split("\t")[0] for line in trace.read_text().splitlines()[before:])
    assert rerun == Counter({"report": 1}), f"a rerun on a fresh Prefect database executed {dict(rerun)}"


def test_with_prefect_api_url_set_no_process_starts_a_temporary_server(prefect_harness: None, tmp_path: Path) -> None:
    """The failure prevented: every process without a shared API paying ~6 s for its own temporary
    server and hiding its runs from the team's UI."""
    import asyncio

    from prefect.client.orchestration import get_client
    from prefect.settings import PREFECT_API_URL

    env = {**clean_env(tmp_path, "prefect-unused"), "PREFECT_API_URL": str(PREFECT_API_URL.value())}
    done = memtrial(["run", "--config", str(smoke_config(tmp_path)), "--plain", "--json"], env, tmp_path)

    assert done.returncode == 0, done.stderr[-2000:]
    assert TEMPORARY not in done.stderr and OWNED not in done.stderr
    run_id = json.loads(done.stdout)["run_id"]

    async def names() -> list[str]:
        async with get_client() as client:
            return [r.name for r in await client.read_flow_runs(limit=200)]

    assert run_id in asyncio.run(names()), "the run is not in the shared Prefect API"
