"""A scripted Anthropic Messages API server on 127.0.0.1, for driving a real agent CLI offline.

`ScriptedAnthropic` listens on 127.0.0.1 (port 0, so the OS picks a free port) in a thread and
answers `POST /v1/messages`, streamed as server-sent events when the request asks for `stream`
and as one JSON message otherwise. Every request is recorded (method, path, headers, decoded JSON
body) so a test can check what reached the model, e.g. whether a memory block's provenance marker
was in a request body.

Requests are told apart by whether they carry tools:

- a *conversation* request (the body has a non-empty `tools` list: the agent's own turn) takes
  the next `Turn` of the script, in order; past the end of the script it gets a final text turn
  saying so, and `exhausted` counts it, so a test can fail on an agent that asked for more turns
  than were scripted;
- a *side* request (no tools: title or topic generation, a quota probe) gets a short text reply
  and does not consume the script.

With the CLI's non-essential traffic switched off (see `tasks_lib.agents.claude_code.QUIET_ENV`),
Claude Code 2.1.332 makes conversation requests only (`POST /v1/messages?beta=true`, streamed),
and no other connection at all (checked with strace); side requests are still answered in case a
later version makes them. Every other path answers 404 with an Anthropic-shaped error and is recorded too. Token usage of
every reply is summed in `usage_served`, so a test can compare it with what the agent reported.
"""

from __future__ import annotations

import itertools
import json
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Usage:
    """Token usage the server reports for one reply."""

    input_tokens: int
    output_tokens: int
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0

    def as_json(self) -> dict[str, int]:
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cache_creation_input_tokens": self.cache_creation_input_tokens,
            "cache_read_input_tokens": self.cache_read_input_tokens,
        }


@dataclass(frozen=True)
class Text:
    """A text content block."""

    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool_use content block: the agent calls `name` with `input`."""

    name: str
    input: dict[str, Any]
    id: str = ""


Block = Text | ToolUse


@dataclass(frozen=True)
class Turn:
    """One scripted assistant reply to a conversation request."""

    blocks: tuple[Block, ...]
    usage: Usage = Usage(input_tokens=100, output_tokens=20)

    @property
    def stop_reason(self) -> str:
        return "tool_use" if any(isinstance(b, ToolUse) for b in self.blocks) else "end_turn"


SIDE_USAGE = Usage(input_tokens=7, output_tokens=3)
"""Usage reported for a side request's reply."""


@dataclass
class Recorded:
    """One request as the server received it."""

    method: str
    path: str
    headers: dict[str, str]
    body: Any
    """The decoded JSON body (None when empty, the raw text when not JSON)."""
    raw: str
    """The body as text."""
    role: str = "other"
    """`conversation`, `side` or `other` (a path the server does not script)."""


@dataclass
class _State:
    turns: tuple[Turn, ...]
    model: str
    side_text: str
    lock: threading.Lock = field(default_factory=threading.Lock)
    requests: list[Recorded] = field(default_factory=list)
    next_turn: int = 0
    exhausted: int = 0
    served: dict[str, int] = field(default_factory=lambda: {"input_tokens": 0, "output_tokens": 0,
                                                             "cache_creation_input_tokens": 0,
                                                             "cache_read_input_tokens": 0})
    served_by_model: dict[str, dict[str, int]] = field(default_factory=dict)
    ids: Iterator[int] = field(default_factory=lambda: itertools.count(1))


