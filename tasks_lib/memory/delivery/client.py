"""The memory server's client (see `server`, `protocol`): how the hook and the CLI reach a served replica.

Requests are built as protocol models (a bad argument is a MemoryInputError naming the field,
before anything is sent) and answers are validated against the verb's response model: an answer
outside the protocol is a MemoryServerError naming the field, a refusal is raised as the memory
error the server names (InvalidRealmError, MemoryInputError, ...), so a served replica fails the
way the store itself would.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TypeVar

from pydantic import ValidationError

from tasks_lib.memory import errors as memory_errors
from tasks_lib.memory.adapter import MemoryHit, MemoryItem
from tasks_lib.memory.delivery.protocol import (
    PROTOCOL_VERSION,
    ErrorResponse,
    ForgetRequest,
    IdsResponse,
    Message,
    PingRequest,
    PingResponse,
    RecallRequest,
    RecallResponse,
    RememberRequest,
    Request,
    encode,
    exchange,
    problems,
)
from tasks_lib.memory.env import SOCKET_ENV
from tasks_lib.memory.errors import MemoryInputError, MemoryServerError, MemoryStoreError

CLIENT_TIMEOUT_SECONDS = 30.0
"""Default seconds a client waits to connect and for each answer."""

ERRORS: dict[str, type[MemoryStoreError]] = {
    name: cls for name, cls in vars(memory_errors).items() if isinstance(cls, type) and issubclass(cls, MemoryStoreError)
}
"""The memory errors an ErrorResponse may name; another name is raised as MemoryServerError."""

R = TypeVar("R", bound=Message)


class MemoryClient:
    """Talks to a memory server over its socket; raises the same typed errors the store would."""

    def __init__(self, socket_path: Path | str, timeout: float = CLIENT_TIMEOUT_SECONDS) -> None:
        self.socket_path = str(socket_path)
        self.timeout = timeout

    def call(self, request: Request, response_model: type[R]) -> R:
        """Send one request, return its validated answer.

        Raises MemoryServerError when the server cannot be reached, times out or answers outside
        the protocol, and the named memory error (InvalidRealmError, MemoryInputError, ...) when
        the server refused the request.
        """
        answer = exchange(self.socket_path, encode(request), self.timeout)
        model: type[Message] = ErrorResponse if _refused(answer) else response_model
        try:
            parsed = model.model_validate_json(answer)
        except ValidationError as error:
            raise MemoryServerError(
                f"{SOCKET_ENV}={self.socket_path}: the server's {request.op} answer is outside memory protocol "
                f"{PROTOCOL_VERSION} ({problems(error)}); is it memtrial's memory server?"
            ) from None
        if isinstance(parsed, ErrorResponse):
            raise ERRORS.get(parsed.error, MemoryServerError)(parsed.message)
        return parsed  # type: ignore[return-value]

    def ping(self) -> PingResponse:
        """The server's pid, store, lanes and realms."""
        return self.call(PingRequest(op="ping"), PingResponse)

    def recall(self, realm: str, query: str, k: int = 5, lanes: Sequence[str] | None = None) -> tuple[MemoryHit, ...]:
        """Recall through the server (the server applies no switches; pass the active `lanes`)."""
        request = _request(RecallRequest, op="recall", realm=realm, query=query, k=k, lanes=None if lanes is None else tuple(lanes))
        return self.call(request, RecallResponse).hits

    def remember(self, realm: str, items: Sequence[MemoryItem | str]) -> tuple[str, ...]:
        """Store `items` through the server; return their ids."""
        return self.call(_request(RememberRequest, op="remember", realm=realm, items=tuple(items)), IdsResponse).ids

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        """Forget exactly `ids` through the server."""
        return self.call(_request(ForgetRequest, op="forget", ids=tuple(ids)), IdsResponse).ids


def _refused(answer: bytes) -> bool:
    """Whether an answer line says `"ok": false` (it is then validated as an ErrorResponse)."""
    try:
        data = json.loads(answer)
    except ValueError:
        return False
    return isinstance(data, dict) and data.get("ok") is False


def _request(model: type[R], **fields: object) -> R:
    """Build a request (strictly, see `protocol.Message`); an argument the protocol cannot carry is a MemoryInputError naming the field."""
    try:
        return model.model_validate(fields)
    except ValidationError as error:
        raise MemoryInputError(f"{fields['op']} request: {problems(error)}") from None
