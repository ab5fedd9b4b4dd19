"""The jail's shim: serves the judge's requests on the code under test (standard library only).

Usage: `python3 -I -B shim.py`, with the workspace as cwd, in the attempt's sandbox (the attempt's
uid, the workspace, a scratch folder shared with the judge; never the post-turn tests, the nonce
or the judge's result channel). It reads one JSON request per line on stdin and answers one JSON
line on stdout; everything the code under test prints goes to stderr (the protocol's descriptors
are moved away first, so a print cannot break a line).

Requests (`op`):
- `call`: `target` is `"module:attr.path"` (the module imported from the workspace) or a handle;
  `args`/`kwargs` are JSON values or `{"$handle": id}`; `stdout: true` captures what the call
  prints; `keep: true` answers a handle whatever the result (`jail.new`). Answers `{"value": v}` for a JSON value (tuples and sets become lists), `{"handle": id,
  "type": name}` for anything else (kept here), or `{"error": type, "message": text}`.
- `get`: attribute `attr` of `target` (a handle or `"module:attr.path"`; without `attr`, the
  target itself); answered as `call`.
- `value`: handle `target` as a JSON value when it is one (`{"error": ...}` otherwise).
- `recorder`: a new object whose every method records its call (name, args, kwargs) and returns
  None; `value` of it gives the calls (a non-JSON argument as its repr). `const`: a callable returning `value` (a clock, a factory).
- `run`: one command (`argv`, `cwd` inside the shared scratch folder or the workspace, `stdin`
  text, `timeout`): answers `{"status": code, "stdout": text, "stderr": text}`.

Nothing the shim answers is trusted by the judge beyond being JSON: the judge compares it with
expected values the jail never sees.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import subprocess
import sys
from typing import Any, cast

MAX_TEXT = 1 << 20
"""Characters of a command's stdout or stderr answered."""


class Recorder:
    """Records every method call made on it."""

    def __init__(self) -> None:
        self.calls: list[dict[str, object]] = []

    def __getattr__(self, name: str):  # noqa: ANN204 (any method name)
        if name.startswith("__"):
            raise AttributeError(name)

        def record(*args: object, **kwargs: object) -> None:
            self.calls.append({"name": name, "args": list(args), "kwargs": kwargs})
        return record


class Const:
    """A callable that returns the same value."""

    def __init__(self, value: object) -> None:
        self.value = value

    def __call__(self, *args: object, **kwargs: object) -> object:
        return self.value


