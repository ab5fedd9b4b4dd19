"""The generic MCP stdio client against the real npm memory server, and its failure modes against real
processes that misbehave (never answer, exit at once, spawn a child): timeouts, exits and shutdown.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.memory.adapters.mcp_client import (
    McpProtocolError,
    McpServerExitedError,
    McpStartError,
    McpStdioClient,
    McpTimeoutError,
    McpToolError,
)
from tasks_lib.memory.errors import MemoryStoreError
from tasks_lib.memory.registry import memory_system_unavailable

MEMORY_TOOLS = {"create_entities", "add_observations", "search_nodes", "open_nodes", "read_graph", "delete_entities", "delete_observations"}


def alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


@pytest.fixture
def memory_server(tmp_path: Path) -> Iterator[McpStdioClient]:
    reason = memory_system_unavailable("mcp-memory")
    if reason:
        print(f"skipping MCP client tests against the real server: {reason}")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI must install the MCP memory server: {reason}")
        pytest.skip(reason)
    from tasks_lib.memory.adapters.mcp_memory import mcp_memory_server

    env = {"PATH": os.environ["PATH"], "MEMORY_FILE_PATH": str(tmp_path / "memory.jsonl")}
    client = McpStdioClient(["node", str(mcp_memory_server())], env=env, timeout=30, name="server-memory")
    yield client
    client.close()


def test_handshake_lists_the_memory_tools(memory_server: McpStdioClient) -> None:
    assert memory_server.server_info.get("name") == "memory-server"
    assert memory_server.protocol_version
    assert MEMORY_TOOLS <= {tool["name"] for tool in memory_server.list_tools()}


def test_tool_calls_round_trip_through_the_memory_file(memory_server: McpStdioClient, tmp_path: Path) -> None:
    entity = {"name": "Ravi", "entityType": "person", "observations": ["owns billing_service"]}
    assert memory_server.call_tool_json("create_entities", {"entities": [entity]}) == {"entities": [entity]}
    found = memory_server.call_tool_json("search_nodes", {"query": "billing"})
    assert found["entities"] == [entity]
    assert "billing_service" in (tmp_path / "memory.jsonl").read_text()


def test_tool_failure_is_a_tool_error_with_the_servers_message(memory_server: McpStdioClient) -> None:
    with pytest.raises(McpToolError, match="Entity with name nobody not found"):
        memory_server.call_tool("add_observations", {"observations": [{"entityName": "nobody", "contents": ["x"]}]})
    assert memory_server.running


def test_unknown_method_is_a_protocol_error_with_its_code(memory_server: McpStdioClient) -> None:
    with pytest.raises(McpProtocolError) as caught:
        memory_server.request("no/such-method", {})
    assert caught.value.code == -32601
    assert isinstance(caught.value, MemoryStoreError)


def test_close_stops_the_real_server(memory_server: McpStdioClient) -> None:
    pid = memory_server.pid
    assert alive(pid)
    memory_server.close()
    memory_server.close()  # idempotent
    assert not alive(pid) and not memory_server.running


def test_silent_server_times_out_and_is_stopped_with_its_children(tmp_path: Path) -> None:
    """A server that never answers must not hang the caller, and neither it nor its child may be left running."""
    child_pid_file = tmp_path / "child.pid"
    script = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen(['sleep', '120'])\n"
        "open(sys.argv[1], 'w').write(str(child.pid))\n"
        "time.sleep(120)\n"
    )
    started = time.monotonic()
    with pytest.raises(McpTimeoutError, match="no answer to 'initialize' within 2s; the server was stopped"):
        McpStdioClient([sys.executable, "-c", script, str(child_pid_file)], timeout=2, name="silent")
    assert time.monotonic() - started < 15
    child = int(child_pid_file.read_text())
    for _ in range(50):
        if not alive(child):
            break
        time.sleep(0.1)
    assert not alive(child), "the server's child outlived the client"


def test_server_that_exits_is_reported_with_code_and_stderr() -> None:
    script = "import sys; sys.stderr.write('fatal: bad config\\n'); sys.exit(3)"
    with pytest.raises(McpServerExitedError, match=r"exited with code 3(.|\n)*fatal: bad config"):
        McpStdioClient([sys.executable, "-c", script], timeout=10, name="crasher")


def test_missing_command_is_a_start_error() -> None:
    with pytest.raises(McpStartError, match="cannot start"):
        McpStdioClient(["/nonexistent/mcp-server-binary"], timeout=5)
