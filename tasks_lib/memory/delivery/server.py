"""Serve one run's store replica on a private Unix domain socket, so an agent CLI and its child hooks share it.

The server is one process (`python -m tasks_lib.memory.delivery.server --store PATH --socket-dir DIR`, or
`--system NAME --data DIR` for any registered memory system kept in a folder) that opens the
replica once and answers a JSON-lines protocol on `DIR/memory.sock`. `DIR` must be owned
by this user with mode 0700, so only this user can connect; the socket itself is 0600. Nothing
listens on any network interface.

Protocol: the typed JSON lines of `protocol` (ping, recall, remember, forget). Each request line is
validated against its verb's model; a malformed one (unknown verb or field, wrong type, another
protocol version) is answered with an ErrorResponse naming the field, and the server goes on
serving. A connection may carry several requests; it is closed after IDLE_TIMEOUT_SECONDS without
a full line, or after an oversized line or one that is not a JSON object. Every answered request
but ping is appended to `DIR/requests.jsonl` (op, realm, lanes, ids; never the query text), which
is how a run can see what the memory system was actually asked.

The kill switch and lane ablation are not read here: the server removes them (`env.SWITCHES`) from
its own environment at start. They belong to the agent side: the hook reads them and skips lanes
before it sends a recall (see `hook`). SIGTERM (or SIGINT) stops the
server cleanly: it finishes the request in flight, closes the store, and removes the socket and
its PID file. `stop_server` sends it by PID, after checking that the PID is this server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socketserver
import stat
import sys
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tasks_lib.contracts import ContractModel
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.delivery import protocol
from tasks_lib.memory.env import REALM_ENV, SOCKET_ENV, SWITCHES
from tasks_lib.memory.errors import (
    MemoryInputError,
    MemoryServerError,
    MemoryStoreError,
    UnreadableRequestError,
)
from tasks_lib.sockets import MAX_SOCKET_PATH_BYTES, socket_folder

SOCKET_NAME = "memory.sock"
"""File name of the socket inside the private socket folder."""
PID_NAME = "server.pid"
"""File name of the server's PID file inside the socket folder; present while it serves."""
LOG_NAME = "server.log"
"""File name of the server's stderr log inside the socket folder (when started by `start_server`)."""
REQUEST_LOG_NAME = "requests.jsonl"
"""File name of the per-request audit log inside the socket folder."""

IDLE_TIMEOUT_SECONDS = 10.0
"""Seconds the server waits for a complete request line before closing the connection."""
READY_PING_TIMEOUT_SECONDS = 2.0
"""Seconds `start_server` waits for each start-up ping."""
_MODULE = "tasks_lib.memory.delivery.server"


class ServedReplica(ContractModel):
    """A running server for one replica, as `start_server` returns it."""

    pid: int
    """PID of the server process; `stop_server` signals exactly this process."""
    socket_path: str
    """Absolute path of the Unix socket."""
    socket_dir: str
    """The private (0700) folder holding the socket, PID file and logs."""
    store_path: str
    """The replica file being served (for a registered memory system, its data folder)."""
    realm: str | None = None
    """The realm the agent is pinned to, when known."""
    read_only: bool = False
    """Whether the server refuses `remember` and `forget` (the store is opened read-only)."""

    def env(self) -> dict[str, str]:
        """Variables to set on the agent CLI so it and its child hooks use this replica."""
        out = {SOCKET_ENV: self.socket_path}
        if self.realm is not None:
            out[REALM_ENV] = self.realm
        return out


# --------------------------------------------------------------------------- the private folder


