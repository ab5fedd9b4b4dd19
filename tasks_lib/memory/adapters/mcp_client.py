"""A small, generic Model Context Protocol (MCP) client over stdio, with timeouts and clean shutdown.

`McpStdioClient` starts a server process, speaks JSON-RPC 2.0 over its stdin/stdout (one JSON
message per line, as the MCP stdio transport says), performs the `initialize` handshake, and
offers `list_tools` and `call_tool`. Every request has a timeout. The server runs in its own
process group; `close` ends it by closing stdin, then signalling the group (whose id is the
server's PID) with SIGTERM and SIGKILL, so no process outlives the client. A client that is
garbage-collected or still open at interpreter exit is closed the same way.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import subprocess
import threading
import weakref
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks_lib.memory.errors import MemoryStoreError

PROTOCOL_VERSION = "2025-06-18"
"""The MCP protocol revision this client asks for in `initialize`."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a request (including `initialize`) may take before McpTimeoutError."""

SHUTDOWN_GRACE = 2.0
"""Seconds the server gets to exit after stdin is closed, and again after SIGTERM."""

STDERR_TAIL_LINES = 40
"""Lines of the server's stderr kept for error messages."""
EXIT_GRACE_SECONDS = 2.0
"""How long to wait for a server whose stdout closed to report its exit code."""


class McpError(MemoryStoreError):
    """Base class for errors of the MCP stdio client."""


class McpStartError(McpError):
    """The server command could not be started (missing executable, bad working directory)."""


class McpTimeoutError(McpError):
    """A request got no response within its timeout; the server is stopped."""


class McpServerExitedError(McpError):
    """The server process exited (or closed stdout) while the client still needed it."""


class McpProtocolError(McpError):
    """The server answered with a JSON-RPC error or with a message that is not JSON-RPC 2.0."""

    def __init__(self, message: str, code: int | None = None) -> None:
        super().__init__(message)
        self.code = code
        """The JSON-RPC error code, when the server sent one."""


class McpToolError(McpError):
    """A tool call returned `isError: true`; the message is the tool's own text."""


def _stop_process(process: subprocess.Popen[bytes], grace: float) -> None:
    """End `process` and its process group: close stdin, wait, SIGTERM, wait, SIGKILL; reap it."""
    if process.stdin is not None and not process.stdin.closed:
        try:
            process.stdin.close()
        except OSError:
            pass
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig is not None:
            try:
                os.killpg(process.pid, sig)  # the group id is the server's PID (start_new_session)
            except ProcessLookupError:
                pass
        try:
            process.wait(grace)
            break
        except subprocess.TimeoutExpired:
            continue
    try:  # anything the server started in its group goes too
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


