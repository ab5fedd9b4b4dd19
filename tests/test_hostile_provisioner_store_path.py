"""Attack F5 on #29 item 6: a confined provisioner must not make the root runner open or rewrite a host file
outside its sandbox by naming it as its replica file (or socket).

Before the fix, `restore`'s response could export MEMORY_DB (or MEMORY_SOCKET) naming any path:
`steps.provisioned_store` took it as given, and under `ablate:<lane>` the runner (root, unconfined) ran
`strip_lanes` on it in place (DELETE + VACUUM), and under every arm opened it and served it to the agent.
Here the provisioner cannot read the victim (a root-only 0600 store outside every grant), yet the
`ablate:keyword` attempt changed it. Now the run refuses the export in one line naming the variable
(`provisioned.check_exports`), and even a provisioner's own replica is copied before it is stripped.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.arm.provisioned import ProvisionerExportError
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
import contextlib, glob, hashlib, io, json, os, sys
from tasks_lib.memory.env import STORE_ENV
from tasks_lib.memory.provisioner import reference
victim = os.environ.get("VICTIM")
state = os.environ["MEMTRIAL_PROVISIONER_STATE"]
try:
    open(victim or "/nonexistent", "rb").close()
    seen = "read"
except OSError as error:
    seen = f"denied: {type(error).__name__}"
with open(os.path.join(state, "victim-" + sys.argv[1] + ".txt"), "w") as out:
    out.write(seen)
def replica_digest(verb):  # the provisioner's own replica file as `verb` sees it
    for replica in glob.glob(os.path.join(state, "projects", "*", "memory.sqlite")):
        with open(os.path.join(state, "replica-at-" + verb + ".txt"), "w") as out:
            out.write(hashlib.sha256(open(replica, "rb").read()).hexdigest())
if sys.argv[1] == "destroy":
    replica_digest("destroy")
if sys.argv[1] == "restore" and victim:
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
code = reference.main(sys.argv[1:])
if sys.argv[1] == "restore":
    replica_digest("restore")
sys.exit(code)
"""


ROOT_RUNNER = pytest.mark.skipif(
    bwrap_problem(shutil.which("bwrap")) is not None or shutil.which("nsenter") is None or os.geteuid() != 0,
    reason="a provisioner's sandbox needs bubblewrap, util-linux nsenter and a root runner (own uid)")


@ROOT_RUNNER
def test_a_provisioner_cannot_make_the_runner_rewrite_a_file_outside_its_grants(tmp_path: Path) -> None:
    """A restore that exports MEMORY_DB = a root-only store outside every grant: the run refuses it in one line
    naming the variable, and the victim is unchanged (before: `ablate:keyword` stripped it in place)."""
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
    with pytest.raises(ProvisionerExportError, match=re.escape(f"MEMORY_DB={victim}, which lies outside the provisioner's serving folder")):
        run_matrix(plan, run_id="prov-victim", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                   agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), provisioner=spec)
    seen = {p.name: p.read_text() for p in sorted(state.glob("victim-*.txt"))}
    assert seen and all(v.startswith("denied") for v in seen.values()), f"the victim is inside the sandbox: proves nothing {seen}"
    assert hashlib.sha256(victim.read_bytes()).hexdigest() == before, "the runner rewrote a file outside the provisioner's grants"
    assert "victim-destroy.txt" in seen, "the refused project was not destroyed"


@ROOT_RUNNER
def test_an_ablated_attempt_strips_a_copy_never_the_provisioners_own_replica(tmp_path: Path) -> None:
    """An honest provisioner exporting its replica file from its state folder, under `ablate:keyword`: the attempt
    runs and the replica the provisioner destroys is byte for byte the one it restored (before: the runner ran
    `strip_lanes` on the provisioner's file in place)."""
    state = tmp_path / "state"
    spec = ProvisionerSpec(argv=(sys.executable, "-c", WRAPPER), env={STATE_ENV: str(state), SERVE_ENV: "0"}, timeout_seconds=120)
    plan = schedule(select_tasks(load_tasks(REPO / "corpora" / "tasks"), [TASK]), ["ablate:keyword"], 1)
    (record,) = run_matrix(plan, run_id="prov-own", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                           agent_name="calibration", store=LocalStore(tmp_path / "artifacts"), provisioner=spec)
    assert record.outcome != "ungradable", record.failure_reason
    assert not list(state.glob("projects/*")), "destroy did not run"
    at_restore, at_destroy = ((state / f"replica-at-{verb}.txt").read_text() for verb in ("restore", "destroy"))
    assert at_destroy == at_restore, "the runner edited the provisioner's own replica"


REFUSED = [
    ("MEMORY_DB", "symlink", "is not an absolute path free of symlinks"),
    ("MEMORY_DB", "root-owned", "is owned by uid 0, not the provisioner's uid"),
    ("MEMORY_SOCKET", "own-file", "is not a socket"),
    ("MEMORY_DB", "missing", "cannot be read"),
]
"""Exports inside the state folder that are still not the provisioner's own: (variable, what is planted, why refused)."""


@ROOT_RUNNER
def test_an_export_inside_the_grants_that_is_not_the_provisioners_own_is_refused(tmp_path: Path) -> None:
    """Paths inside the state folder that would still hand the runner a file not the provisioner's: a symlink to a
    root-only file, a root-owned file, a regular file named as the socket, a missing file (before: each was opened);
    the provisioner's own regular file there passes."""
    from tasks_lib.arm.provisioned import check_exports
    from tasks_lib.memory.provisioner.client import make_provisioner

    provisioner = make_provisioner((sys.executable,), tmp_path / "fixture", confined=True, state=tmp_path / "state")
    assert provisioner.jail is not None
    provisioner.jail.start()
    try:
        identity = provisioner.jail.identity
        assert identity is not None
        victim = tmp_path / "victim.sqlite"
        victim.write_bytes(b"root only")
        for name, plant, problem in REFUSED:
            path = tmp_path / "state" / f"{plant}.sqlite"
            if plant == "symlink":
                path.symlink_to(victim)
            elif plant != "missing":
                path.write_bytes(b"x")
                if plant == "own-file":
                    os.chown(path, identity.uid, identity.gid)
            with pytest.raises(ProvisionerExportError, match=re.escape(f"{name}={path}, which {problem}")):
                check_exports(provisioner, {name: str(path)})
        check_exports(provisioner, {"MEMORY_DB": str(tmp_path / "state" / "own-file.sqlite")})
    finally:
        provisioner.close()


def test_a_replica_swapped_after_the_check_for_a_file_not_the_provisioners_is_not_copied(tmp_path: Path) -> None:
    """`replica_copy` checks the file it opened, not the path checked earlier: a file of another owner (what a
    folder swapped for a symlink after `check_exports` would hand over) or a symlink is refused and nothing is
    copied (before: the runner copied, stripped and served whatever the path named)."""
    from tasks_lib.arm.provisioned import replica_copy

    store, dest = tmp_path / "store.sqlite", tmp_path / "copy.sqlite"
    store.write_bytes(b"not the provisioner's")
    with pytest.raises(ProvisionerExportError, match=re.escape(f"MEMORY_DB={store}: is not a regular file of the provisioner's own")):
        replica_copy(str(store), dest, owner=os.getuid() + 1)
    link = tmp_path / "link.sqlite"
    link.symlink_to(store)
    with pytest.raises(ProvisionerExportError, match="cannot be read"):
        replica_copy(str(link), dest, owner=os.getuid())
    assert not dest.exists()
    assert replica_copy(str(store), dest, owner=os.getuid()).read_bytes() == store.read_bytes()