def private_dir(path: Path, *, create: bool = True) -> Path:
    """Return `path` (absolute) after making sure it is a folder owned by this user with mode 0700.

    Creates it (mode 0700) when missing and `create`. Raises MemoryServerError when it is owned by
    someone else, readable or writable by group/others, or would make the socket path too long.
    """
    path = Path(path).absolute()
    if create and not path.exists():
        path.mkdir(mode=0o700, parents=True)
        path.chmod(0o700)
    info = path.lstat() if path.exists() or path.is_symlink() else None
    if info is None or not stat.S_ISDIR(info.st_mode):
        raise MemoryServerError(f"socket_dir: {path} is not a folder (a symlink is not accepted); create it with mode 0700")
    if info.st_uid != os.getuid():
        raise MemoryServerError(f"socket_dir: {path} is owned by uid {info.st_uid}, not you; use a folder of your own")
    if stat.S_IMODE(info.st_mode) & 0o077:
        raise MemoryServerError(
            f"socket_dir: {path} has mode {stat.S_IMODE(info.st_mode):o}; only its owner may use it, run chmod 700 on it"
        )
    if len(os.fsencode(path / SOCKET_NAME)) > MAX_SOCKET_PATH_BYTES:
        raise MemoryServerError(
            f"socket_dir: {path / SOCKET_NAME} is longer than {MAX_SOCKET_PATH_BYTES} bytes, too long for a Unix socket; "
            "use a shorter folder (e.g. under /tmp)"
        )
    return path


# --------------------------------------------------------------------------- server side


class _Handler(socketserver.StreamRequestHandler):
    """One connection: JSON lines in, JSON lines out."""

    timeout = IDLE_TIMEOUT_SECONDS
    server: MemoryServer

    def handle(self) -> None:
        while True:
            try:
                line = self.rfile.readline(protocol.MAX_REQUEST_BYTES + 1)
            except (TimeoutError, OSError):
                return
            if not line:
                return
            if len(line) > protocol.MAX_REQUEST_BYTES:
                self._send(protocol.ErrorResponse(error=MemoryInputError.__name__,
                                                  message=f"request: longer than {protocol.MAX_REQUEST_BYTES} bytes; split the batch"))
                return
            if not line.strip():
                continue
            response, keep_open = self.server.answer(line)
            if not self._send(response) or not keep_open:
                return

    def _send(self, response: protocol.Message) -> bool:
        try:
            line = protocol.encode(response)
        except MemoryInputError as error:  # an answer quoting undecodable text still gets an answer
            line = protocol.encode(protocol.ErrorResponse(error=MemoryServerError.__name__, message=f"answer: {error}"))
        try:
            self.wfile.write(line)
            self.wfile.flush()
        except OSError:
            return False
        return True


class MemoryServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """The protocol on one bound socket: each request is parsed, answered by `dispatch` under one lock,
    and every answered request but ping is passed to `record`. `serve` runs it in a process of its own;
    `tasks_lib.memory.delivery.witness` runs a subclass inside the runner."""

    daemon_threads = True
    allow_reuse_address = False

    def __init__(self, socket_path: Path, store: Any, request_log: Path | None, read_only: bool, label: str) -> None:
        self.store = store
        self.read_only = read_only
        self.label = label
        self.lock = threading.Lock()
        self.request_log = request_log
        super().__init__(str(socket_path), _Handler)

    def answer(self, line: bytes) -> tuple[protocol.Message, bool]:
        """Answer one request line; return the response and whether the connection stays open."""
        try:
            op = protocol.parse_op(line)
        except UnreadableRequestError as error:
            return protocol.ErrorResponse(error=type(error).__name__, message=str(error)), False
        audit: dict[str, Any] = {"op": op}
        response: protocol.Message
        try:
            request = protocol.parse_request(op, line)
            with self.lock:
                response = self.dispatch(request, audit)
        except MemoryStoreError as error:
            response = protocol.ErrorResponse(error=type(error).__name__, message=str(error))
        except Exception as error:  # noqa: BLE001 - a client must get an answer, never a dropped connection
            response = protocol.ErrorResponse(error=MemoryServerError.__name__,
                                              message=f"{op}: the server failed ({type(error).__name__}: {error}); see its log")
            traceback.print_exc(file=sys.stderr)
        if op != "ping":
            audit.update(ok=not isinstance(response, protocol.ErrorResponse), at=round(time.time(), 3))
            if isinstance(response, protocol.ErrorResponse):
                audit["error"] = response.error
            self.record(audit)
        return response, True

    def dispatch(self, request: protocol.Request, audit: dict[str, Any]) -> protocol.Message:
        """Answer one parsed request (called under `lock`), noting what was served in `audit`."""
        store = self.store
        if isinstance(request, protocol.PingRequest):
            return protocol.PingResponse(pid=os.getpid(), store=self.label, lanes=tuple(store.LANES),
                                         realms=tuple(store.realms()), read_only=self.read_only)
        if self.read_only and isinstance(request, (protocol.RememberRequest, protocol.ForgetRequest)):
            raise MemoryServerError(f"{request.op}: this server serves {self.label} read-only; memories cannot be changed through it")
        if isinstance(request, protocol.RecallRequest):
            lanes = None if request.lanes is None else list(request.lanes)
            audit.update(realm=request.realm, lanes=lanes)
            hits = store.recall(request.realm, request.query, request.k, lanes=lanes)
            audit["ids"] = [hit.id for hit in hits]
            return protocol.RecallResponse(hits=tuple(hits))
        if isinstance(request, protocol.RememberRequest):
            audit["realm"] = request.realm
            ids = store.remember(request.realm, list(request.items))
            audit["ids"] = list(ids)
            return protocol.IdsResponse(ids=tuple(ids))
        forgotten = store.forget(list(request.ids))
        audit["ids"] = list(forgotten)
        return protocol.IdsResponse(ids=tuple(forgotten))

    def record(self, entry: dict[str, Any]) -> None:
        """Append one answered request to the request log (when there is one)."""
        if self.request_log is None:
            return
        with contextlib.suppress(OSError), self.request_log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True, default=str) + "\n")


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def serve(store_path: Path, socket_dir: Path, *, read_only: bool = False) -> int:
    """Serve the reference store at `store_path` on `socket_dir/memory.sock` until SIGTERM or SIGINT; return 0 after a clean stop.

    With `read_only` the store is opened in SQLite's read-only mode and `remember` / `forget` are
    refused: the mode for a socket an agent under test can reach.

    Raises MemoryServerError when the folder is not private, another server already serves it, or
    the socket cannot be bound, and MemoryStoreError when the store cannot be opened.
    """
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    return _serve(lambda: SqliteMemoryStore(store_path, create=False, read_only=read_only), str(store_path), socket_dir, read_only)