class _Wire:
    """The process and what its reader threads collect; holds no reference to the client."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process
        self.cond = threading.Condition()
        self.responses: dict[int, dict[str, Any]] = {}
        self.stderr: deque[str] = deque(maxlen=STDERR_TAIL_LINES)
        self.eof = False
        threading.Thread(target=self.read_stdout, name=f"mcp-stdout-{process.pid}", daemon=True).start()
        threading.Thread(target=self.read_stderr, name=f"mcp-stderr-{process.pid}", daemon=True).start()

    def read_stdout(self) -> None:
        assert self.process.stdout is not None
        try:
            for raw in self.process.stdout:
                line = raw.strip()
                if not line:
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    self.stderr.append(f"[non-JSON on stdout] {line[:200]!r}")
                    continue
                if isinstance(message, dict) and isinstance(message.get("id"), int) and ("result" in message or "error" in message):
                    with self.cond:
                        self.responses[message["id"]] = message
                        self.cond.notify_all()
                # Notifications and server-to-client requests are not used by this client; ignored.
        except (OSError, ValueError) as error:
            self.stderr.append(f"[stdout read failed] {error}")
        finally:
            with self.cond:
                self.eof = True
                self.cond.notify_all()

    def read_stderr(self) -> None:
        assert self.process.stderr is not None
        try:
            for raw in self.process.stderr:
                self.stderr.append(raw.decode("utf-8", "replace").rstrip())
        except (OSError, ValueError):
            pass


_OPEN: weakref.WeakSet[McpStdioClient] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for client in list(_OPEN):
        client.close()


class McpStdioClient:
    """One MCP server process and a JSON-RPC 2.0 session with it over stdio.

    Use as a context manager, or call `close`. Raises McpStartError when the command cannot run,
    McpTimeoutError / McpServerExitedError / McpProtocolError from `initialize` and requests.
    """

    def __init__(
        self,
        command: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        name: str = "mcp server",
    ) -> None:
        """Start `command` (no shell) with `env` (default: this process's) and run `initialize`."""
        self.name = name
        """A label for error messages."""
        self.timeout = timeout
        """Default seconds per request."""
        self.server_info: dict[str, Any] = {}
        """The server's `serverInfo` from `initialize`."""
        self.capabilities: dict[str, Any] = {}
        """The server's `capabilities` from `initialize`."""
        self._next_id = 1
        self._id_lock = threading.Lock()
        try:
            self._process = subprocess.Popen(
                list(command),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=dict(env) if env is not None else None,
                cwd=cwd,
                start_new_session=True,
            )
        except OSError as error:
            raise McpStartError(f"{name}: cannot start {list(command)!r} ({error.strerror or error}); check the command and PATH") from None
        self.pid: int = self._process.pid
        """The server's process id (also its process group id)."""
        self._wire = _Wire(self._process)
        self._finalizer = weakref.finalize(self, _stop_process, self._process, SHUTDOWN_GRACE)
        _OPEN.add(self)
        try:
            self._initialize()
        except BaseException:
            self.close()
            raise

    def stderr_tail(self) -> str:
        """The last lines the server wrote to stderr, joined (for error messages)."""
        return "\n".join(self._wire.stderr)

    def _exited(self) -> McpServerExitedError:
        try:  # stdout closes a moment before the process is reaped; give it that moment
            code: int | None = self._process.wait(timeout=EXIT_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            code = None
        status = f"exited with code {code}" if code is not None else "closed its stdout"
        tail = self.stderr_tail()
        return McpServerExitedError(f"{self.name} (pid {self.pid}) {status}" + (f"; its stderr ends:\n{tail}" if tail else ""))

    # ------------------------------------------------------------------ JSON-RPC

    def _send(self, message: dict[str, Any]) -> None:
        data = (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")
        stdin = self._process.stdin
        if stdin is None or stdin.closed:
            raise McpServerExitedError(f"{self.name} (pid {self.pid}) is closed; open a new client")
        try:
            stdin.write(data)
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise self._exited() from None

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        """Send a JSON-RPC notification (no response expected)."""
        message: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._send(message)

    def request(self, method: str, params: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Send a request and return its `result`.

        Raises McpTimeoutError (and stops the server: its state is unknown after a lost reply),
        McpServerExitedError, and McpProtocolError for a JSON-RPC error response.
        """
        with self._id_lock:
            request_id = self._next_id
            self._next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            message["params"] = dict(params)
        self._send(message)
        limit = self.timeout if timeout is None else timeout
        wire = self._wire
        with wire.cond:
            answered = wire.cond.wait_for(lambda: request_id in wire.responses or wire.eof, timeout=limit)
            response = wire.responses.pop(request_id, None)
        if response is None:
            if not answered:
                self.close()
                raise McpTimeoutError(
                    f"{self.name} (pid {self.pid}): no answer to {method!r} within {limit:g}s; the server was stopped"
                )
            raise self._exited()
        if response.get("jsonrpc") != "2.0":
            raise McpProtocolError(f"{self.name}: response to {method!r} is not JSON-RPC 2.0: {str(response)[:200]}")
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {"message": str(response["error"])}
            code = error.get("code")
            raise McpProtocolError(f"{self.name}: {method!r} failed with JSON-RPC error {code}: {error.get('message')}",
                                   code if isinstance(code, int) else None)
        return response["result"]

    def _initialize(self) -> None:
        result = self.request(
            "initialize",
            {
                "protocolVersion": PROTOCOL_VERSION,
                "capabilities": {},
                "clientInfo": {"name": "memtrial", "version": "0.1.0"},
            },
        )
        if not isinstance(result, dict) or "protocolVersion" not in result:
            raise McpProtocolError(f"{self.name}: initialize returned no protocolVersion: {str(result)[:200]}")
        self.protocol_version: str = result["protocolVersion"]
        """The protocol revision the server chose."""
        self.server_info = dict(result.get("serverInfo") or {})
        self.capabilities = dict(result.get("capabilities") or {})
        self.notify("notifications/initialized")

    # ------------------------------------------------------------------ tools

    def list_tools(self) -> list[dict[str, Any]]:
        """Every tool the server offers (following `nextCursor` pages), as the server describes them."""
        tools: list[dict[str, Any]] = []
        cursor: str | None = None
        for _ in range(100):
            result = self.request("tools/list", {"cursor": cursor} if cursor else {})
            tools.extend(result.get("tools", []))
            cursor = result.get("nextCursor")
            if not cursor:
                return tools
        raise McpProtocolError(f"{self.name}: tools/list returned more than 100 pages; the server keeps paging")

    def call_tool(self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None) -> dict[str, Any]:
        """Call tool `name`; return its result (`content`, and `structuredContent` when given).

        Raises McpToolError when the tool reports `isError`, plus the errors of `request`.
        """
        result = self.request("tools/call", {"name": name, "arguments": dict(arguments or {})}, timeout)
        if not isinstance(result, dict):
            raise McpProtocolError(f"{self.name}: tools/call {name!r} returned {type(result).__name__}, not an object")
        if result.get("isError"):
            text = " ".join(c.get("text", "") for c in result.get("content", []) if isinstance(c, dict)).strip()
            raise McpToolError(f"{self.name}: tool {name!r} failed: {text or 'no message'}")
        return result

    def call_tool_json(self, name: str, arguments: Mapping[str, Any] | None = None, timeout: float | None = None) -> Any:
        """Call tool `name` and return its structured result (or its first text content parsed as JSON)."""
        result = self.call_tool(name, arguments, timeout)
        if "structuredContent" in result:
            return result["structuredContent"]
        for content in result.get("content", []):
            if isinstance(content, dict) and content.get("type") == "text":
                try:
                    return json.loads(content["text"])
                except ValueError:
                    return content["text"]
        raise McpProtocolError(f"{self.name}: tool {name!r} returned no structured or text content")

    # ------------------------------------------------------------------ lifecycle

    @property
    def running(self) -> bool:
        """True while the server process is alive."""
        return self._process.poll() is None

    def close(self) -> None:
        """Stop the server (stdin EOF, then SIGTERM, then SIGKILL to its process group) and reap it."""
        self._finalizer()
        _OPEN.discard(self)

    def __enter__(self) -> McpStdioClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
