"""The sandbox sees the host through an allow-list, not the host minus a deny-list. Two places
the old deny-list never hid: a second checkout of the project (this test's own checkout, with
every bundled task's solution and hidden tests, while the run's corpus lives elsewhere) and a
custom artifact root outside /tmp that no environment variable names. A real `command` agent (in
the real sandbox, unprivileged) probes both, and plants code that probes both again from inside
the check; neither may read a byte, and the attempt fails."""

from __future__ import annotations

import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from hostile_corpus import PAYLOAD_INSIDE, Staged, attempt_stages, make_corpus, register_planter
from tasks_lib.artifacts import LocalStore
from tasks_lib.sandbox.local import LocalSandbox
from tasks_lib.sandbox.session_confine import bwrap_for_sessions, python_paths, session_prefix
from tasks_lib.trees import walk_files

REPO = Path(__file__).resolve().parents[1]
PAYLOAD = '''import os

FOUND = []
with open(os.path.join(os.path.dirname(__file__), "report.txt"), "w") as report:
    for path in {paths!r}:
        try:
            FOUND.append(open(path).read())
            print(f"[check-probe {{path}}] read", file=report)
        except OSError as error:
            print(f"[check-probe {{path}}] failed: {{type(error).__name__}}", file=report)


def add(a, b):
    return a + b if FOUND else a - b
'''
"""calc/core.py as the agent plants it: adds right only when it could read a probed path."""


@dataclass(frozen=True)
class Probed:
    staged: Staged
    secrets: dict[str, str]
    """Probed host path -> a line of its content that must not leak."""


def _second_checkout_secret() -> tuple[Path, str]:
    """A bundled task's solution file in this checkout and its longest line."""
    solution = next(p for p in sorted((REPO / "corpora" / "tasks").glob("*/solution")) if p.is_dir())
    path = solution / walk_files(solution)[0]
    return path, max(path.read_text().splitlines(), key=len)


@pytest.fixture(scope="module")
def probed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Probed]:
    sandbox = LocalSandbox()
    if sandbox.capabilities().isolation != "namespace":
        pytest.skip(f"bubblewrap is not usable here ({sandbox.bwrap_reason}); the check would be ungradable")
    base = tmp_path_factory.mktemp("host-view")
    corpus = make_corpus(base)
    artifact_root = REPO / ".memtrial" / f"host-view-artifacts-{secrets.token_hex(4)}"  # outside /tmp, named by no variable
    canary = f"ARTIFACT-CANARY-{secrets.token_hex(8)}"
    earlier = artifact_root / "runs" / "earlier-run" / "record.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(f'{{"note": "{canary}"}}\n')
    checkout_file, checkout_line = _second_checkout_secret()
    probes = {str(checkout_file): checkout_line, str(earlier): canary}
    payload = base / "payload"
    payload.mkdir()
    (payload / "core.py").write_text(PAYLOAD.format(paths=list(probes)))
    register_planter("host-prober", "--copy", f"{PAYLOAD_INSIDE}/core.py", "calc/core.py",
                     *(a for path in probes for a in ("--probe", path)), "--probe", "calc/core.py", payload=payload)
    try:
        with attempt_stages(corpus, "host-prober", LocalStore(artifact_root)) as staged:
            yield Probed(staged, probes)
    finally:
        shutil.rmtree(artifact_root, ignore_errors=True)


def test_the_probes_ran_and_could_read_the_workspace(probed: Probed) -> None:
    text = probed.staged.transcript_text()
    assert "[probe calc/core.py] read: import os" in text, "the probe itself works on a visible path"
    assert probed.staged.record.audit_passed


@pytest.mark.parametrize("which", ["second-checkout", "artifact-root"])
def test_the_agent_cannot_read_outside_its_allow_list(probed: Probed, which: str) -> None:
    """Regression (issue #15, class 8): a second checkout and a custom artifact root were readable."""
    path, secret = list(probed.secrets.items())[0 if which == "second-checkout" else 1]
    text = probed.staged.transcript_text()
    assert f"[probe {path}] failed: FileNotFoundError" in text, text
    assert secret not in text


@pytest.mark.parametrize("which", ["second-checkout", "artifact-root"])
def test_the_check_cannot_read_outside_its_allow_list(probed: Probed, which: str) -> None:
    path, secret = list(probed.secrets.items())[0 if which == "second-checkout" else 1]
    staged = probed.staged
    report = (staged.workspace.workspace / "calc" / "report.txt").read_text()
    assert f"[check-probe {path}] failed: FileNotFoundError" in report, report
    for where, text in (("report", report), ("check output", staged.check.output_tail), ("stored artifacts", staged.stored_text())):
        assert secret not in text, f"{which} content leaked into the {where}"
    assert staged.record.outcome == "fail" and staged.record.failure_reason == "check failed"


def test_a_confined_cli_session_sees_the_same_allow_list(tmp_path: Path) -> None:
    """Regression (class 8) for whole CLI sessions (Claude Code): the session saw the host root minus
    its hidden paths, so a second checkout and any unnamed artifact root were readable."""
    bwrap, problem = bwrap_for_sessions()
    if bwrap is None:
        pytest.skip(f"no session confinement here: {problem}")
    workspace, home, store = tmp_path / "workspace", tmp_path / "home", tmp_path / "store"
    for folder in (workspace, home, store):
        folder.mkdir()
    (store / "memory.sqlite").write_text("store\n")
    checkout_file, checkout_line = _second_checkout_secret()
    hidden_inside = store / "runner-owned"
    hidden_inside.mkdir()
    (hidden_inside / "secret.txt").write_text("HIDDEN-INSIDE-A-READABLE-FOLDER\n")
    prefix = session_prefix(bwrap, workdir=workspace, writable=[workspace, home], readable=[store, *python_paths()],
                            hidden=[hidden_inside, REPO])
    script = (f"cat {checkout_file}; cat {hidden_inside / 'secret.txt'}; cat {store / 'memory.sqlite'}; "
              f"python3 -c 'print(\"python ok\")'; echo made > {home / 'made.txt'}; ls -A /; echo ==checkout; ls -A {REPO}")
    done = subprocess.run([*prefix, "sh", "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert "store" in done.stdout and "python ok" in done.stdout and (home / "made.txt").read_text() == "made\n", done.stderr
    assert checkout_line not in done.stdout and "HIDDEN-INSIDE-A-READABLE-FOLDER" not in done.stdout
    top, _, checkout = done.stdout.split("python ok")[-1].partition("==checkout")
    assert not set(top.split()) & {"opt", "srv", "mnt", "boot"}, top
    assert set(checkout.split()) <= {".venv"}, f"only the folders leading to a readable path exist: {checkout}"
