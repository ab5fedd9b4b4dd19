"""The served replica: a real server process on a private Unix socket, a real hook process talking to it.

Nothing is mocked. Each test starts its own server from a replica of a frozen store and stops it
by PID at teardown.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import socketserver
import stat
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.protocol import (
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    ErrorResponse,
    PingResponse,
)
from tasks_lib.memory.delivery.provenance import find_provenance
from tasks_lib.memory.delivery.server import (
    PID_NAME,
    REQUEST_LOG_NAME,
    ServedReplica,
    private_dir,
    start_server,
    stop_server,
)
from tasks_lib.memory.env import ABLATE_LANES_ENV, AGENT_ENV, MEMORY_OFF_ENV, REALM_ENV, SOCKET_ENV
from tasks_lib.memory.errors import MemoryInputError, MemoryServerError, UnknownRealmError
from tasks_lib.memory.reference.replica import restore_replica, snapshot
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import sha256_file

REALM = "trial:run-1.uploader.on.t0"
PROMPT = "what exit code does the uploader use for a full disk quota?"


@pytest.fixture
def frozen(tmp_path: Path) -> tuple[Path, str, tuple[str, ...]]:
    """A frozen store with one realm and one planted memory: (frozen path, its sha256, planted ids)."""
    live = tmp_path / "live.sqlite"
    with SqliteMemoryStore(live) as store:
        store.create_realm(REALM)
        ids = store.remember(REALM, ["The uploader exits with code 75 when the disk quota is full."])
    receipt = snapshot(live, tmp_path / "frozen.sqlite")
    return tmp_path / "frozen.sqlite", receipt.sha256, ids


@pytest.fixture
def served(tmp_path: Path, frozen: tuple[Path, str, tuple[str, ...]]) -> Iterator[ServedReplica]:
    replica = restore_replica(frozen[0], tmp_path / "run", expected_sha256=frozen[1])
    server = start_server(replica, realm=REALM)
    try:
        yield server
    finally:
        stop_server(Path(server.socket_dir))
        shutil.rmtree(server.socket_dir, ignore_errors=True)


def _hook(env_extra: dict[str, str], prompt: str = PROMPT) -> subprocess.CompletedProcess[bytes]:
    """Run the hook as its own process with only the served-replica settings (no store path)."""
    env = {k: v for k, v in os.environ.items() if k not in AGENT_ENV and not k.startswith("MEMTRIAL_")}
    env.update(env_extra)
    event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": prompt, "session_id": "s1"})
    return subprocess.run([sys.executable, "-m", "tasks_lib.memory.delivery.hook"], input=event.encode(),
                          capture_output=True, env=env, timeout=60, check=False)


def _stderr_lines(done: subprocess.CompletedProcess[bytes]) -> list[bytes]:
    """stderr lines, without runpy's warning that `python -m` re-imports a module the package __init__ imported."""
    return [line for line in done.stderr.splitlines() if b"RuntimeWarning: 'tasks_lib.memory.delivery.hook' found" not in line]


