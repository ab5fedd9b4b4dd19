"""The agent delivery hook: Claude Code's UserPromptSubmit / SessionStart hook command.

Reads the hook event JSON on stdin and, from the variables `tasks_lib.memory.env` names, the realm
from REALM_ENV (verbatim, validated, never defaulted) and the store from SOCKET_ENV (a served
replica, see `server`) or else STORE_ENV (the replica file), recalls, and prints the memories
wrapped in a provenance marker (see `provenance`) in the JSON shape Claude Code reads:
`{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}` (or, with
`output="plain"`, the bare block, which Claude Code also adds as context for these two events).

- No store (neither SOCKET_ENV nor STORE_ENV, as in every `off` and `ablate:all` arm): prints
  nothing and exits 0 before reading anything else, exactly as for a memory with no hit. An `on`
  arm whose store is missing is caught by the runner's delivery accounting, not here: an error
  line would tell the agent which arm it is in.
- MEMORY_OFF_ENV=1 (an adapter-level switch the runner never sets): prints nothing and exits 0.
- ABLATE_LANES_ENV (likewise never set by the runner, which strips the lane from the replica
  instead): the ablated lanes are dropped here, before the recall call is made; through
  a socket the hook asks the server for its system's lanes (a ping), then sends only the active
  ones (the server reads no switch), and sends no recall at all when none is left.
- UserPromptSubmit: the query is the prompt (its first MAX_QUERY_BYTES bytes).
- SessionStart: the query is SESSION_QUERY_ENV; when unset, nothing is delivered.
- No hit: prints nothing, exits 0. Any error: one line on stderr, exit HOOK_ERROR_EXIT (1), which
  Claude Code treats as a non-blocking error, so the run goes on and is recorded as undelivered.

The hook runs on every prompt, so its start-up is kept cheap: the switches are read with only the
standard library loaded, and the socket branch (how every arm the runner builds gets its memory:
the delivery witness's socket) stays on the standard library too (`socket_recall`); pydantic and
the store (SQLite, numpy) are imported only by the branch that opens a store file.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.provenance import wrap_block
from tasks_lib.memory.env import (
    ABLATE_LANES_ENV,
    REALM_ENV,
    SESSION_QUERY_ENV,
    SOCKET_ENV,
    STORE_ENV,
)
from tasks_lib.memory.errors import HookError
from tasks_lib.memory.realms import validate_realm
from tasks_lib.memory.switches import active_lanes, memory_off

if TYPE_CHECKING:
    from tasks_lib.memory.adapter import MemoryHit
    from tasks_lib.memory.delivery.socket_recall import ServedHit

MAX_QUERY_BYTES = 16_384
"""Longest query sent (`adapter.MAX_QUERY_BYTES`; a test keeps the two equal): longer prompts are clipped."""
DEFAULT_K = 5
"""Memories delivered per event at most."""
MAX_CONTEXT_CHARS = 8_000
"""Largest block delivered; Claude Code shows only a preview of much larger hook output."""
SOCKET_TIMEOUT_SECONDS = 20.0
"""How long the hook waits for the memory server; past it the hook fails (non-blocking) instead of hanging the agent."""
HOOK_ERROR_EXIT = 1
"""Exit status on error: non-blocking for Claude Code, and never a silent success."""

EVENTS = {"UserPromptSubmit": "prompt-time", "SessionStart": "session-start"}
"""Supported hook events and the delivery channel each one is."""


@dataclass(frozen=True)
class HookResult:
    """What the hook prints and returns; a dataclass, not a contract: it never leaves the process,
    and pydantic is not loaded on the `off` path."""

    exit_code: int
    """Process exit status."""
    stdout: str = ""
    """Text for stdout (empty when nothing is delivered)."""
    stderr: str = ""
    """One error line, when exit_code is not 0."""
    channel: str | None = None
    """The delivery channel, when something was delivered."""
    ids: tuple[str, ...] = ()
    """Ids of the delivered memories."""


def _parse_event(stdin: bytes | str) -> dict[str, object]:
    if isinstance(stdin, bytes):
        try:
            stdin = stdin.decode("utf-8")
        except UnicodeDecodeError as error:
            raise HookError(f"stdin: hook input is not UTF-8 (bad byte at offset {error.start})") from None
    try:
        event = json.loads(stdin)
    except json.JSONDecodeError as error:
        raise HookError(f"stdin: hook input is not JSON (line {error.lineno} column {error.colno}: {error.msg})") from None
    if not isinstance(event, dict):
        raise HookError("stdin: hook input must be a JSON object with hook_event_name")
    name = event.get("hook_event_name")
    if name not in EVENTS:
        raise HookError(f"hook_event_name: {name!r} is not supported; wire this hook to {' or '.join(EVENTS)}")
    return event


def _clip_query(prompt: object, checked: bool = True) -> str:
    """The prompt's first MAX_QUERY_BYTES bytes; with `checked`, validated as the store would."""
    if not isinstance(prompt, str):
        raise HookError("prompt: missing or not a string in the UserPromptSubmit input")
    clipped = prompt.encode("utf-8", "surrogatepass")[:MAX_QUERY_BYTES].decode("utf-8", "ignore")
    if not checked:
        return clipped
    from tasks_lib.memory.adapter import check_text  # not at import: see the module doc

    try:
        return check_text(clipped, "prompt", MAX_QUERY_BYTES)
    except ValueError as error:
        raise HookError(str(error)) from None


