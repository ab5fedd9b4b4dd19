"""The `jail` command of a judged-apart shell test (`harness/bin/jail`), end to end over the judge's
real relay (`harness/judge.py`'s `Relay` on a Unix socket) and the jail's real shim
(`harness/shim.py`, over a socketpair, with the workspace as its cwd).

A shell test starts one `jail` per call, so the command must stay a bare interpreter start: it may
import neither `json` nor `socket` (with `re`, `enum` and `typing` behind them, they doubled a
call's cost, issue #29's "at most 10% more"), while answering exactly as `jail.run` does."""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from tasks_lib.corpus.post_turn import HARNESS_DIR, jail_argv

JAIL = HARNESS_DIR / "bin" / "jail"
HEAVY_MODULES = ("json", "socket", "re", "enum", "typing")
"""What a `jail` call must not import (each is a stdlib module; the client needs only `_socket` and `_json`)."""


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
def relay(tmp_path: Path) -> Iterator[tuple[Path, Path, Path]]:
    """(socket path, workspace, scratch): the judge's relay to a real shim over `workspace`."""
    workspace, scratch = tmp_path / "ws", tmp_path / "scratch"
    workspace.mkdir()
    (scratch / "case-0").mkdir(parents=True)
    (workspace / "answer.sh").write_text('printf "out:%s|" "$@"; printf "in:"; cat; echo "err:$(pwd)" >&2; exit "${CODE:-3}"\n')
    jail_end, judge_end = socket.socketpair()
    shim = subprocess.Popen(list(jail_argv("python", str(HARNESS_DIR))), cwd=workspace, stdin=jail_end, stdout=jail_end,
                            stderr=subprocess.DEVNULL)
    jail_end.close()
    path = tmp_path / "jail.sock"
    _judge_module().Relay(judge_end.detach()).listen(str(path))
    try:
        yield path, workspace, scratch
    finally:
        shim.kill()
        shim.wait()


def _jail(args: list[str], sock: Path, workspace: Path, scratch: Path, cwd: Path, stdin: bytes = b"",
          interpreter: tuple[str, ...] = ()) -> subprocess.CompletedProcess[bytes]:
    env = {"PATH": os.environ["PATH"], "LANG": "C.UTF-8", "JAIL_SOCKET": str(sock), "JAIL_WORKSPACE": str(workspace),
           "JAIL_SCRATCH": str(scratch)}
    argv = [*interpreter, str(JAIL), *args] if interpreter else [str(JAIL), *args]
    return subprocess.run(argv, cwd=cwd, env=env, input=stdin, capture_output=True, timeout=60, check=False)


def test_a_jail_call_answers_as_jail_run_does(relay: tuple[Path, Path, Path]) -> None:
    """Status, stdout, stderr, stdin and arguments (spaces, quotes, non-ASCII) go through unchanged;
    the command runs in the test's folder when it lies in the shared scratch, else in the workspace."""
    sock, workspace, scratch = relay
    args = ["sh", f"{workspace}/answer.sh", "a b", 'q"uote\\', "é"]
    done = _jail(args, sock, workspace, scratch, scratch / "case-0", stdin="line one\nzwei ü\n".encode())
    assert done.returncode == 3, done.stderr
    assert done.stdout.decode() == 'out:a b|out:q"uote\\|out:é|in:line one\nzwei ü\n'
    assert done.stderr.decode() == f"err:{scratch / 'case-0'}\n"
    elsewhere = _jail(["sh", f"{workspace}/answer.sh"], sock, workspace, scratch, workspace.parent)
    assert elsewhere.stderr.decode() == f"err:{workspace}\n", "outside the shared scratch the command runs in the workspace"
    assert _jail(["true"], sock, workspace, scratch, workspace.parent).returncode == 0


def test_a_jail_that_cannot_answer_fails_the_call_in_one_line(relay: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """No socket, an unknown command, no command: a non-zero status and one line, never a traceback."""
    sock, workspace, scratch = relay
    gone = _jail(["true"], tmp_path / "no-such.sock", workspace, scratch, workspace)
    assert gone.returncode == 1 and gone.stderr.decode().startswith("jail: JailBroken: ") and gone.stderr.count(b"\n") == 1, gone.stderr
    missing = _jail(["no-such-command-here"], sock, workspace, scratch, workspace)
    assert missing.returncode == 127 and b"Traceback" not in missing.stderr, missing.stderr
    usage = _jail([], sock, workspace, scratch, workspace)
    assert usage.returncode == 2 and usage.stderr == b"usage: jail COMMAND [ARG...]\n"


def test_a_jail_call_imports_no_json_or_socket(relay: tuple[Path, Path, Path]) -> None:
    """A call is a bare interpreter start: `python -X importtime` lists what the command imported."""
    sock, workspace, scratch = relay
    done = _jail(["true"], sock, workspace, scratch, workspace, interpreter=(sys.executable, "-I", "-S", "-X", "importtime"))
    assert done.returncode == 0, done.stderr
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "_socket" in imported, f"importtime listed nothing useful: proves nothing\n{done.stderr.decode()}"
    assert not imported & set(HEAVY_MODULES), f"a jail call imported {sorted(imported & set(HEAVY_MODULES))}"
