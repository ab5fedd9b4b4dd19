"""A scripted OpenAI-compatible chat completions server on 127.0.0.1 (a thread), for agent tests.

It answers each `POST /v1/chat/completions` with the next scripted reply (a tool call or a final
answer, with usage), records every request body, and answers HTTP 500 once the script is spent.

    with ScriptedOpenAI([tool_call("read_file", path="a.py"), final("done")]) as server:
        agent = OpenAIChatAgent(server.base_url, model="scripted")
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
"""Usage reported with every scripted reply unless the reply names its own."""


def tool_call(name: str, usage: dict[str, int] | None = None, **arguments: Any) -> dict[str, Any]:
    """A scripted reply that calls tool `name` with `arguments`."""
    return {"tool_calls": [{"name": name, "arguments": arguments}], "usage": usage or USAGE}


def final(text: str, usage: dict[str, int] | None = None) -> dict[str, Any]:
    """A scripted reply that answers with `text` and calls no tool."""
    return {"content": text, "usage": usage or USAGE}


class ScriptedOpenAI:
    """Replays `replies` in order; `bodies` holds each request body (decoded JSON), `raw` the bytes."""

    def __init__(self, replies: Sequence[dict[str, Any]]) -> None:
        self.replies = list(replies)
        self.bodies: list[dict[str, Any]] = []
        self.raw: list[bytes] = []
        self.paths: list[str] = []
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def base_url(self) -> str:
        """The endpoint's base URL (ends in /v1)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}/v1"

    def __enter__(self) -> ScriptedOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def _next(self, raw: bytes, path: str) -> tuple[int, dict[str, Any]]:
        with self._lock:
            self.raw.append(raw)
            self.paths.append(path)
            self.bodies.append(json.loads(raw))
            index = len(self.bodies) - 1
            if path != "/v1/chat/completions":
                return 404, {"error": {"message": f"no route {path}"}}
            if index >= len(self.replies):
                return 500, {"error": {"message": f"script exhausted after {len(self.replies)} replies"}}
            reply = self.replies[index]
        message: dict[str, Any] = {"role": "assistant", "content": reply.get("content")}
        if reply.get("tool_calls"):
            message["tool_calls"] = [
                {"id": f"call_{index}_{n}", "type": "function",
                 "function": {"name": call["name"], "arguments": json.dumps(call["arguments"])}}
                for n, call in enumerate(reply["tool_calls"])
            ]
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        return 200, {
            "id": f"chatcmpl-{index}", "object": "chat.completion", "model": "scripted",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}], "usage": reply["usage"],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server naming)
                raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                status, payload = server._next(raw, self.path)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        return Handler