def _raw(server: ServedReplica, *requests: object) -> list[ErrorResponse]:
    """Send `requests` as raw JSON lines on one connection, as a client that does not use the models would,
    then a ping; return the refusals and check the same connection is still served."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(20)
        conn.connect(server.socket_path)
        reader = conn.makefile("rb")
        answers = []
        for request in (*requests, {"op": "ping"}):
            conn.sendall(json.dumps(request).encode() + b"\n")
            answers.append(reader.readline())
    assert PingResponse.model_validate_json(answers[-1]).pid == server.pid, "the server stopped serving"
    return [ErrorResponse.model_validate_json(answer) for answer in answers[:-1]]


def _requests(server: ServedReplica) -> list[dict[str, object]]:
    log = Path(server.socket_dir) / REQUEST_LOG_NAME
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def test_nothing_a_run_does_changes_the_frozen_original(served: ServedReplica, frozen: tuple[Path, str, tuple[str, ...]]) -> None:
    """Writes through the socket land in the replica; the frozen file keeps its bytes and read-only mode."""
    frozen_path, digest, planted = frozen
    client = MemoryClient(served.socket_path)
    before_replica = sha256_file(Path(served.store_path))
    new = client.remember(REALM, ["The uploader retries three times before giving up."])
    assert client.forget(planted) == planted
    assert [h.id for h in client.recall(REALM, "uploader retries", 5)] == list(new)
    assert sha256_file(frozen_path) == digest, "the frozen original changed"
    assert not frozen_path.stat().st_mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
    assert sha256_file(Path(served.store_path)) != before_replica, "the run's writes did not reach its replica"


def test_hook_through_the_socket_delivers_with_provenance(served: ServedReplica, frozen: tuple[Path, str, tuple[str, ...]]) -> None:
    done = _hook(served.env())
    assert done.returncode == 0, done.stderr
    context = json.loads(done.stdout)["hookSpecificOutput"]["additionalContext"]
    assert "code 75" in context
    assert find_provenance(context) == [("prompt-time", frozen[2])]
    assert [r["op"] for r in _requests(served)] == ["recall"], "the hook must recall through the server"


def test_exported_settings_name_the_socket_and_realm_only(served: ServedReplica) -> None:
    assert served.env() == {SOCKET_ENV: served.socket_path, REALM_ENV: REALM}


@pytest.mark.parametrize(
    ("switches", "lanes"),
    [
        ({MEMORY_OFF_ENV: "1"}, None),
        ({ABLATE_LANES_ENV: "all"}, None),
        ({ABLATE_LANES_ENV: "semantic,graph,corrections"}, ["keyword"]),
    ],
    ids=["kill-switch", "ablate-all", "ablate-three"],
)
def test_switches_are_read_by_the_hook_itself(
    tmp_path: Path, frozen: tuple[Path, str, tuple[str, ...]], monkeypatch: pytest.MonkeyPatch,
    switches: dict[str, str], lanes: list[str] | None,
) -> None:
    """The server is started with the opposite switch in its environment and must ignore it;
    the hook alone decides, before any request: no request at all, or only the active lanes."""
    monkeypatch.setenv(MEMORY_OFF_ENV, "1")
    monkeypatch.setenv(ABLATE_LANES_ENV, "keyword")
    replica = restore_replica(frozen[0], tmp_path / "run", expected_sha256=frozen[1])
    server = start_server(replica, realm=REALM)
    try:
        done = _hook({**server.env(), **switches})
        assert done.returncode == 0, done.stderr
        requests = _requests(server)
        if lanes is None:
            assert (done.stdout, requests) == (b"", []), "a switched-off hook must not call the server"
        else:
            assert find_provenance(done.stdout.decode()) == [("prompt-time", frozen[2])]
            assert [(r["op"], r["lanes"]) for r in requests] == [("recall", lanes)]
        plain = _hook(server.env())
        assert plain.returncode == 0 and find_provenance(plain.stdout.decode()), \
            "the server must not apply the switches it inherited"
    finally:
        stop_server(Path(server.socket_dir))
        shutil.rmtree(server.socket_dir, ignore_errors=True)


def test_hook_reports_an_unknown_realm_from_the_server_in_one_line(served: ServedReplica) -> None:
    done = _hook({**served.env(), REALM_ENV: "trial:never-made"})
    assert done.returncode == 1 and done.stdout == b""
    lines = _stderr_lines(done)
    assert len(lines) == 1 and b"was never created" in lines[0]


def test_client_raises_the_store_error_type(served: ServedReplica) -> None:
    with pytest.raises(UnknownRealmError, match="was never created"):
        MemoryClient(served.socket_path).recall("trial:absent", "anything")


def test_socket_is_private(served: ServedReplica) -> None:
    folder, sock = Path(served.socket_dir), Path(served.socket_path)
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) == 0o600


def test_server_refuses_a_folder_others_can_enter(tmp_path: Path) -> None:
    shared = Path("/tmp") / f"memtrial-shared-{os.getpid()}"
    shared.mkdir(mode=0o755)
    try:
        shared.chmod(0o755)
        with pytest.raises(MemoryServerError, match="chmod 700"):
            private_dir(shared)
    finally:
        shared.rmdir()


def test_oversized_request_is_refused_and_the_server_keeps_serving(served: ServedReplica) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(20)
        conn.connect(served.socket_path)
        conn.sendall(b'{"op": "ping", "pad": "' + b"x" * (MAX_REQUEST_BYTES + 10) + b'"}\n')
        answer = json.loads(conn.makefile("rb").readline())
    assert answer["ok"] is False and "longer than" in answer["message"]
    assert MemoryClient(served.socket_path).ping().pid == served.pid


def test_a_silent_client_does_not_block_others(served: ServedReplica) -> None:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as idle:
        idle.connect(served.socket_path)
        assert MemoryClient(served.socket_path, timeout=5).ping().realms == (REALM,)


def test_bad_requests_name_the_field(served: ServedReplica) -> None:
    client = MemoryClient(served.socket_path)
    with pytest.raises(MemoryInputError, match=r"items\[0\]\.text"):
        client.remember(REALM, [""])
    drop, forget = _raw(served, {"op": "drop"}, {"op": "forget", "ids": ["x"], "realm": REALM})
    assert "op: 'drop' is not one of" in drop.message
    assert "unknown field" in forget.message


def test_stop_by_pid_removes_socket_and_pid_file(tmp_path: Path, frozen: tuple[Path, str, tuple[str, ...]]) -> None:
    replica = restore_replica(frozen[0], tmp_path / "run", expected_sha256=frozen[1])
    server = start_server(replica)
    folder = Path(server.socket_dir)
    try:
        assert stop_server(folder) is True
        assert not Path(server.socket_path).exists() and not (folder / PID_NAME).exists()
        with pytest.raises(ProcessLookupError):
            os.kill(server.pid, 0)
        assert stop_server(folder) is False, "stopping twice is a no-op"
        with pytest.raises(MemoryServerError, match="no memory server is listening"):
            MemoryClient(server.socket_path).ping()
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_stop_never_signals_a_recycled_pid(tmp_path: Path) -> None:
    """A stale PID file naming some other process must not get that process killed."""
    folder = private_dir(Path("/tmp") / f"memtrial-stale-{os.getpid()}")
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (folder / PID_NAME).write_text(f"{bystander.pid}\n")
        assert stop_server(folder) is False
        assert bystander.poll() is None, "stop_server killed a process that was not the memory server"
    finally:
        bystander.kill()
        bystander.wait()
        shutil.rmtree(folder, ignore_errors=True)


def test_start_fails_clearly_on_a_file_that_is_not_a_store(tmp_path: Path) -> None:
    bogus = tmp_path / "bogus.sqlite"
    bogus.write_bytes(b"not a database at all" * 100)
    with pytest.raises(MemoryServerError, match="exited with status 2"):
        start_server(bogus)


def test_a_read_only_server_serves_recall_and_refuses_every_write(tmp_path: Path, frozen: tuple[Path, str, tuple[str, ...]]) -> None:
    """The agent-facing mode: the replica's bytes never change, whatever a client sends."""
    replica = restore_replica(frozen[0], tmp_path / "run", expected_sha256=frozen[1])
    before = sha256_file(replica)
    server = start_server(replica, realm=REALM, read_only=True)
    try:
        client = MemoryClient(server.socket_path)
        assert client.ping().read_only is True and server.read_only
        assert [h.id for h in client.recall(REALM, PROMPT, 5)] == list(frozen[2])
        with pytest.raises(MemoryServerError, match="remember: this server serves .* read-only"):
            client.remember(REALM, ["The uploader now exits with code 0 on a full quota."])
        with pytest.raises(MemoryServerError, match="forget: this server serves .* read-only"):
            client.forget(frozen[2])
        assert [h.id for h in client.recall(REALM, PROMPT, 5)] == list(frozen[2]), "a refused write still changed what is served"
    finally:
        stop_server(Path(server.socket_dir))
        shutil.rmtree(server.socket_dir, ignore_errors=True)
    assert sha256_file(replica) == before