def serve_system(system: str, data_dir: Path, socket_dir: Path, *, embedder: str = "hashed", read_only: bool = False) -> int:
    """Serve the registered memory system `system` keeping its data in `data_dir`, as `serve` does.

    With `read_only`, `remember` and `forget` are refused by the server (the system's own files
    may still change as it reads). Raises what `serve` raises, and UnknownMemorySystemError /
    AdapterUnavailableError from the registry.
    """
    from tasks_lib.memory.registry import open_memory_system

    return _serve(lambda: open_memory_system(system, data_dir, embedder=embedder), f"{system} at {data_dir}", socket_dir, read_only)


def _serve(open_store: Callable[[], MemoryAdapter], label: str, socket_dir: Path, read_only: bool) -> int:
    """Serve the memory system `open_store` opens (see `serve`); `label` names it in answers."""
    for name in SWITCHES:
        os.environ.pop(name, None)
    folder = private_dir(socket_dir)
    socket_path = folder / SOCKET_NAME
    pid_file = folder / PID_NAME
    if pid_file.exists():
        with contextlib.suppress(ValueError, OSError):
            other = int(pid_file.read_text().strip())
            if other != os.getpid() and _pid_alive(other) and _is_our_server(other, folder):
                raise MemoryServerError(f"socket_dir: server {other} already serves {folder}; stop it first (memtrial memory stop)")
        pid_file.unlink(missing_ok=True)
    if socket_path.exists() or socket_path.is_symlink():
        socket_path.unlink()
    store = open_store()
    try:
        old_umask = os.umask(0o177)
        try:
            server = MemoryServer(socket_path, store, folder / REQUEST_LOG_NAME, read_only, label)
        except OSError as error:
            raise MemoryServerError(f"socket_dir: cannot listen on {socket_path} ({error})") from None
        finally:
            os.umask(old_umask)
        stopping = threading.Event()

        def _stop(signum: int, frame: object) -> None:
            if not stopping.is_set():
                stopping.set()
                threading.Thread(target=server.shutdown, daemon=True).start()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
        temporary = pid_file.with_name(PID_NAME + ".tmp")
        temporary.write_text(f"{os.getpid()}\n")
        os.replace(temporary, pid_file)
        try:
            server.serve_forever(poll_interval=0.2)
        finally:
            server.server_close()
            socket_path.unlink(missing_ok=True)
            pid_file.unlink(missing_ok=True)
    finally:
        store.close()
    return 0


