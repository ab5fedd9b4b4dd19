"""Preflight knows the sandbox: a machine whose sandbox cannot run the post-turn check is refused in one
line naming the fix, before Prefect starts and before any arm, by `memtrial run`, `paired` and `rerun`.

Bubblewrap is hidden the way a fresh machine lacks it: the CLI runs in a private mount namespace
(`unshare --mount`) where /dev/null is bind-mounted over the bwrap binary, so nothing on PATH can run
it. That needs root; elsewhere the tests skip and say so (a machine without bwrap runs them as is).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tasks_lib.arm.sandboxed_check import UNSANDBOXED_OPT_OUT
from tasks_lib.contracts import dump_document
from tasks_lib.run.config import RUN_CONFIG_JSON, RunConfig

REPO = Path(__file__).resolve().parents[1]
CLI = [sys.executable, "-c", "from flows.cli.main import entry; entry()"]
TASKS = ["rotlog-keep-count", "tabmill-delimiter"]
REFUSED_WITHIN_SECONDS = 30
"""A refusal is the CLI's start-up and a probe; the two-task run it replaces takes longer, and a
fresh machine's `make demo` minutes (every attempt ungradable)."""


def without_bwrap(argv: list[str], env: dict[str, str], stdin: str | None = None, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    """Run `argv` where no bwrap binary can run: as is when this machine has none, else in a mount
    namespace with /dev/null over every bwrap on PATH (root only; skips otherwise)."""
    found = sorted({os.path.realpath(p) for d in os.environ.get("PATH", "").split(os.pathsep) if d
                    for p in [os.path.join(d, "bwrap")] if os.path.isfile(p) and os.access(p, os.X_OK)})
    if found:
        if os.geteuid() != 0 or shutil.which("unshare") is None:
            pytest.skip("hiding bubblewrap needs root and util-linux unshare (a private mount namespace)")
        mask = 'while [ "$1" != -- ]; do mount --bind /dev/null "$1" || exit 97; shift; done; shift; exec "$@"'
        argv = ["unshare", "--mount", "--propagation", "private", "sh", "-c", mask, "mask", *found, "--", *argv]
    return subprocess.run(argv, env=env, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=120, check=False)


def cli_env(tmp_path: Path) -> dict[str, str]:
    """The CLI's environment: its own Prefect and memtrial homes in `tmp_path`, no API, no opt-out."""
    env = {k: v for k, v in os.environ.items() if k not in {"PREFECT_API_URL", UNSANDBOXED_OPT_OUT, "MEMTRIAL_ARTIFACT_ROOT"}}
    return {**env, "PREFECT_HOME": str(tmp_path / "prefect"), "MEMTRIAL_HOME": str(tmp_path / "home"),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "PYTHONPATH": str(REPO)}


def two_task_config(tmp_path: Path) -> Path:
    """A two-task run config (off, on, ablate:all) whose artifacts go to `tmp_path/artifacts`."""
    path = tmp_path / "two.yaml"
    path.write_text(f"name: two\ntasks: [{', '.join(TASKS)}]\nconditions: ['off', 'on', 'ablate:all']\nsuites: []\n"
                    f"artifact_root: {tmp_path / 'artifacts'}\n")
    return path


def command(name: str, tmp_path: Path) -> list[str]:
    """The CLI arguments of `name` over the two tasks (for `rerun`, a stored run's local config copy)."""
    if name == "run":
        return ["run", "--config", str(two_task_config(tmp_path)), "--plain"]
    if name == "paired":
        return ["paired", "--tasks", ",".join(TASKS), "--conditions", "off,on,ablate:all", "--artifacts", str(tmp_path / "artifacts"), "--plain"]
    copy = tmp_path / "home" / "runs" / "run-20260101-000000-abcdef" / RUN_CONFIG_JSON
    copy.parent.mkdir(parents=True)
    copy.write_bytes(dump_document(RunConfig(name="two", tasks=TASKS, artifact_root=str(tmp_path / "artifacts"))))
    return ["rerun", "run-20260101-000000-abcdef", "--plain"]


@pytest.mark.parametrize("name", ["run", "paired", "rerun"])
def test_a_machine_without_bubblewrap_is_refused_before_any_arm(tmp_path: Path, name: str) -> None:
    """Regression: without bubblewrap, `make demo` ran all 132 attempts, graded each `ungradable` and
    exited 1 after 46 warnings, none naming the missing sandbox or the fix. Now `run`, `paired` and
    `rerun` exit 2 in seconds with one line naming `apt-get install bubblewrap`, `sandbox: docker` and
    the opt-out; Prefect never starts and nothing is recorded."""
    argv = command(name, tmp_path)
    started = time.monotonic()
    done = without_bwrap([*CLI, *argv], cli_env(tmp_path))
    elapsed = time.monotonic() - started
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr and not done.stdout.strip(), done.stderr
    line = done.stderr
    assert "field 'sandbox'" in line and "bwrap not found on PATH" in line, line
    assert "apt-get install bubblewrap" in line and "sandbox: docker" in line and f"{UNSANDBOXED_OPT_OUT}=1" in line, line
    assert elapsed < REFUSED_WITHIN_SECONDS, f"refused after {elapsed:.1f} s"
    assert not (tmp_path / "artifacts").exists(), "no attempt recorded, no run folder"
    assert not (tmp_path / "prefect").exists(), "Prefect never started"
    assert sorted(p.name for p in (tmp_path / "home").glob("runs/*")) == (["run-20260101-000000-abcdef"] if name == "rerun" else [])


def test_a_docker_engine_that_does_not_answer_is_refused_before_any_arm(tmp_path: Path) -> None:
    """Regression: with `sandbox: docker` and no engine answering, every attempt ran its agent and then
    came out `ungradable`. Now the run exits 2 in one line naming the engine that did not answer and the
    agent's options it was built from; nothing is recorded."""
    socket = tmp_path / "no-engine.sock"
    config = tmp_path / "docker.yaml"
    config.write_text(f"name: dock\ntasks: [{TASKS[0]}]\nconditions: ['off', 'on']\nsuites: []\nsandbox: docker\n"
                      f"artifact_root: {tmp_path / 'artifacts'}\nagents: [{{name: calibration, options: "
                      f"{{sandbox_options: {{base_url: 'unix://{socket}', image: memtrial-sandbox}}}}}}]\n")
    started = time.monotonic()
    done = subprocess.run([*CLI, "run", "--config", str(config), "--plain"], env=cli_env(tmp_path), cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    elapsed = time.monotonic() - started
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert f"field 'agents[0].options.sandbox_options': sandbox 'docker' is unavailable: docker engine at unix://{socket} does not answer" \
        in done.stderr, done.stderr
    assert "sandbox: local" in done.stderr and f"{UNSANDBOXED_OPT_OUT}=1" in done.stderr, done.stderr
    assert elapsed < REFUSED_WITHIN_SECONDS, f"refused after {elapsed:.1f} s"
    assert not (tmp_path / "artifacts").exists() and not (tmp_path / "prefect").exists()


def test_the_named_opt_out_passes_preflight_without_bubblewrap(tmp_path: Path) -> None:
    """The refusal must not remove the documented way out: with MEMTRIAL_ALLOW_UNSANDBOXED_CHECK=1 the
    checks run unsandboxed (each record says so), so preflight lets the run through."""
    script = ("import sys; from pathlib import Path; from tasks_lib.run.preflight import preflight; "
              "from tasks_lib.run.config import load_run_config; "
              "preflight(load_run_config(Path(sys.argv[1])), Path(sys.argv[2]), sys.argv[1]); print('passed')")
    env = cli_env(tmp_path)
    refused = without_bwrap([sys.executable, "-c", script, str(two_task_config(tmp_path)), str(REPO)], env)
    assert refused.returncode != 0 and "bwrap not found on PATH" in refused.stderr, refused.stderr
    allowed = without_bwrap([sys.executable, "-c", script, str(two_task_config(tmp_path)), str(REPO)], {**env, UNSANDBOXED_OPT_OUT: "1"})
    assert (allowed.returncode, allowed.stdout.strip()) == (0, "passed"), allowed.stderr


def test_make_demo_without_bubblewrap_or_root_stops_before_the_run_with_the_fix(tmp_path: Path) -> None:
    """Regression: `make demo` on a machine without bubblewrap built the venv and ran every attempt into
    `ungradable`. Its set-up step (scripts/install_demo_deps.sh) installs bubblewrap as root with apt-get;
    a user who cannot gets one line naming the fix and exit 2 before the run, unless they opt out."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None:
        pytest.skip("running the set-up step as a user without root needs root and util-linux setpriv to drop to uid 65534")
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "bash", "-s"]
    script = (REPO / "scripts" / "install_demo_deps.sh").read_text()  # on stdin: uid 65534 may not read the checkout
    env = cli_env(tmp_path)
    refused = without_bwrap(nobody, env, stdin=script, cwd=Path("/"))
    assert refused.returncode == 2 and not refused.stdout, (refused.stdout, refused.stderr)
    assert refused.stderr.count("\n") == 1 and "bubblewrap missing" in refused.stderr, refused.stderr
    assert "apt-get install bubblewrap" in refused.stderr and f"{UNSANDBOXED_OPT_OUT}=1" in refused.stderr, refused.stderr
    allowed = without_bwrap(nobody, {**env, UNSANDBOXED_OPT_OUT: "1"}, stdin=script, cwd=Path("/"))
    assert allowed.returncode == 0 and "every check runs unsandboxed" in allowed.stdout, (allowed.stdout, allowed.stderr)


def test_judged_apart_tasks_without_bubblewrap_are_refused_whatever_the_sandbox_and_opt_out(tmp_path: Path) -> None:
    """Regression: a judged-apart task's judge and jail are two bubblewrap namespaces of this machine
    whatever the configured sandbox, so a `--sandbox docker` run on a machine without bubblewrap
    graded every such attempt `ungradable`, and preflight (which probes the configured sandbox only)
    let it start; the unsandboxed-check opt-out must not open that door either. Now the run is refused
    before Prefect starts, naming the judged-apart tasks and the fix."""
    env = {**cli_env(tmp_path), UNSANDBOXED_OPT_OUT: "1", "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"}
    argv = ["paired", "--sandbox", "docker", "--tasks", ",".join(TASKS), "--conditions", "off,on",
            "--artifacts", str(tmp_path / "artifacts"), "--plain"]
    done = without_bwrap([*CLI, *argv], env)
    assert done.returncode == 2 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert "2 task(s) are judged apart (rotlog-keep-count, tabmill-delimiter)" in done.stderr, done.stderr
    assert "needs bubblewrap on this machine whatever the sandbox" in done.stderr, done.stderr
    assert not (tmp_path / "artifacts").exists() and not (tmp_path / "prefect").exists()