def test_an_unexpected_failure_is_answered_and_the_server_keeps_serving(served: ServedReplica) -> None:
    """A store that breaks under the server (here its tables dropped by another process) gets a
    one-line answer naming the failure, never a dropped connection."""
    import sqlite3

    client = MemoryClient(served.socket_path)
    conn = sqlite3.connect(served.store_path)
    conn.executescript("DROP TABLE memories_fts;")
    conn.close()
    with pytest.raises(MemoryServerError, match=r"recall: the server failed \(OperationalError: .*memories_fts"):
        client.recall(REALM, PROMPT, 5)
    assert client.ping().pid == served.pid


@pytest.mark.parametrize(
    ("request_", "field"),
    [
        ({"op": "ping", "lanes": ["keyword"]}, "ping request: lanes: unknown field"),
        ({"op": "ping", "protocol": PROTOCOL_VERSION + 1}, f"protocol: {PROTOCOL_VERSION + 1} is not supported"),
        ({"op": "recall", "realm": REALM, "query": "uploader", "k": "5"}, "recall request: k: Input should be a valid integer"),
        ({"op": "recall", "realm": REALM, "query": "uploader", "lanes": "keyword"}, "recall request: lanes:"),
        ({"op": "recall", "realm": REALM}, "recall request: query: required field is missing"),
        ({"op": "remember", "realm": REALM, "items": [{"text": "x", "kind": "rumour"}]}, "remember request: items[0].kind:"),
        ({"op": "forget", "ids": "all"}, "forget request: ids:"),
    ],
    ids=["unknown-field", "other-protocol", "string-k-not-coerced", "lanes-not-a-list", "missing-query", "bad-item-kind", "ids-not-a-list"],
)
def test_a_malformed_request_is_refused_naming_the_field_and_the_server_keeps_serving(
    served: ServedReplica, request_: dict[str, object], field: str,
) -> None:
    """A request outside the protocol must neither reach the store (a coerced `k` or a silently
    dropped field would change what is recalled) nor cost the connection or the server."""
    (refused,) = _raw(served, request_)
    assert refused.error == "MemoryInputError" and field in refused.message, refused.message
    assert all(entry["ok"] is False for entry in _requests(served)), "a refused request must be logged as refused"
    assert [h.id for h in MemoryClient(served.socket_path).recall(REALM, PROMPT, 5)], "the server no longer recalls"


