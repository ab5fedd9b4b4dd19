"""Short private folders for the Unix sockets memtrial creates, whatever TMPDIR is.

A Unix socket's path must fit in `sun_path` (108 bytes on Linux, 104 on macOS), so a socket under a
long TMPDIR (a CI runner's, a test's tmp_path) cannot be bound ("AF_UNIX path too long"). Every socket
memtrial listens on (the delivery witness, the memory server, the judge's jail relay) goes in a
folder from `socket_folder`: a fresh mode-0700 folder under TMPDIR when that leaves room for the
socket's name, else under /tmp. The harness files that run in a judge's own process cannot import
this module and apply the same rule themselves (`tasks_lib/corpus/harness/judge.py`).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

MAX_SOCKET_PATH_BYTES = 100
"""The longest socket path memtrial binds (under both systems' `sun_path` limit, with room for the NUL)."""
NAME_ROOM_BYTES = 40
"""Room left for what goes below a socket folder (`memory/memory.sock`, `jail.sock`)."""
SHORT_BASE = Path("/tmp")
"""Where a socket folder goes when TMPDIR is too long."""


class SocketPathError(OSError):
    """No folder short enough for a Unix socket could be made."""


def socket_base() -> Path:
    """TMPDIR (tempfile's folder) when a socket folder under it leaves NAME_ROOM_BYTES, else /tmp."""
    base = Path(tempfile.gettempdir())
    longest = len(os.fsencode(base)) + len("/tmp12345678/") + NAME_ROOM_BYTES
    return base if longest <= MAX_SOCKET_PATH_BYTES else SHORT_BASE


def socket_folder(prefix: str | None = None) -> Path:
    """A fresh, empty folder (mode 0700, this user's) for Unix sockets, whose path leaves NAME_ROOM_BYTES
    for names below it; the caller removes it. Raises SocketPathError when even /tmp is too long or unusable."""
    try:
        folder = Path(tempfile.mkdtemp(prefix=prefix, dir=socket_base()))
    except OSError as error:
        raise SocketPathError(f"cannot make a folder for a Unix socket under {socket_base()} ({error.strerror}); "
                              "set TMPDIR to a short writable folder") from None
    if len(os.fsencode(folder)) + NAME_ROOM_BYTES > MAX_SOCKET_PATH_BYTES:
        folder.rmdir()
        raise SocketPathError(f"{folder}: too long for a Unix socket; set TMPDIR to a short writable folder")
    return folder
