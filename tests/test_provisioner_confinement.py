"""A provisioner's sandbox: refused in preflight where it cannot be built, opted out of only by name,
its grants checked when the config loads, and every server it starts reaped with it, also when the
runner is killed.

Bubblewrap is hidden as in `test_preflight_sandbox` (a private mount namespace with /dev/null over
it; root only, else those tests skip and say why).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.arm.sandboxed_check import UNSANDBOXED_OPT_OUT
from tasks_lib.errors import ContractError
from tasks_lib.run.config import load_run_config, provisioner_warnings
from tasks_lib.run.preflight import preflight
from tasks_lib.sandbox.local import bwrap_problem
from tests.test_preflight_sandbox import CLI, REFUSED_WITHIN_SECONDS, cli_env, without_bwrap

REPO = Path(__file__).resolve().parents[1]
TASK = "rotlog-keep-count"
SERVER_MODULE = "tasks_lib.memory.delivery.server"
CONFINABLE = bwrap_problem(shutil.which("bwrap")) is None and shutil.which("nsenter") is not None


def provisioner_config(tmp_path: Path, grants: str = "") -> Path:
    """A one-task run config whose memory system is the reference provisioner, with `grants` (YAML flow
    mapping entries) added to its provisioner."""
    path = tmp_path / "prov.yaml"
    path.write_text(f"name: prov\ntasks: [{TASK}]\nconditions: ['off', 'on']\nsuites: []\nmemory_system: provisioner\n"
                    f"provisioner: {{argv: [memtrial-reference-provisioner], env: {{MEMTRIAL_PROVISIONER_STATE: {tmp_path / 'state'}}}"
                    f"{', ' + grants if grants else ''}}}\nartifact_root: {tmp_path / 'artifacts'}\n")
    return path


def test_a_provisioner_that_cannot_be_confined_is_refused_in_one_line_before_any_arm(tmp_path: Path) -> None:
    """Regression: where bubblewrap cannot run, a third party's provisioner ran as the runner with the
    whole host in view and nothing said so. Now `memtrial run` exits 2 in one line naming the
    provisioner field and both fixes (install bubblewrap, or opt out by name); nothing is recorded.
    (The agents' checks are opted out of their sandbox here, so the provisioner's line is the one refusal.)"""
    started = time.monotonic()
    done = without_bwrap([*CLI, "run", "--config", str(provisioner_config(tmp_path)), "--plain"],
                         {**cli_env(tmp_path), UNSANDBOXED_OPT_OUT: "1"})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and not done.stdout.strip(), done.stderr
    assert "field 'provisioner'" in done.stderr and "cannot be confined here" in done.stderr, done.stderr
    assert "install bubblewrap" in done.stderr and "provisioner.unconfined: true" in done.stderr, done.stderr
    assert time.monotonic() - started < REFUSED_WITHIN_SECONDS
    assert not (tmp_path / "artifacts").exists() and not (tmp_path / "prefect").exists()


def test_an_unconfined_provisioner_passes_preflight_only_by_name_and_is_a_distrust_warning(tmp_path: Path) -> None:
    """The refusal keeps a way out, but not a silent one: `unconfined: true` passes preflight without
    bubblewrap, and the run then carries a distrust warning naming the unconfined provisioner."""
    script = ("import sys; from pathlib import Path; from tasks_lib.run.preflight import preflight; "
              "from tasks_lib.run.config import load_run_config; "
              "preflight(load_run_config(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[1]); print('passed')")
    env = {**cli_env(tmp_path), UNSANDBOXED_OPT_OUT: "1"}
    allowed = without_bwrap([sys.executable, "-c", script, str(provisioner_config(tmp_path, "unconfined: true")), str(REPO)], env)
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "passed"), allowed.stderr
    (warning,) = provisioner_warnings(load_run_config(provisioner_config(tmp_path, "unconfined: true")))
    assert "ran unconfined" in warning and "realm secret" in warning, warning
    assert provisioner_warnings(load_run_config(provisioner_config(tmp_path))) == []


def test_an_unknown_or_contradictory_grant_is_refused_when_the_config_loads(tmp_path: Path) -> None:
    """A misspelled grant (`netwrok`) would silently grant nothing, and a grant to an unconfined
    provisioner would mean nothing: both are refused at load, naming the field."""
    with pytest.raises(ContractError, match="netwrok"):
        load_run_config(provisioner_config(tmp_path, "netwrok: true"))
    with pytest.raises(ContractError, match="unconfined provisioner has no sandbox"):
        load_run_config(provisioner_config(tmp_path, "unconfined: true, network: true"))


def test_a_grant_that_would_show_the_artifact_root_home_or_corpus_is_refused_in_preflight(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression guard: `read_paths` is the way to show a provisioner more, so it must not be a way to
    show it the run secrets (artifact root), the runner's HOME or the corpus's hidden tests."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    grants = f"read_paths: [{tmp_path}, {tmp_path / 'home' / 'models'}], write_paths: [{REPO / 'corpora'}]"
    with pytest.raises(ContractError) as refused:
        preflight(load_run_config(provisioner_config(tmp_path, grants)), REPO, "prov.yaml")
    text = str(refused.value)
    assert "provisioner.read_paths[0]" in text and "the artifact root" in text, text
    assert "provisioner.read_paths[1]" in text and "the runner's HOME" in text, text
    assert "provisioner.write_paths[0]" in text and "the task corpus" in text, text


RUNNER = """
import sys, time
from pathlib import Path
from tasks_lib.arm.provisioned import restore_arm
from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.provisioner.client import ProvisionerSpec
root = Path(sys.argv[1])
spec = ProvisionerSpec(argv=(sys.executable, "-m", "tasks_lib.memory.provisioner.reference"),
                       env={"MEMTRIAL_PROVISIONER_STATE": str(root / "state"), "MEMTRIAL_PROVISIONER_SERVE": "ro"})
restore_arm(spec, "reap", [MemorySpec(text="the deploy key rotates every ninety days", lane="keyword", kind="fact")],
            "trial:reap-0001", root)
print("restored", flush=True)
time.sleep(600)
"""
"""A runner that restores one served arm and is then killed before it can destroy it."""


def servers_of(root: Path) -> list[int]:
    """PIDs of memory servers whose command line names a folder under `root`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            args = (entry / "cmdline").read_bytes()
        except (OSError, ValueError):
            continue
        if entry.name.isdigit() and SERVER_MODULE.encode() in args and os.fsencode(str(root)) in args:
            found.append(int(entry.name))
    return found


@pytest.mark.skipif(not CONFINABLE, reason="a provisioner's sandbox needs bubblewrap and util-linux nsenter")
def test_a_provisioners_server_dies_with_a_killed_runner(tmp_path: Path) -> None:
    """Regression: a memory server a provisioner's restore started was left running with parent 1 after an
    interrupted test (destroy, which stops it, never ran). Now it lives in the provisioner's sandbox,
    which ends when the runner does: killing the runner with SIGKILL leaves no server behind."""
    runner = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path)], stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        assert runner.stdout is not None and runner.stdout.readline().strip() == "restored"
        assert servers_of(tmp_path), "restore started no server: proves nothing"
        runner.send_signal(signal.SIGKILL)
        runner.wait()
        deadline = time.monotonic() + 10
        while servers_of(tmp_path) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = servers_of(tmp_path)
        assert not left, f"memory server(s) {left} outlived the killed runner"
    finally:
        runner.kill()
        for pid in servers_of(tmp_path):
            os.kill(pid, signal.SIGKILL)