def test_every_answer_states_the_protocol_version(served: ServedReplica) -> None:
    """A client must be able to tell a server of another protocol version from a broken one."""
    (refused,) = _raw(served, {"op": "drop"})
    assert refused.protocol == PROTOCOL_VERSION == MemoryClient(served.socket_path).ping().protocol


def test_a_client_argument_outside_the_protocol_is_refused_before_sending(served: ServedReplica) -> None:
    """A mistyped argument is a MemoryInputError naming it, never coerced, and nothing reaches the server."""
    client = MemoryClient(served.socket_path)
    with pytest.raises(MemoryInputError, match="recall request: k: Input should be a valid integer"):
        client.recall(REALM, PROMPT, "5")  # type: ignore[arg-type]
    with pytest.raises(MemoryInputError, match=r"forget request: ids\[0\]: Input should be a valid string"):
        client.forget([7])  # type: ignore[list-item]
    with pytest.raises(MemoryInputError, match="not valid UTF-8"):
        client.recall(REALM, "quota \udcff")
    assert _requests(served) == []


class _GarbageServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    """A real socket server answering every line with the same bytes: something that is not memtrial's memory server."""

    daemon_threads = True

    def __init__(self, path: Path, answer: bytes) -> None:
        self.answer = answer

        class Handler(socketserver.StreamRequestHandler):
            def handle(handler) -> None:  # noqa: N805 - the server is `self` here
                while handler.rfile.readline():
                    handler.wfile.write(self.answer)

        super().__init__(str(path), Handler)


@pytest.fixture
def garbage(request: pytest.FixtureRequest) -> Iterator[Path]:
    folder = private_dir(Path(tempfile.mkdtemp(prefix="memtrial-garbage-")))
    server = _GarbageServer(folder / "memory.sock", request.param)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield folder / "memory.sock"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)
        shutil.rmtree(folder, ignore_errors=True)


HITS = {"protocol": 1, "ok": True, "hits": [{"id": "m1", "text": "a memory", "score": 1.0, "lanes": ["keyword"]}]}


@pytest.mark.parametrize(
    ("garbage", "field"),
    [
        (b"hello\n", "the recall answer is not JSON"),
        (json.dumps({**HITS, "hits": "m1"}).encode() + b"\n", "hits are not memories"),
        (json.dumps({**HITS, "hits": [{"id": "m1"}]}).encode() + b"\n", "hits are not memories"),
        (json.dumps({k: v for k, v in HITS.items() if k != "hits"}).encode() + b"\n", "hits are not memories"),
        (json.dumps({**HITS, "protocol": 99}).encode() + b"\n", "not memory protocol 1"),
        (json.dumps({"protocol": 1, "ok": False, "error": "UnknownRealmError"}).encode() + b"\n", "recall refused: UnknownRealmError"),
        (json.dumps({"protocol": 1, "ok": False, "error": "UnknownRealmError", "message": "two\nlines"}).encode() + b"\n", "two lines"),
    ],
    ids=["not-json", "hits-not-a-list", "hit-without-text", "no-hits", "other-protocol", "refusal-without-message", "multi-line-refusal"],
    indirect=["garbage"],
)
def test_a_server_answering_garbage_makes_the_hook_fail_non_blocking_naming_the_field(garbage: Path, field: str) -> None:
    """A socket that is not memtrial's memory server must not deliver, crash the agent, or hang it:
    the hook exits 1 (non-blocking for Claude Code) with one stderr line naming the field."""
    done = _hook({SOCKET_ENV: str(garbage), REALM_ENV: REALM})
    lines = _stderr_lines(done)
    assert (done.returncode, done.stdout) == (1, b""), done.stderr
    assert len(lines) == 1 and field.encode() in lines[0], lines
