"""The memory server's socket protocol: typed messages, one UTF-8 JSON object per line each way.

    PingRequest      {"op": "ping"}                                  -> PingResponse
    RecallRequest    {"op": "recall", "realm", "query", "k", "lanes"} -> RecallResponse
    RememberRequest  {"op": "remember", "realm", "items"}            -> IdsResponse
    ForgetRequest    {"op": "forget", "ids"}                         -> IdsResponse
    any refusal or failure                                           -> ErrorResponse

Every message carries `protocol` (PROTOCOL_VERSION; a request may leave it out). A request line is
at most MAX_REQUEST_BYTES, a response line at most MAX_RESPONSE_BYTES. Both ends validate strictly
with the models below (no unknown field, no type coercion outside the remembered items, which
MemoryItem's own rules check): the server answers a malformed request with an ErrorResponse naming
the field (see `server`), the client refuses a malformed answer naming the field (see `client`).
`exchange` is the one round trip both the client and the server's start-up ping use.
"""

from __future__ import annotations

import json
from typing import Any, Final, Literal

from pydantic import ConfigDict, Field, ValidationError, field_validator
from pydantic_core import PydanticSerializationError

from tasks_lib.contracts import ContractModel, violations_of
from tasks_lib.memory.adapter import MemoryHit, MemoryItem
from tasks_lib.memory.delivery.socket_recall import MAX_ANSWER_BYTES, round_trip
from tasks_lib.memory.env import SOCKET_ENV
from tasks_lib.memory.errors import MemoryInputError, MemoryServerError, UnreadableRequestError

PROTOCOL_VERSION: Final = 1
"""Version of this protocol; a message naming another version is refused."""
MAX_REQUEST_BYTES = 4 * 1024 * 1024
"""Longest request line accepted (a large remember batch fits); a longer one is refused and the connection closed."""
MAX_RESPONSE_BYTES = MAX_ANSWER_BYTES
"""Longest response line a client accepts."""


class Message(ContractModel):
    """Fields every request and response carries; every message is validated strictly (no type coercion)."""

    model_config = ConfigDict(strict=True)

    protocol: Literal[1] = PROTOCOL_VERSION
    """Version of the protocol the sender speaks."""

    @field_validator("protocol", mode="before")
    @classmethod
    def _known_protocol(cls, value: object) -> object:
        if value != PROTOCOL_VERSION or isinstance(value, bool):
            raise ValueError(f"{value!r} is not supported; this memtrial speaks memory protocol {PROTOCOL_VERSION}")
        return value


class PingRequest(Message):
    """Ask who is serving, and what."""

    op: Literal["ping"]
    """The verb."""


class RecallRequest(Message):
    """Recall from one realm; the server applies no switch, so the hook sends only the active lanes."""

    op: Literal["recall"]
    """The verb."""
    realm: str
    """The realm to recall from (validated by the store)."""
    query: str
    """The query text (validated by the store)."""
    k: int = 5
    """Most hits wanted (validated by the store)."""
    lanes: tuple[str, ...] | None = None
    """Lanes to search; null for every lane of the served system."""


class RememberRequest(Message):
    """Store memories in one realm."""

    op: Literal["remember"]
    """The verb."""
    realm: str
    """The realm to store into (validated by the store)."""
    items: tuple[MemoryItem, ...] = Field(strict=False)  # a bare text becomes an item first; MemoryItem checks the rest
    """The memories; a bare string on the wire is a memory of that text."""

    @field_validator("items", mode="before")
    @classmethod
    def _texts_are_items(cls, value: object) -> object:
        if isinstance(value, (list, tuple)):
            return [{"text": item} if isinstance(item, str) else item for item in value]
        return value


class ForgetRequest(Message):
    """Forget exactly these memories."""

    op: Literal["forget"]
    """The verb."""
    ids: tuple[str, ...]
    """Ids of the memories to forget (checked by the store)."""


Request = PingRequest | RecallRequest | RememberRequest | ForgetRequest
REQUESTS: dict[str, type[Request]] = {"ping": PingRequest, "recall": RecallRequest, "remember": RememberRequest, "forget": ForgetRequest}
"""The request model of each verb."""


