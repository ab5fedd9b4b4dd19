"""Unix sockets under a long TMPDIR: the delivery witness and the memory server bind a short private
folder (`tasks_lib.sockets`) when the folder they would use is too long for `sun_path`."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.server import start_server, stop_server
from tasks_lib.memory.delivery.witness import DeliveryWitness
from tasks_lib.memory.reference.replica import restore_replica, snapshot
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.sockets import MAX_SOCKET_PATH_BYTES, socket_folder

REALM = "project:0123456789abcdef"


@pytest.fixture
def long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """TMPDIR set to a folder whose path alone leaves no room for a socket below it."""
    folder = tmp_path / ("t" * 40) / ("m" * 40)
    folder.mkdir(parents=True)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    assert len(os.fsencode(folder)) > MAX_SOCKET_PATH_BYTES - 20
    yield folder


def _store(folder: Path) -> tuple[Path, tuple[str, ...]]:
    path = folder / "memory.sqlite"
    with SqliteMemoryStore(path) as memory:
        memory.create_realm(REALM)
        ids = tuple(memory.remember(REALM, ["The pager rotation starts on Mondays."]))
    return path, ids


def test_the_delivery_witness_serves_under_a_long_tmpdir(long_tmpdir: Path) -> None:
    """The failure prevented: 'delivery witness: cannot listen on .../memory.sock (AF_UNIX path too
    long)' when the attempt's scratch root sat under a long TMPDIR, which failed every memory arm."""
    path, ids = _store(long_tmpdir)
    root = Path(tempfile.mkdtemp())  # the attempt's scratch root, as materialize_workspace makes it
    witness = DeliveryWitness(SqliteMemoryStore(path, create=False, read_only=True), REALM, root, served_by="test",
                              planted_ids=ids).start()
    socket_path = witness.socket_path
    assert len(os.fsencode(socket_path)) <= MAX_SOCKET_PATH_BYTES and stat.S_ISSOCK(socket_path.stat().st_mode)
    hits = MemoryClient(socket_path).recall(REALM, "when does the pager rotation start", 5)
    receipt = witness.close()
    assert [h.id for h in hits] == list(receipt.recalls[0].ids) and receipt.planted_served()
    assert not socket_path.parent.parent.exists(), "the short private folder outlived the witness"


def test_the_memory_server_serves_under_a_long_tmpdir(long_tmpdir: Path) -> None:
    """The failure prevented: the memory server (and every provisioner that serves a socket) refused
    'socket_dir ... too long for a Unix socket' under a long TMPDIR, with no folder the user could pick."""
    path, _ = _store(long_tmpdir)
    frozen = long_tmpdir / "frozen.sqlite"
    receipt = snapshot(path, frozen)
    replica = restore_replica(frozen, long_tmpdir / "run", expected_sha256=receipt.sha256)
    server = start_server(replica, realm=REALM)
    try:
        assert len(os.fsencode(server.socket_path)) <= MAX_SOCKET_PATH_BYTES
        assert MemoryClient(server.socket_path).ping().realms == (REALM,)
    finally:
        stop_server(Path(server.socket_dir))
        shutil.rmtree(server.socket_dir, ignore_errors=True)


def test_a_socket_folder_is_private_and_short_whatever_tmpdir_is(long_tmpdir: Path) -> None:
    """A socket folder under a long TMPDIR is made under /tmp instead, mode 0700, this user's."""
    folder = socket_folder()
    try:
        info = folder.stat()
        assert folder.parent == Path("/tmp") and stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    finally:
        folder.rmdir()
