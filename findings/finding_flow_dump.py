"""Run one findings agent (PROBE_SCRIPT) as the `command` agent through the real nightly flow (`off`) over PROBE_TASKS; dump
records and check.txt to PROBE_OUT. Copy to tests/ to run (it needs tests/conftest.py and tests/hostile_flow.py)."""
import os
import shutil
from pathlib import Path

from hostile_flow import run_hostile


def test_dump(prefect_harness, tmp_path, monkeypatch):
    tasks = os.environ.get("PROBE_TASKS", "cookie-session-lifetime,certwatch-renew-window,ledgerlite-json-export").split(",")
    script = Path(os.environ.get("PROBE_SCRIPT", "/work/wt-attack/findings/probe_agent.py")).read_text()
    records = run_hostile(tmp_path, monkeypatch, script, tasks, conditions=["off"], run_id="probe")
    out = Path(os.environ.get("PROBE_OUT", "/tmp/attack-probe"))
    shutil.rmtree(out, ignore_errors=True); out.mkdir(parents=True)
    for r in records:
        (out / f"{r.task_id}.record.json").write_text(r.model_dump_json(indent=1))
    for p in (tmp_path / "artifacts").rglob("check.txt"):
        shutil.copy(p, out / ("-".join(p.parts[-7:])))
    assert records