# --------------------------------------------------------------------------- start and stop


def _is_our_server(pid: int, socket_dir: Path) -> bool:
    """True when `pid` runs this module for `socket_dir` (checked through /proc where it exists)."""
    cmdline = Path(f"/proc/{pid}/cmdline")
    if not Path("/proc/self/cmdline").exists():
        return True
    try:
        args = cmdline.read_bytes().split(b"\0")
    except OSError:
        return False
    return _MODULE.encode() in args and os.fsencode(str(socket_dir)) in args


def _reap(pid: int) -> bool:
    """Reap `pid` if it is our exited child; return whether it is gone."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return True
    except ChildProcessError:
        pass
    return not _pid_alive(pid)


def start_server(
    store_path: Path,
    socket_dir: Path | None = None,
    *,
    realm: str | None = None,
    timeout: float = 60.0,
    read_only: bool = False,
    own_session: bool = True,
) -> ServedReplica:
    """Start a detached server for `store_path` and wait until it answers a ping.

    `socket_dir` defaults to a fresh private folder short enough for a socket (`tasks_lib.sockets`). `realm`, when given, is
    validated and exported by `ServedReplica.env()`; `read_only` is `serve`'s. The server runs with
    stdin closed and its output in `socket_dir/server.log`, in its own session unless
    `own_session` is false (a provisioner keeps it in its process group, so that memtrial's kill of
    a provisioner that timed out also ends the server it had started). Raises MemoryServerError (with the
    log's tail) when it exits or does not answer within `timeout` seconds; it is killed then.
    """
    from tasks_lib.memory.realms import validate_realm

    if realm is not None:
        validate_realm(realm, field="realm")
    store_path = Path(store_path).absolute()
    if not store_path.is_file():
        raise MemoryServerError(f"store: no memory store at {store_path}; restore or create one first")
    return _start(["--store", str(store_path)], str(store_path), socket_dir, realm, timeout, read_only, own_session)


def start_system_server(
    system: str,
    data_dir: Path,
    socket_dir: Path | None = None,
    *,
    embedder: str = "hashed",
    realm: str | None = None,
    timeout: float = 120.0,
    read_only: bool = False,
    own_session: bool = True,
) -> ServedReplica:
    """`start_server` for a registered memory system keeping its data in `data_dir` (see `serve_system`)."""
    from tasks_lib.memory.realms import validate_realm

    if realm is not None:
        validate_realm(realm, field="realm")
    data_dir = Path(data_dir).absolute()
    if not data_dir.is_dir():
        raise MemoryServerError(f"data: no folder at {data_dir}; restore the memory system's data first")
    return _start(["--system", system, "--data", str(data_dir), "--embedder", embedder], str(data_dir),
                  socket_dir, realm, timeout, read_only, own_session)


def _start(source: list[str], store_label: str, socket_dir: Path | None, realm: str | None, timeout: float,
           read_only: bool, own_session: bool) -> ServedReplica:
    folder = private_dir(socket_folder(prefix="memtrial-mem-") if socket_dir is None else socket_dir)
    try:
        return _spawn(source, store_label, folder, realm, timeout, read_only, own_session)
    except BaseException:
        if socket_dir is None:
            shutil.rmtree(folder, ignore_errors=True)
        raise


def _spawn(source: list[str], store_label: str, folder: Path, realm: str | None, timeout: float, read_only: bool,
           own_session: bool) -> ServedReplica:
    """Spawn the server for `source` (its command-line options) in `folder` and wait for its ping; see `start_server`."""
    env = {k: v for k, v in os.environ.items() if k not in SWITCHES}
    log_path = folder / LOG_NAME
    argv = [sys.executable, "-m", _MODULE, *source, "--socket-dir", str(folder), *(["--read-only"] if read_only else [])]
    log_fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        # posix_spawn, not Popen: the server outlives this call on purpose and is reaped by PID in stop_server.
        pid = os.posix_spawn(sys.executable, argv, env, setsid=own_session, file_actions=[
            (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
            (os.POSIX_SPAWN_DUP2, log_fd, 1),
            (os.POSIX_SPAWN_DUP2, log_fd, 2),
        ])
    finally:
        os.close(log_fd)
    socket_path = folder / SOCKET_NAME
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            raise MemoryServerError(
                f"store: the memory server exited with status {os.waitstatus_to_exitcode(status)}; {_log_tail(log_path)}")
        if socket_path.exists() and (folder / PID_NAME).exists() and _answers_ping(socket_path) == pid:
            break
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise MemoryServerError(f"store: the memory server did not answer within {timeout:g} s; {_log_tail(log_path)}")
        time.sleep(0.05)
    return ServedReplica(pid=pid, socket_path=str(socket_path), socket_dir=str(folder),
                         store_path=store_label, realm=realm, read_only=read_only)


def _answers_ping(socket_path: Path) -> int | None:
    """The PID a server at `socket_path` answers a ping with; None while it does not answer one."""
    try:
        ping = protocol.encode(protocol.PingRequest(op="ping"))
        answer = protocol.exchange(str(socket_path), ping, READY_PING_TIMEOUT_SECONDS)
        return protocol.PingResponse.model_validate_json(answer).pid
    except (MemoryServerError, ValidationError):
        return None


def _log_tail(path: Path, limit: int = 600) -> str:
    try:
        text = path.read_bytes()[-limit:].decode("utf-8", "replace").strip()
    except OSError:
        return "no server log"
    return f"server log: {' | '.join(text.splitlines())}" if text else "the server log is empty"


KILL_GRACE = 5.0
"""Seconds `stop_server` waits for the kernel to tear down a SIGKILLed server before calling it a survivor."""


def stop_server(socket_dir: Path, *, timeout: float = 10.0) -> bool:
    """Stop the server serving `socket_dir` by the PID in its PID file; return whether one was running.

    Sends SIGTERM, waits up to `timeout` seconds for a clean stop, then SIGKILL. A PID file naming
    a process that is not this folder's server is removed without signalling anything. Raises
    MemoryServerError when the process survives SIGKILL.
    """
    folder = Path(socket_dir).absolute()
    pid_file = folder / PID_NAME
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return False
    if not _pid_alive(pid) or not _is_our_server(pid, folder):
        _reap(pid)
        pid_file.unlink(missing_ok=True)
        (folder / SOCKET_NAME).unlink(missing_ok=True)
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while not _reap(pid):
        if time.monotonic() > deadline:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            killed = time.monotonic() + KILL_GRACE
            while not _reap(pid) and time.monotonic() < killed:  # a large process takes a while to be torn down
                time.sleep(0.05)
            if not _reap(pid):
                raise MemoryServerError(f"socket_dir: server {pid} survived SIGKILL; stop it by hand")
            break
        time.sleep(0.05)
    pid_file.unlink(missing_ok=True)
    (folder / SOCKET_NAME).unlink(missing_ok=True)
    return True


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.delivery.server --store PATH --socket-dir DIR`: serve in the foreground."""
    parser = argparse.ArgumentParser(prog=f"python -m {_MODULE}", description="Serve one memory store replica on a private Unix socket.")
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--store", type=Path, help="the reference store replica file to serve")
    source.add_argument("--system", help="a registered memory system (with --data) to serve instead")
    parser.add_argument("--data", type=Path, help="the folder the --system keeps its data in")
    parser.add_argument("--embedder", default="hashed", help="embedder the --system is opened with (default hashed)")
    parser.add_argument("--socket-dir", required=True, type=Path, help="private (0700) folder for the socket and PID file")
    parser.add_argument("--read-only", action="store_true", help="refuse remember and forget (open the store read-only)")
    args = parser.parse_args(argv)
    if args.system is not None and args.data is None:
        parser.error("--system needs --data")
    try:
        if args.system is not None:
            return serve_system(args.system, args.data, args.socket_dir, embedder=args.embedder, read_only=args.read_only)
        return serve(args.store, args.socket_dir, read_only=args.read_only)
    except MemoryStoreError as error:
        sys.stderr.write(f"memtrial memory server: {error}\n")
        return 2


def exit_now(code: int) -> None:
    """Exit with `code` without the interpreter's teardown: every store is closed when `main` returns,
    and tearing down torch, faiss and qdrant imports took 6-9 s on a loaded machine (mem0, txtai),
    past `stop_server`'s grace."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
