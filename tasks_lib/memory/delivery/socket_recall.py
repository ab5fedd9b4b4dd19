"""The hook's recall over the memory socket, with the standard library only.

The hook runs on every prompt, so its `on` path must cost little more than a bare interpreter: this
speaks the two verbs it needs (`ping`, `recall`) of the `protocol` by hand, without pydantic or the
client; `round_trip` is the one socket exchange both this and `protocol.exchange` use. It checks the answer's shape (protocol version, an `ok` answer, hits with string ids and
texts) and turns every failure into a HookError naming the socket, which the hook reports as a
non-blocking error. `client.MemoryClient` is the full, typed client for everything else.
"""

from __future__ import annotations

import json
import socket
from collections.abc import Sequence
from dataclasses import dataclass

from tasks_lib.memory.env import SOCKET_ENV
from tasks_lib.memory.errors import HookError

PROTOCOL_VERSION = 1
"""The memory protocol version spoken (`protocol.PROTOCOL_VERSION`; a test keeps the two equal)."""
MAX_ANSWER_BYTES = 16 * 1024 * 1024
"""Longest answer line read (`protocol.MAX_RESPONSE_BYTES` is this value)."""


@dataclass(frozen=True)
class ServedHit:
    """One recalled memory: what the hook renders."""

    id: str
    text: str


def round_trip(socket_path: str, line: bytes, timeout: float) -> bytes:
    """Send one line to the Unix socket at `socket_path` and read one line back (at most
    MAX_ANSWER_BYTES + 1 bytes; the caller checks it is complete). Raises TimeoutError and OSError."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(socket_path)
        conn.sendall(line)
        with conn.makefile("rb") as reader:
            return reader.readline(MAX_ANSWER_BYTES + 1)


def _exchange(socket_path: str, request: dict[str, object], timeout: float) -> dict[str, object]:
    where = f"{SOCKET_ENV}={socket_path}"
    line = json.dumps({"protocol": PROTOCOL_VERSION, **request}, ensure_ascii=False).encode("utf-8", "surrogatepass") + b"\n"
    try:
        answer = round_trip(socket_path, line, timeout)
    except TimeoutError:
        raise HookError(f"{where}: no answer within {timeout:g} s") from None
    except OSError as error:
        raise HookError(f"{where}: cannot reach the memory server ({error.strerror or error})") from None
    if not answer.endswith(b"\n"):
        raise HookError(f"{where}: the server closed the connection without a complete answer")
    try:
        parsed = json.loads(answer)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HookError(f"{where}: the {request['op']} answer is not JSON") from None
    if not isinstance(parsed, dict) or parsed.get("protocol") != PROTOCOL_VERSION:
        raise HookError(f"{where}: the {request['op']} answer is not memory protocol {PROTOCOL_VERSION}")
    if parsed.get("ok") is not True:
        raise HookError(f"{where}: {request['op']} refused: {parsed.get('error')}: {parsed.get('message') or '(no message)'}")
    return parsed


def served_lanes(socket_path: str, timeout: float) -> tuple[str, ...]:
    """The served system's lanes, from its ping. Raises HookError."""
    lanes = _exchange(socket_path, {"op": "ping"}, timeout).get("lanes")
    if not isinstance(lanes, list) or not all(isinstance(lane, str) for lane in lanes):
        raise HookError(f"{SOCKET_ENV}={socket_path}: the ping answer has no list of lanes")
    return tuple(lanes)


def recall(socket_path: str, realm: str, query: str, k: int, lanes: Sequence[str] | None, timeout: float) -> tuple[ServedHit, ...]:
    """Recall through the server at `socket_path`, best first. Raises HookError."""
    request: dict[str, object] = {"op": "recall", "realm": realm, "query": query, "k": k,
                                  "lanes": None if lanes is None else list(lanes)}
    hits = _exchange(socket_path, request, timeout).get("hits")
    if not isinstance(hits, list) or not all(isinstance(h, dict) and isinstance(h.get("id"), str)
                                             and isinstance(h.get("text"), str) for h in hits):
        raise HookError(f"{SOCKET_ENV}={socket_path}: the recall answer's hits are not memories with an id and a text")
    return tuple(ServedHit(id=h["id"], text=h["text"]) for h in hits)