def render(hits: Sequence[MemoryHit | ServedHit], channel: str) -> tuple[str, tuple[str, ...]]:
    """The delivered block for `hits`, within MAX_CONTEXT_CHARS, and the ids it names."""
    lines: list[str] = []
    ids: list[str] = []
    budget = MAX_CONTEXT_CHARS - 200
    for hit in hits:
        line = "- " + " ".join(hit.text.split())
        if len(line) > budget:
            if ids:
                break
            line = line[: budget - 1] + "…"
        lines.append(line)
        ids.append(hit.id)
        budget -= len(line) + 1
    heading = "Project memory recalled for this request (most relevant first):"
    return wrap_block(channel, ids, heading + "\n" + "\n".join(lines)), tuple(ids)


def run_hook(stdin: bytes | str, env: Mapping[str, str] | None = None, output: Literal["json", "plain"] = "json") -> HookResult:
    """Handle one hook event; never raises for a MemtrialError, returns it as exit 1 instead."""
    env = os.environ if env is None else env
    try:
        socket_path = env.get(SOCKET_ENV, "")
        store_path = env.get(STORE_ENV, "")
        if not socket_path and not store_path:
            return HookResult(exit_code=0)  # an arm without memory: the same silence as a memory with no hit
        if memory_off(env):
            return HookResult(exit_code=0)
        event = _parse_event(stdin)
        name = str(event["hook_event_name"])
        realm = env.get(REALM_ENV, "")
        if not realm:
            raise HookError(f"{REALM_ENV} is not set; set it to the trial's realm (there is no default realm)")
        validate_realm(realm, field=REALM_ENV)
        if name == "UserPromptSubmit":
            query = _clip_query(event.get("prompt"), checked=not socket_path)  # a server checks what it is sent
        else:
            query = env.get(SESSION_QUERY_ENV, "")
            if not query.strip():
                return HookResult(exit_code=0)
        hits: Sequence[MemoryHit | ServedHit]
        if socket_path:
            from tasks_lib.memory.delivery import socket_recall  # not at import: see the module doc

            lanes: tuple[str, ...] | None = None  # every lane of the served system, unless a switch skips some
            if env.get(ABLATE_LANES_ENV, "").strip():
                lanes = active_lanes(socket_recall.served_lanes(socket_path, SOCKET_TIMEOUT_SECONDS), None, env)
                if not lanes:
                    return HookResult(exit_code=0)
            hits = socket_recall.recall(socket_path, realm, query, DEFAULT_K, lanes, SOCKET_TIMEOUT_SECONDS)
        else:
            from tasks_lib.memory.reference.store import (
                SqliteMemoryStore,  # not at import: see the module doc
            )

            with SqliteMemoryStore(store_path, read_only=True) as store:
                lanes = active_lanes(store.LANES, None, env)
                if not lanes:
                    return HookResult(exit_code=0)
                hits = store.recall(realm, query, DEFAULT_K, lanes=lanes)
        if not hits:
            return HookResult(exit_code=0)
        channel = EVENTS[name]
        block, ids = render(hits, channel)
        if output == "json":
            text = json.dumps({"hookSpecificOutput": {"hookEventName": name, "additionalContext": block}}, ensure_ascii=False)
        else:
            text = block
        return HookResult(exit_code=0, stdout=text + "\n", channel=channel, ids=ids)
    except MemtrialError as error:
        return HookResult(exit_code=HOOK_ERROR_EXIT, stderr=f"memory hook: {' '.join(str(error).splitlines())}\n")


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m tasks_lib.memory.delivery.hook [--plain]`: run the hook on this process's stdin and env."""
    args = list(sys.argv[1:] if argv is None else argv)
    if args not in ([], ["--plain"]):
        sys.stderr.write("usage: python -m tasks_lib.memory.delivery.hook [--plain]\n")
        return HOOK_ERROR_EXIT
    result = run_hook(sys.stdin.buffer.read(), output="plain" if args else "json")
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
