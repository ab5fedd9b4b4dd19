"""The `jail` command of a judged-apart shell test (`harness/bin/jail`), end to end through the
judge's real call handling and relay (`harness/judge.py`'s `Calls` and `Relay`) to the jail's real
shim (`harness/shim.py`, over a socketpair, with the workspace as its cwd).

A shell test starts one `jail` per call, so a call must not start an interpreter (a `python3`
per call, with `json` and `socket`, cost 25 ms of CPU; the whole check of a shell task, issue #29's
"at most 10% more", 160 ms before the judge apart): it is a shell script, answered by the judge
exactly as `jail.run` answers."""

from __future__ import annotations

import importlib.util
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tasks_lib.corpus.post_turn import HARNESS_DIR, jail_argv

JAIL = HARNESS_DIR / "bin" / "jail"


def _judge_module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("memtrial_test_judge", HARNESS_DIR / "judge.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    path = list(sys.path)
    try:
        spec.loader.exec_module(module)  # it puts the harness folder first on sys.path to import its driver
    finally:
        sys.path[:] = path
        sys.modules.pop("driver", None)
    return module


@pytest.fixture
def judge(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Path, Path, Path]]:
    """(calls folder, workspace, scratch): the judge's call handling and relay to a real shim over `workspace`."""
    workspace, scratch, calls = tmp_path / "ws", tmp_path / "scratch", tmp_path / "calls"
    workspace.mkdir()
    calls.mkdir(mode=0o700)
    (scratch / "case-0").mkdir(parents=True)
    (workspace / "answer.sh").write_text('printf "out:%s|" "$@"; printf "in:"; cat; echo "err:$(pwd)" >&2; exit "${CODE:-3}"\n')
    monkeypatch.setenv("JAIL_SCRATCH", str(scratch))
    monkeypatch.setenv("JAIL_WORKSPACE", str(workspace))
    jail_end, judge_end = socket.socketpair()
    shim = subprocess.Popen(list(jail_argv("python", str(HARNESS_DIR))), cwd=workspace, stdin=jail_end, stdout=jail_end,
                            stderr=subprocess.DEVNULL)
    jail_end.close()
    module = _judge_module()
    module.Calls(module.Relay(judge_end.detach()), str(calls)).listen()
    try:
        yield calls, workspace, scratch
    finally:
        shim.kill()
        shim.wait()


def _jail(args: list[str], calls: Path, cwd: Path, stdin: bytes | None = b"", path: str | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": path or os.environ["PATH"], "LANG": "C.UTF-8", "JAIL_CALLS": str(calls)}
    return subprocess.run([str(JAIL), *args], cwd=cwd, env=env, input=stdin, stdin=subprocess.DEVNULL if stdin is None else None,
                          capture_output=True, timeout=60, check=False)


def test_a_jail_call_answers_as_jail_run_does(judge: tuple[Path, Path, Path]) -> None:
    """Status, stdout, stderr, stdin and arguments (spaces, quotes, newlines, non-ASCII) go through
    unchanged; the command runs in the test's folder when it lies in the shared scratch, else in the
    workspace; nothing of a call is left in the judge's folder but the FIFO the calls share."""
    calls, workspace, scratch = judge
    args = ["sh", f"{workspace}/answer.sh", "a b", 'q"uote\\', "é", "two\nlines", ""]
    done = _jail(args, calls, scratch / "case-0", stdin="line one\nzwei ü\n".encode())
    assert done.returncode == 3, done.stderr
    assert done.stdout.decode() == 'out:a b|out:q"uote\\|out:é|out:two\nlines|out:|in:line one\nzwei ü\n'
    assert done.stderr.decode() == f"err:{scratch / 'case-0'}\n"
    elsewhere = _jail(["sh", f"{workspace}/answer.sh"], calls, workspace.parent, stdin=None)
    assert (elsewhere.returncode, elsewhere.stdout, elsewhere.stderr.decode()) == (3, b"out:|in:", f"err:{workspace}\n"), \
        "outside the shared scratch the command runs in the workspace; /dev/null as stdin sends nothing"
    piped = subprocess.run(f"{JAIL} printf 'a\\nb\\n' | {JAIL} sort -r", shell=True, cwd=workspace, capture_output=True, timeout=60,
                           env={"PATH": os.environ["PATH"], "JAIL_CALLS": str(calls)}, check=False)
    assert (piped.returncode, piped.stdout) == (0, b"b\na\n"), "two calls in one pipeline"
    assert sorted(p.name for p in calls.iterdir() if not p.name.endswith((".out", ".err"))) == ["requests"]


def test_a_jail_that_cannot_answer_fails_the_call_in_one_line(judge: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """No judge, an unknown command, no command: a non-zero status and one line, never a traceback."""
    calls, workspace, _ = judge
    gone = _jail(["true"], tmp_path / "no-such-folder", workspace)
    assert gone.returncode == 1 and gone.stderr.decode().startswith("jail: JailBroken: ") and gone.stderr.count(b"\n") == 1, gone.stderr
    missing = _jail(["no-such-command-here"], calls, workspace)
    assert missing.returncode == 127 and b"Traceback" not in missing.stderr, missing.stderr
    usage = _jail([], calls, workspace)
    assert usage.returncode == 2 and usage.stderr == b"usage: jail COMMAND [ARG...]\n"


def test_a_jail_call_starts_no_interpreter(judge: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """With nothing on PATH but `mkfifo` and `cat`, a call still runs: no `python3` starts per call."""
    calls, workspace, _ = judge
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("mkfifo", "cat"):
        found = shutil.which(tool)
        assert found is not None, f"{tool} is not on PATH: proves nothing"
        (tools / tool).symlink_to(found)
    done = _jail(["sh", "-c", "echo ran"], calls, workspace, path=str(tools))
    assert (done.returncode, done.stdout) == (0, b"ran\n"), done.stderr
