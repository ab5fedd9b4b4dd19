"""A TCP listener on 127.0.0.1 that records the first bytes of every connection: the probe the
sandbox conformance suite and the hostile-agent test use to prove that network `none` holds."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def loopback_listener() -> Iterator[tuple[int, list[bytes]]]:
    """Yield (port, received); `received` gains the first 64 bytes of each accepted connection.
    The listener and its thread are closed on exit."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.1)
    received: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(3)
                received.append(conn.recv(64))

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], received
    finally:
        stop.set()
        listener.close()
        thread.join(5)


def control_connection(port: int, received: list[bytes], timeout: float = 5.0) -> bool:
    """Connect from here (outside any sandbox), wait until the listener recorded it, then forget it;
    True when it did: the proof that a connection the sandbox makes would be seen."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as control:
        control.sendall(b"control")
    deadline = time.monotonic() + timeout
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    seen = received == [b"control"]
    received.clear()
    return seen
