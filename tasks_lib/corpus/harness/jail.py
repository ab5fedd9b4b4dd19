"""The judge's side of the jail (standard library only): post-turn tests reach the code under test here.

A judged-apart post-turn test never imports the code it judges. It asks the jail, a process of
the attempt's uid in the attempt's view, through the judge's relay (the Unix socket named by
`JAIL_SOCKET`, private to the judge):

    from jail import call, new, get, value, recorder, const, clock, run, JailError
    status = call("logship.cli:main", ["send", ...], stderr=new("io:StringIO"))
    texts = new("builtins:list"); call("alertfan.dispatch:dispatch", alert, routes, {"sms": get(texts, "append")})
    value(texts)                     # a handle's JSON value
    path = folder()                  # a folder of the scratch both sides see (tempfile's are 0700)
    run(["sh", "/workspace/certwatch.sh", "hosts.txt"])  # (status, stdout, stderr) of a jailed command
    call("src/slug.js:slugify", "Crème")  # a Node task's jail (harness/shim.cjs): a workspace path

A result that is a JSON value comes back as that value; anything else stays in the jail as a
`Handle` (pass it back as an argument, `get` its attributes, `call` it). An exception in the jail
raises `JailError` with its type name and message. Nothing from the jail is unpickled or
evaluated: answers are JSON, and only compared with expected values the jail never sees.
"""

from __future__ import annotations

import json
import os
import socket
from typing import cast

WORKSPACE = os.environ.get("JAIL_WORKSPACE", "/workspace")
"""Where the jail sees the workspace."""
MAX_ANSWER = 8 << 20
"""Bytes of one answer read; a longer one is an error."""


class JailError(Exception):
    """The code under test raised (or the jail refused) a request."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message


class Handle:
    """An object kept in the jail, named by its id."""

    def __init__(self, ident: int, kind: str) -> None:
        self.ident = ident
        self.kind = kind

    def __repr__(self) -> str:
        return f"<jail {self.kind} #{self.ident}>"


_connection: socket.socket | None = None
_reader = None


def _ask(request: dict[str, object]) -> dict[str, object]:
    global _connection, _reader
    if _connection is None:
        _connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        _connection.connect(os.environ["JAIL_SOCKET"])
        _reader = _connection.makefile("rb")
    _connection.sendall(json.dumps(request).encode() + b"\n")
    line = _reader.readline(MAX_ANSWER + 1)  # type: ignore[union-attr]
    if not line.endswith(b"\n"):
        raise JailError("JailBroken", "the jail closed the channel or answered past the size limit")
    answer = json.loads(line)
    if not isinstance(answer, dict):
        raise JailError("JailBroken", "the jail's answer is not an object")
    return answer


def _encode(value: object) -> object:
    if isinstance(value, Handle):
        return {"$handle": value.ident}
    if isinstance(value, dict):
        return {str(k): _encode(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"a {type(value).__name__} cannot be sent to the jail (JSON values and handles only)")


def _result(answer: dict[str, object]) -> object:
    if "error" in answer:
        raise JailError(str(answer["error"]), str(answer.get("message", "")))
    if "handle" in answer:
        return Handle(int(cast("int", answer["handle"])), str(answer.get("type", "object")))
    return answer.get("value")


def call(target: str | Handle, *args: object, **kwargs: object) -> object:
    """Call `"module:attr.path"` (imported in the jail) or a handle with JSON values and handles."""
    return _result(_ask({"op": "call", "target": _encode(target), "args": _encode(list(args)), "kwargs": _encode(kwargs)}))


def new(target: str | Handle, *args: object, **kwargs: object) -> Handle:
    """Construct an object in the jail and keep it there: `new("io:StringIO")` is always a handle
    (the Node jail constructs with JS `new`: `new("lib/client.js:Client", {...})`)."""
    answer = _ask({"op": "call", "target": _encode(target), "args": _encode(list(args)), "kwargs": _encode(kwargs), "keep": True,
                   "new": True})
    return _result(answer)  # type: ignore[return-value]


def call_printing(target: str | Handle, *args: object, **kwargs: object) -> tuple[object, str]:
    """`call`, also returning what the call printed to its stdout."""
    answer = _ask({"op": "call", "target": _encode(target), "args": _encode(list(args)), "kwargs": _encode(kwargs), "stdout": True})
    return _result(answer), str(answer.get("stdout", ""))


def get(target: str | Handle, attr: str = "") -> object:
    """Attribute `attr` of a jailed object, or `"module:attr.path"` itself (`get("datetime:timezone.utc")`)."""
    return _result(_ask({"op": "get", "target": _encode(target), "attr": attr}))


def folder() -> str:
    """A fresh folder of the scratch the jail shares, which the jail can read and write."""
    import tempfile  # noqa: PLC0415 (only a test that writes files pays for it)

    path = tempfile.mkdtemp(dir=os.environ.get("TMPDIR"))
    os.chmod(path, 0o777)
    return path


def value(handle: object) -> object:
    """A jailed object's JSON value (a recorder's calls); a JSON value is returned as it is."""
    if not isinstance(handle, Handle):
        return handle
    return _result(_ask({"op": "value", "target": _encode(handle)}))


def recorder(returns: object = None, clock: Handle | None = None) -> Handle:
    """A jailed object that records every method call made on it (`value` gives the calls). Node
    jail only: each method returns `returns`, and with a `clock()` each call records its time `at`."""
    request: dict[str, object] = {"op": "recorder"}
    if returns is not None:
        request["returns"] = _encode(returns)
    if clock is not None:
        request["clock"] = _encode(clock)
    return _result(_ask(request))  # type: ignore[return-value]


def clock(start: float = 0) -> Handle:
    """Node jail only: a virtual clock, `now()` its milliseconds, `sleep(ms)` advances it, `date()` a Date."""
    return _result(_ask({"op": "clock", "start": start}))  # type: ignore[return-value]


def const(result: object) -> Handle:
    """A jailed callable that returns `result` (a fixed clock)."""
    return _result(_ask({"op": "const", "value": _encode(result)}))  # type: ignore[return-value]


def run(argv: list[str], *, cwd: str | None = None, stdin: str = "", timeout: float = 60) -> tuple[int, str, str]:
    """Run a command in the jail; cwd: the judge's current folder when the jail shares it, else the workspace."""
    here = os.getcwd()
    shared = here.startswith(os.environ.get("JAIL_SCRATCH", "/scratch") + os.sep)
    answer = _ask({"op": "run", "argv": [str(a) for a in argv], "cwd": cwd or (here if shared else WORKSPACE), "stdin": stdin, "timeout": timeout})
    if "error" in answer:
        raise JailError(str(answer["error"]), str(answer.get("message", "")))
    status = answer.get("status")
    return (status if isinstance(status, int) else 126), str(answer.get("stdout", "")), str(answer.get("stderr", ""))