class PingResponse(Message):
    """Answer to ping."""

    ok: Literal[True] = True
    """The request was served."""
    pid: int
    """PID of the server process."""
    store: str
    """What is served: the replica file, or `<system> at <data folder>`."""
    lanes: tuple[str, ...]
    """Lanes of the served system (the hook drops the ablated ones from these)."""
    realms: tuple[str, ...]
    """Realms the served store holds."""
    read_only: bool
    """Whether remember and forget are refused."""

    def __getitem__(self, field: str) -> Any:
        """`ping()["lanes"]`: read a field by name, for callers written before the protocol was typed."""
        return getattr(self, field)


class RecallResponse(Message):
    """Answer to recall."""

    ok: Literal[True] = True
    """The request was served."""
    hits: tuple[MemoryHit, ...]
    """The recalled memories, best first."""


class IdsResponse(Message):
    """Answer to remember (the new ids) and forget (the forgotten ids)."""

    ok: Literal[True] = True
    """The request was served."""
    ids: tuple[str, ...]
    """Memory ids, in request order."""


class ErrorResponse(Message):
    """Answer to a request that was refused or failed."""

    ok: Literal[False] = False
    """The request was not served."""
    error: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Class name of the memory error (MemoryInputError, UnknownRealmError, ...); the client raises that class."""
    message: str
    """One line naming the field and the fix."""


def problems(error: ValidationError) -> str:
    """Every problem of a validation error on one line, each naming its field as `items[0].text`."""
    parts = []
    for item, violation in zip(error.errors(), violations_of(error, "")):
        field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in item["loc"]).lstrip(".")
        parts.append(f"{field}: {violation.problem}" if field else violation.problem)
    return "; ".join(parts)


def parse_op(line: bytes) -> object:
    """The `op` of one request line, as sent. Raises UnreadableRequestError when the line is not a UTF-8 JSON object."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError:
        raise UnreadableRequestError("request: not UTF-8; send UTF-8 JSON lines") from None
    except json.JSONDecodeError as error:
        raise UnreadableRequestError(f"request: not JSON ({error.msg}); send one JSON object per line") from None
    if not isinstance(data, dict):
        raise UnreadableRequestError("request: must be a JSON object with an 'op' field")
    return data.get("op")


def parse_request(op: object, line: bytes) -> Request:
    """Validate one request line of verb `op` (see `parse_op`), strictly. Raises MemoryInputError naming the field."""
    model = REQUESTS.get(op) if isinstance(op, str) else None
    if model is None:
        raise MemoryInputError(f"op: {op!r} is not one of {', '.join(REQUESTS)}")
    try:
        return model.model_validate_json(line)
    except ValidationError as error:
        raise MemoryInputError(f"{op} request: {problems(error)}") from None


def encode(message: Message) -> bytes:
    """One message as a compact JSON line. Raises MemoryInputError when it holds text that is not valid UTF-8."""
    try:
        return message.model_dump_json().encode("utf-8") + b"\n"
    except PydanticSerializationError:
        raise MemoryInputError(f"{type(message).__name__}: holds text that is not valid UTF-8 (a lone surrogate); re-encode it") from None


def exchange(socket_path: str, line: bytes, timeout: float) -> bytes:
    """Send one request line to the server at `socket_path` and return its answer line.

    Raises MemoryServerError when no server listens there, it does not answer within `timeout`
    seconds, or it closes the connection without a complete line.
    """
    where = f"{SOCKET_ENV}={socket_path}"
    try:
        answer = round_trip(socket_path, line, timeout)
    except (FileNotFoundError, ConnectionRefusedError) as error:
        raise MemoryServerError(f"{where}: no memory server is listening ({error.strerror}); start one with 'memtrial memory serve'") from None
    except TimeoutError:
        raise MemoryServerError(f"{where}: no answer within {timeout:g} s; check the server log") from None
    except OSError as error:
        raise MemoryServerError(f"{where}: cannot talk to the memory server ({error})") from None
    if not answer.endswith(b"\n"):
        raise MemoryServerError(f"{where}: the server closed the connection without a complete answer")
    return answer
