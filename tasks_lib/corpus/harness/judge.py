"""The judge: runs the post-turn tests apart from the code they judge (standard library only).

Usage: `python3 -I -B -S judge.py NONCE FILE...`, in the judge's sandbox: the runner's judge uid (not
the attempt's), the pinned post-turn tests read-only as cwd, the harness, a scratch folder shared
with the jail, and descriptor `JAIL_FD` (from the environment): the runner-made socket whose other
end is the jail's shim. The workspace's code is on no path here.

The judge relays requests from the tests to the jail over a Unix socket private to the judge
(`JAIL_SOCKET`, in the judge's own /tmp), one request at a time; a shell test's `jail` command (a
shell script: a test may make many calls, and an interpreter start per call cost more than the
call) leaves its call in that private folder (`JAIL_CALLS`, see `Calls`) and the judge makes the
same request for it. It runs every post-turn FILE in
its turn (`test*.py`: unittest through `pyunit.main` in this process, with `jail.py` importable: the
tests are the judge's own code, and an interpreter start per file cost more than the file; `*.sh`: `sh
FILE` with the `jail` command first on PATH, cwd a fresh folder of the shared scratch, and
`JAIL_WORKSPACE` naming where the jail sees the workspace) and prints
one JSON object on stdout: the nonce, each case's outcome, each file's SHA-256 before and after,
and flags. The code under test cannot reach that stdout, this process or its argv: it runs as
another uid in another PID namespace and only ever writes JSON answers into its own socket.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from driver import _digest, _lines  # noqa: E402 (the harness folder is only on the path from here)

SCRATCH = os.environ.get("JAIL_SCRATCH", "/scratch")
"""The folder the judge shares with the jail (both see it at this path)."""
MAX_LINE = 8 << 20
"""Bytes of one request or answer relayed; a longer one ends the relay."""


class Relay:
    """Serialises the tests' requests onto the one channel to the jail."""

    def __init__(self, fd: int) -> None:
        self.channel = socket.socket(fileno=fd)
        self.answers = self.channel.makefile("rb")
        self.lock = threading.Lock()
        self.broken = False

    def ask(self, line: bytes) -> bytes:
        with self.lock:
            if self.broken:
                return b'{"error": "JailBroken", "message": "the jail channel is closed"}\n'
            try:
                self.channel.sendall(line)
                answer = self.answers.readline(MAX_LINE + 1)
            except OSError:
                answer = b""
            if not answer.endswith(b"\n"):
                self.broken = True
                return b'{"error": "JailBroken", "message": "the jail closed the channel or answered past the size limit"}\n'
            return answer

    def serve(self, client: socket.socket) -> None:
        with client, client.makefile("rb") as requests:
            while True:
                line = requests.readline(MAX_LINE + 1)
                if not line.endswith(b"\n"):
                    return
                client.sendall(self.ask(line))

    def listen(self, path: str) -> None:
        server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        server.bind(path)
        os.chmod(path, 0o600)
        server.listen(8)

        def accept() -> None:
            while True:
                client, _ = server.accept()
                threading.Thread(target=self.serve, args=(client,), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()


class Calls:
    """Runs the `jail` commands of the shell tests through the relay (`harness/bin/jail`, a shell
    script: no interpreter starts per call). Everything lives in `folder`, private to the judge's
    uid: a call `PID` leaves `PID.argv` (NUL-terminated arguments), `PID.in` (its stdin, when it
    is not a character device) and a FIFO `PID.done`, then writes its PID into the FIFO
    `requests`; the judge runs `jail.run` with them (the call's current folder read from /proc)
    and leaves `PID.out` and `PID.err` before writing the status into `PID.done`."""

    def __init__(self, relay: Relay, folder: str) -> None:
        self.relay = relay
        self.folder = folder

    def listen(self) -> None:
        path = os.path.join(self.folder, "requests")
        os.mkfifo(path, 0o600)
        requests = os.fdopen(os.open(path, os.O_RDWR), "rb", buffering=0)  # read-write: no end of file between writers

        def accept() -> None:
            for line in requests:
                if line.strip().isdigit():
                    threading.Thread(target=self.serve, args=(int(line),), daemon=True).start()
        threading.Thread(target=accept, daemon=True).start()

    def _take(self, path: str) -> bytes | None:
        """The file's bytes, removed; None when there is none."""
        try:
            with open(path, "rb") as handle:
                data = handle.read(MAX_LINE + 1)
        except OSError:
            return None
        os.unlink(path)
        return data

    def serve(self, pid: int) -> None:
        call = os.path.join(self.folder, str(pid))
        argv = [a.decode("utf-8", "surrogateescape") for a in (self._take(call + ".argv") or b"").split(b"\0")[:-1]]
        data = (self._take(call + ".in") or b"").decode("utf-8", "surrogateescape")
        try:
            here = os.readlink(f"/proc/{pid}/cwd")
        except OSError:
            here = ""
        cwd = here if here.startswith(SCRATCH + os.sep) else os.environ.get("JAIL_WORKSPACE", "/workspace")
        out = err = ""
        try:
            answer = json.loads(self.relay.ask(json.dumps({"op": "run", "argv": argv, "cwd": cwd, "stdin": data, "timeout": 60}).encode() + b"\n"))
            if not isinstance(answer, dict):
                raise ValueError("the jail's answer is not an object")
        except ValueError as error:
            answer = {"error": "JailBroken", "message": str(error)}
        if "error" in answer:
            code, err = 1, f"jail: {answer['error']}: {answer.get('message', '')}\n"
        else:
            status = answer.get("status")
            code = status if isinstance(status, int) and 0 <= status < 256 else 126 if not isinstance(status, int) else 125
            out, err = str(answer.get("stdout", "")), str(answer.get("stderr", ""))
        for suffix, text in ((".out", out), (".err", err)):
            with open(call + suffix, "w", encoding="utf-8", errors="surrogateescape") as handle:
                handle.write(text)
        try:
            with open(call + ".done", "w") as done:  # blocks until the call waits on it
                done.write(f"{code}\n")
            os.unlink(call + ".done")
        except OSError:
            pass  # the call is gone: nobody waits for its status


def _case_folder(index: int) -> str:
    """A fresh folder of the shared scratch, writable by the jail too."""
    folder = os.path.join(SCRATCH, f"case-{index}")
    os.mkdir(folder)
    os.chmod(folder, 0o777)
    return folder


def _run_file(path: str, index: int, report: str, env: dict[str, str]) -> list[dict[str, object]]:
    """Run one post-turn file; its cases."""
    folder = _case_folder(index)
    case_env = {**env, "TMPDIR": folder}
    if path.endswith(".sh"):
        code = subprocess.run(["sh", os.path.abspath(path)], cwd=folder, env=case_env, stdin=subprocess.DEVNULL,
                              stdout=sys.stderr, check=False).returncode
        return [{"case": path, "outcome": "pass" if code == 0 else "fail"}]
    _run_unittest(path, report, case_env)
    return [{"case": line.get("case"), "outcome": line.get("outcome")} for line in _lines(report) if "case" in line]


def _run_unittest(path: str, report: str, env: dict[str, str]) -> None:
    """Run one unittest file in this process (`pyunit.main`), under `env` and the judge's cwd, and
    put both back after. The judge's own pinned test code runs here; the code under test never
    does (it stays in the jail, reached through the relay), so no interpreter starts per file. A
    file that raises or exits while it loads leaves no report: its cases are missing, so they fail."""
    import pyunit  # here, not at the top: it imports unittest, which a shell task's judge never needs (10-15 ms)

    saved, here = dict(os.environ), os.getcwd()
    os.environ.clear()
    os.environ.update(env)
    tempfile.tempdir = None  # TMPDIR is the case's folder now
    try:
        pyunit.main(report, path)
    except BaseException as error:  # noqa: BLE001 (a test file may raise anything, even SystemExit, while it loads)
        sys.stderr.write(f"{path}: {type(error).__name__}: {error}\n")
    finally:
        os.environ.clear()
        os.environ.update(saved)
        os.chdir(here)
        tempfile.tempdir = None


SHORT_TMPDIR_BYTES = 60
"""The longest TMPDIR the jail's socket goes under (`tasks_lib.sockets`' rule; this file cannot import it)."""


def main(argv: list[str]) -> int:
    """Judge the post-turn files; 0 once the result is written."""
    nonce, files = argv[0], argv[1:]
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    os.umask(0)
    relay = Relay(int(os.environ["JAIL_FD"]))
    base = tempfile.gettempdir()  # a socket path must fit sun_path: /tmp when TMPDIR is long (tasks_lib/sockets.py)
    private = tempfile.mkdtemp(prefix="judge-", dir=base if len(os.fsencode(base)) <= SHORT_TMPDIR_BYTES else "/tmp")
    os.chmod(private, 0o700)
    sock = os.path.join(private, "jail.sock")
    relay.listen(sock)
    Calls(relay, private).listen()
    env = {"PATH": f"{HERE}/bin:{os.environ.get('PATH', '/usr/bin:/bin')}", "LANG": "C.UTF-8", "HOME": os.environ.get("HOME", "/tmp"),
           "PYTHONDONTWRITEBYTECODE": "1", "JAIL_SOCKET": sock, "JAIL_CALLS": private,
           "JAIL_WORKSPACE": os.environ.get("JAIL_WORKSPACE", "/workspace"), "JAIL_SCRATCH": SCRATCH}
    found: list[object] = []
    digests: list[object] = []
    result: dict[str, object] = {"nonce": nonce, "cases": found, "files": digests, "flags": []}
    for index, path in enumerate(files):
        before = _digest(path)
        found += _run_file(path, index, os.path.join(private, f"report-{index}.jsonl"), env)
        digests.append({"path": path, "before": before, "after": _digest(path)})
    out.write(json.dumps(result) + "\n")
    out.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
