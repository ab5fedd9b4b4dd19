"""Drive the real nightly flow with a hostile `command` agent, for the tests named `test_hostile_*`.

`run_hostile` writes a run config whose only extra agent is `command` running `script` (Python, in the
agent's sandbox, workspace as cwd), a money fence over a local ledger (the command agent is paid),
and runs `flows.nightly.nightly` on a real Prefect API: the calibration agent's matrix first, then
the hostile agent's. It returns the hostile agent's records, read back from the artifact store.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from tasks_lib.run.records import read_records
from tasks_lib.artifacts import open_store
from tasks_lib.budget import Ledger, key_fingerprint, write_ledger
from tasks_lib.contracts import RunRecord

KEY = "sk-eval-hostile-0001"
KEY_ENV = "MEMTRIAL_TEST_EVAL_KEY"


def run_hostile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, tasks: Sequence[str],
                conditions: Sequence[str] = ("off", "on"), run_id: str = "hostile") -> list[RunRecord]:
    """Run `script` as the `command` agent through the nightly flow; return its records (schedule order)."""
    from flows.nightly import nightly

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
    nightly(config_path=str(config), run_id=run_id)
    return read_records(open_store(tmp_path / "artifacts"), f"{run_id}-command")
