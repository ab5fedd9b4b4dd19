"""Hostile class: a third party's provisioner reading the runner's whole environment.

A provisioner is a memory system's own code, yet it ran with every variable of the runner's
environment: cloud credentials for the artifact bucket, the agents' API keys, memtrial's own
settings. Now it gets only BASE_ENV (where programs, packages and temp files are), its config's
`env`, and the runner variables its config names in `pass_env` (which the run config records).
Driven through the real paired matrix with the reference provisioner, wrapped so that each verb
first writes the environment it was given to a file; the arms must still pass as before.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.provisioner.client import BASE_ENV, ProvisionerSpec
from tasks_lib.memory.provisioner.verbs import SERVE_ENV, STATE_ENV
from tasks_lib.run.provenance import load_provenance

REPO = Path(__file__).resolve().parents[1]
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
TASK = "logship-partial-exit"
WRAPPER = ("import json, os, sys\n"
           "with open(os.environ['ENV_DUMP'], 'a') as out:\n"
           "    out.write(json.dumps(dict(os.environ)) + '\\n')\n"
           "from tasks_lib.memory.provisioner.reference import main\n"
           "sys.exit(main(sys.argv[1:]))\n")
"""The reference provisioner, after writing the environment it was started with to $ENV_DUMP."""
SECRETS = {"AWS_SECRET_ACCESS_KEY": "runner-bucket-secret-0001", "ANTHROPIC_API_KEY": "sk-runner-agent-key-0001"}
DECLARED = {"MEMORY_VENDOR_TOKEN": "declared-token-0001"}


def test_a_provisioner_gets_only_the_base_its_config_and_the_variables_it_declares(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a provisioner ran with `{**os.environ, **env}`, so any memory system's code could read
    the runner's bucket credentials and API keys. Its environment must hold only BASE_ENV, its `env` and
    its declared `pass_env`, and the arm must still work (memory delivered, the calibration pass)."""
    for name, value in {**SECRETS, **DECLARED}.items():
        monkeypatch.setenv(name, value)
    (tmp_path / "dump").mkdir()
    dump = tmp_path / "dump" / "env.jsonl"
    own = {STATE_ENV: str(tmp_path / "state"), SERVE_ENV: "ro", "ENV_DUMP": str(dump)}
    spec = ProvisionerSpec(argv=(sys.executable, "-c", WRAPPER), env=own, pass_env=tuple(DECLARED), timeout_seconds=120,
                           write_paths=(str(tmp_path / "dump"),))  # the dump lies outside its state: granted
    plan = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), [TASK]), ["on"], 1)
    (record,) = run_matrix(plan, run_id="prov-env", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                           agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), provisioner=spec)
    assert (record.outcome, record.injection) == ("pass", "yes"), "the scrubbed provisioner no longer works: proves nothing"
    provenance = load_provenance(LocalStore(tmp_path / "artifacts"), "prov-env")
    assert provenance is not None and provenance.provisioner_grants == f"confined, network none, write {tmp_path / 'dump'}", \
        "the run does not record what its provisioner was granted"
    seen = [json.loads(line) for line in dump.read_text().splitlines()]
    assert len(seen) >= 2, f"only {len(seen)} verb(s) ran"
    allowed = {*BASE_ENV, *DECLARED, *own}
    for env in seen:
        assert not set(SECRETS) & set(env), f"the provisioner saw the runner's {sorted(set(SECRETS) & set(env))}"
        assert set(env) <= allowed | {"PWD", "LC_CTYPE", "_"}, f"undeclared variables reached it: {sorted(set(env) - allowed)}"
        assert {k: env.get(k) for k in DECLARED} == DECLARED and {k: env.get(k) for k in own} == own