class Shim:
    """The handles kept for the judge, and the request handlers."""

    def __init__(self) -> None:
        self.handles: dict[int, object] = {}

    def keep(self, obj: object) -> dict[str, object]:
        ident = len(self.handles) + 1
        self.handles[ident] = obj
        return {"handle": ident, "type": type(obj).__name__}

    def decode(self, value: object) -> object:
        if isinstance(value, dict):
            if set(value) == {"$handle"}:
                return self.handles[int(value["$handle"])]
            return {k: self.decode(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.decode(v) for v in value]
        return value

    def answer(self, obj: object) -> dict[str, object]:
        plain = _plain(obj)
        return {"value": plain[1]} if plain[0] else self.keep(obj)

    def target(self, name: object) -> object:
        if isinstance(name, dict):
            return self.decode(name)
        module_name, _, path = str(name).partition(":")
        obj: object = importlib.import_module(module_name)
        for part in filter(None, path.split(".")):
            obj = getattr(obj, part)
        return obj

    def handle(self, request: dict[str, object]) -> dict[str, object]:
        op = request.get("op")
        if op == "call":
            function = cast("Any", self.target(request["target"]))  # whatever the task's module holds
            args = cast("list[object]", self.decode(request.get("args") or []))
            kwargs = cast("dict[str, object]", self.decode(request.get("kwargs") or {}))
            if request.get("stdout"):
                buffer = io.StringIO()
                with contextlib.redirect_stdout(buffer):
                    result = function(*args, **kwargs)
                return {**self.answer(result), "stdout": buffer.getvalue()}
            result = function(*args, **kwargs)
            return self.keep(result) if request.get("keep") else self.answer(result)
        if op == "get":
            obj = self.target(request["target"])
            return self.answer(getattr(obj, str(request["attr"])) if request.get("attr") else obj)
        if op == "value":
            obj = self.target(request["target"])
            if isinstance(obj, Recorder):
                return {"value": [_loose(call) for call in obj.calls]}
            plain = _plain(obj)
            return {"value": plain[1]} if plain[0] else {"error": "TypeError", "message": f"a {type(obj).__name__} is not a JSON value"}
        if op == "recorder":
            return self.keep(Recorder())
        if op == "const":
            return self.keep(Const(self.decode(request.get("value"))))
        if op == "run":
            return _run(request)
        return {"error": "ValueError", "message": f"unknown op {op!r}"}


def _plain(obj: object, depth: int = 0) -> tuple[bool, object]:
    """(True, the JSON form) when `obj` is made of JSON values (tuples and sets as lists)."""
    if depth > 50:
        return False, None
    if obj is None or type(obj) in (bool, int, float, str):
        return True, obj
    if isinstance(obj, list | tuple | set | frozenset) and type(obj) in (list, tuple, set, frozenset):
        items = sorted(obj, key=repr) if isinstance(obj, set | frozenset) else obj
        out = [_plain(item, depth + 1) for item in items]
        return all(ok for ok, _ in out), [v for _, v in out]
    if isinstance(obj, dict) and type(obj) is dict and all(type(k) is str for k in obj):
        out2 = {k: _plain(v, depth + 1) for k, v in obj.items()}
        return all(ok for ok, _ in out2.values()), {k: v for k, (_, v) in out2.items()}
    return False, None


def _loose(obj: object) -> object:
    """A recorded call as JSON: JSON values as they are, anything else as its repr."""
    if isinstance(obj, dict):
        return {str(k): _loose(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_loose(v) for v in obj]
    plain = _plain(obj)
    return plain[1] if plain[0] else repr(obj)


def _run(request: dict[str, object]) -> dict[str, object]:
    """Run one command line in the jail; its status and output."""
    argv = [str(a) for a in cast("list[object]", request.get("argv") or [])]
    if not argv:
        return {"error": "ValueError", "message": "run needs an argv"}
    try:
        done = subprocess.run(argv, cwd=str(request.get("cwd") or "."), input=str(request.get("stdin") or "").encode(),
                              capture_output=True, timeout=float(cast("float", request.get("timeout") or 60)), check=False)
    except subprocess.TimeoutExpired:
        return {"status": 124, "stdout": "", "stderr": "[jail: timed out]"}
    except OSError as error:
        return {"status": 127, "stdout": "", "stderr": f"[jail: {error}]"}
    return {"status": done.returncode, "stdout": done.stdout.decode("utf-8", "replace")[:MAX_TEXT],
            "stderr": done.stderr.decode("utf-8", "replace")[:MAX_TEXT]}


def main() -> int:
    """Serve requests until stdin closes."""
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    answers = os.fdopen(os.dup(1), "w", encoding="utf-8")
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(2, 1)
    sys.path.insert(0, os.getcwd())
    shim = Shim()
    for line in requests:
        try:
            reply = shim.handle(json.loads(line))
        except BaseException as error:  # noqa: BLE001 (the code under test may raise anything, even SystemExit)
            reply = {"error": type(error).__name__, "message": str(error)[:2000]}
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as error:
            text = json.dumps({"error": "TypeError", "message": f"answer is not JSON: {error}"})
        answers.write(text + "\n")
        answers.flush()
    return 0


if __name__ == "__main__":
    code = main()
    for stream in (sys.stdout, sys.stderr):  # what the code under test printed, before the hard exit
        with contextlib.suppress(Exception):
            stream.flush()
    os._exit(code)  # a thread the code under test left running cannot keep the jail, and so the verifier's status, waiting