def _blocks_json(turn: Turn, ids: Iterator[int]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for block in turn.blocks:
        if isinstance(block, Text):
            out.append({"type": "text", "text": block.text})
        else:
            out.append({"type": "tool_use", "id": block.id or f"toolu_scripted{next(ids):04d}", "name": block.name,
                        "input": block.input})
    return out


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


class _Handler(BaseHTTPRequestHandler):
    server_version = "scripted-anthropic/1"
    protocol_version = "HTTP/1.1"

    @property
    def state(self) -> _State:
        return self.server.state  # type: ignore[attr-defined]

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - quiet
        return

    def _read_body(self) -> tuple[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length).decode("utf-8", "replace") if length else ""
        if not raw:
            return raw, None
        try:
            return raw, json.loads(raw)
        except json.JSONDecodeError:
            return raw, raw

    def _record(self, role: str) -> Recorded:
        raw, body = self._read_body()
        rec = Recorded(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body, raw, role)
        with self.state.lock:
            self.state.requests.append(rec)
        return rec

    def _send_json(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_scripted")
        self.end_headers()
        self.wfile.write(data)

    def _not_found(self) -> None:
        self._record("other")
        self._send_json(404, {"type": "error", "error": {"type": "not_found_error", "message": f"scripted server does not serve {self.path}"}})

    do_GET = do_PUT = do_DELETE = do_PATCH = _not_found

    def do_HEAD(self) -> None:
        self._record("other")
        self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0]
        if path != "/v1/messages":
            self._not_found()
            return
        rec = self._record("other")
        body = rec.body if isinstance(rec.body, dict) else {}
        state = self.state
        with state.lock:
            if body.get("tools"):
                rec.role = "conversation"
                if state.next_turn < len(state.turns):
                    turn = state.turns[state.next_turn]
                    state.next_turn += 1
                else:
                    state.exhausted += 1
                    turn = Turn((Text("The scripted server has no more turns."),))
            else:
                rec.role = "side"
                turn = Turn((Text(state.side_text),), SIDE_USAGE)
            model = str(body.get("model") or state.model)
            for key, value in turn.usage.as_json().items():
                state.served[key] += value
                per_model = state.served_by_model.setdefault(model, dict.fromkeys(state.served, 0))
                per_model[key] += value
            content = _blocks_json(turn, state.ids)
            message_id = f"msg_scripted{next(state.ids):04d}"
        if body.get("stream"):
            self._stream(message_id, model, turn, content)
        else:
            self._send_json(200, {"id": message_id, "type": "message", "role": "assistant", "model": model,
                                  "content": content, "stop_reason": turn.stop_reason, "stop_sequence": None,
                                  "usage": turn.usage.as_json()})

    def _stream(self, message_id: str, model: str, turn: Turn, content: list[dict[str, Any]]) -> None:
        usage = turn.usage.as_json()
        start_usage = {**usage, "output_tokens": 1}
        chunks = [_sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model, "content": [],
            "stop_reason": None, "stop_sequence": None, "usage": start_usage}})]
        for index, block in enumerate(content):
            if block["type"] == "text":
                chunks.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                           "content_block": {"type": "text", "text": ""}}))
                chunks.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "text_delta", "text": block["text"]}}))
            else:
                chunks.append(_sse("content_block_start", {"type": "content_block_start", "index": index,
                                                           "content_block": {"type": "tool_use", "id": block["id"],
                                                                             "name": block["name"], "input": {}}}))
                chunks.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index,
                                                           "delta": {"type": "input_json_delta",
                                                                     "partial_json": json.dumps(block["input"])}}))
            chunks.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        chunks.append(_sse("message_delta", {"type": "message_delta",
                                             "delta": {"stop_reason": turn.stop_reason, "stop_sequence": None},
                                             "usage": {"output_tokens": usage["output_tokens"]}}))
        chunks.append(_sse("message_stop", {"type": "message_stop"}))
        data = b"".join(chunks)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("request-id", "req_scripted")
        self.end_headers()
        self.wfile.write(data)


class ScriptedAnthropic:
    """The scripted server; use as a context manager (stopped on exit) or call `start`/`stop`."""

    def __init__(self, turns: Sequence[Turn], *, model: str = "claude-sonnet-4-5", side_text: str = "Scripted side reply.") -> None:
        self._state = _State(turns=tuple(turns), model=model, side_text=side_text)
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> ScriptedAnthropic:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        server.daemon_threads = True
        server.state = self._state  # type: ignore[attr-defined]
        self._server = server
        self._thread = threading.Thread(target=server.serve_forever, name="scripted-anthropic", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(10)
        self._server = self._thread = None

    def __enter__(self) -> ScriptedAnthropic:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL for ANTHROPIC_BASE_URL."""
        assert self._server is not None, "server not started"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def requests(self) -> list[Recorded]:
        with self._state.lock:
            return list(self._state.requests)

    @property
    def turns_served(self) -> int:
        """Scripted turns handed out so far."""
        with self._state.lock:
            return self._state.next_turn

    @property
    def exhausted(self) -> int:
        """Conversation requests that came after the script ran out."""
        with self._state.lock:
            return self._state.exhausted

    @property
    def usage_served(self) -> dict[str, int]:
        """Token usage summed over every reply sent."""
        with self._state.lock:
            return dict(self._state.served)

    @property
    def usage_by_model(self) -> dict[str, dict[str, int]]:
        """Token usage summed per requested model."""
        with self._state.lock:
            return {k: dict(v) for k, v in self._state.served_by_model.items()}
