"""Drive the real nightly flow with a hostile `command` agent, for the tests named `test_hostile_*`.

`run_hostile` writes a run config whose only extra agent is `command` running `script` (Python, in the
agent's sandbox, workspace as cwd), a money fence over a local ledger (the command agent is paid),
and runs it on a real Prefect API: by default through `flows.paired.paired_flow` (what `memtrial
paired --agent command` runs: preparation, invariants, the arms, the sealed records), or with
`flow="nightly"` through `flows.nightly.nightly` (the calibration agent's matrix first, then the
hostile agent's, then grading and the report). Either way the hostile agent's records are under
`<run_id>-command` and are read back from the artifact store. The calibration matrix a nightly run
adds is covered by the nightly flow's own tests; here it only doubled each attack's cost.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Literal

import pytest

from tasks_lib.artifacts import open_store
from tasks_lib.budget import Ledger, key_fingerprint, write_ledger
from tasks_lib.contracts import RunRecord
from tasks_lib.run.records import read_records

KEY = "sk-eval-hostile-0001"
KEY_ENV = "MEMTRIAL_TEST_EVAL_KEY"


def run_hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, tasks: Sequence[str],
                conditions: Sequence[str] = ("off", "on"), run_id: str = "hostile",
                flow: Literal["paired", "nightly"] = "paired") -> list[RunRecord]:
    """Run `script` as the `command` agent through the paired (or nightly) flow; return its records (schedule order)."""
    from flows.nightly import nightly, resolve_config
    from flows.paired import agent_run_id, paired_flow
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.run.preflight import preflight

    write_ledger(tmp_path / "ledger.json", Ledger(opening_balance_usd=100.0, key_ceiling_usd=40.0))
    (tmp_path / "budget.yaml").write_text(
        f"provider: ledger\nkey_env: {KEY_ENV}\nkey_sha256: {key_fingerprint(KEY)}\n"
        "production_reserve_usd: 60\npair_cap_usd: 10\narm_ceiling_usd: 4\nledger_path: ledger.json\n"
    )
    argv = ["python3", "-c", script]
    config = tmp_path / "run.yaml"
    config.write_text(
        f"name: {run_id}\ntasks: {json.dumps(list(tasks))}\nconditions: {json.dumps(list(conditions))}\nsuites: []\n"
        f"artifact_root: {tmp_path / 'artifacts'}\nbudget: {{config: budget.yaml}}\n"
        f"agents:\n  - name: command\n    options: {{argv: {json.dumps(argv)}}}\n"
    )
    monkeypatch.setenv(KEY_ENV, KEY)
    if flow == "nightly":
        nightly(config_path=str(config), run_id=run_id)
    else:
        resolved, path = resolve_config(str(config))
        preflight(resolved, PROJECT_ROOT, str(path))
        agent = next(a for a in resolved.all_agents if a.name == "command")
        paired_flow(resolved, agent_run_id(run_id, agent), str(PROJECT_ROOT), str(resolved.artifact_root), agent)
    return read_records(open_store(tmp_path / "artifacts"), f"{run_id}-command")
