"""`memtrial memory ...` and `memtrial provisioner ...`: a thin edge over `tasks_lib.memory` and the provisioner check.

Every library error (`MemtrialError`) propagates to `flows.cli.main.main`, which prints it as one line
and exits 2; a failed check exits 1. Registered in `flows.cli.main` as the `memory` and `provisioner`
sub-apps.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer

from flows.cli.common import JsonFlag
from tasks_lib.errors import MemtrialError

memory_app = typer.Typer(
    help="Use the reference memory store: remember, recall, forget, deliver through the hook, serve and freeze.",
    no_args_is_help=True,
)
provisioner_app = typer.Typer(help="Check a memory system's provisioner (restore, snapshot, destroy).", no_args_is_help=True)

StoreOpt = Annotated[Path | None, typer.Option("--store", help="Memory store file (a live store or a run's replica).")]
SocketOpt = Annotated[str | None, typer.Option("--socket", help="Socket of a served replica, instead of --store (default $MEMORY_SOCKET when --store is not given).")]
RealmOpt = Annotated[str, typer.Option("--realm", help="Realm, '<namespace>:<name>' (e.g. trial:run-1.task-a.on.t0).")]


def _emit_json(payload: Any) -> None:
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def _print(line: str) -> None:
    sys.stdout.write(line + "\n")


def _read_text(value: str) -> str | bytes:
    """`-` means stdin (raw bytes, checked as UTF-8 by the store); anything else is the text itself."""
    return sys.stdin.buffer.read() if value == "-" else value


@contextmanager
def _memory(store: Path | None, socket: str | None, *, create: bool = False) -> Iterator[Any]:
    """Open the store file, or a client of the served replica; exactly one of them."""
    from tasks_lib.memory.env import SOCKET_ENV

    if store is not None and socket is not None:
        raise MemtrialError("--store and --socket: give one of them, not both")
    if store is None:
        socket = socket or os.environ.get(SOCKET_ENV) or None
        if socket is None:
            raise MemtrialError(f"--store: missing; give --store PATH (or --socket, or set {SOCKET_ENV})")
        if create:
            raise MemtrialError("--create: only works with --store; a served replica's realms are made before it is served")
        from tasks_lib.memory.delivery.client import MemoryClient

        yield MemoryClient(socket)
        return
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    with SqliteMemoryStore(store, create=create) as opened:
        yield opened


@memory_app.command("remember")
def remember(
    texts: Annotated[list[str], typer.Argument(help="Memory texts to store, one memory each ('-' reads one text from stdin).")],
    realm: RealmOpt,
    store: StoreOpt = None,
    socket: SocketOpt = None,
    kind: Annotated[str, typer.Option(help="Kind: convention, fact, decision, procedure, correction or superseded.")] = "fact",
    subject: Annotated[str | None, typer.Option(help="What the memories are about; an older memory with the same subject is superseded.")] = None,
    supersedes: Annotated[list[str] | None, typer.Option(help="Id of a live memory these replace (repeatable).")] = None,
    create: Annotated[bool, typer.Option("--create", help="Create the store file and the realm when they do not exist.")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Store memories in a realm, all or nothing; print their ids."""
    from pydantic import ValidationError

    from tasks_lib.memory.adapter import MemoryItem
    from tasks_lib.memory.errors import MemoryInputError
    from tasks_lib.memory.realms import validate_realm

    validate_realm(realm, field="--realm")
    items = []
    for index, raw in enumerate(texts):
        try:
            items.append(MemoryItem(text=_read_text(raw), kind=kind, subject=subject, supersedes=tuple(supersedes or ())))  # type: ignore[arg-type]
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "text"
            raise MemoryInputError(f"texts[{index}].{field}: {first['msg'].removeprefix('Value error, ')}; nothing was stored") from None
    if create and store is not None and store.exists() is False:
        store.parent.mkdir(parents=True, exist_ok=True)
    with _memory(store, socket, create=create) as memory:
        if create and realm not in memory.realms():
            memory.create_realm(realm)
        ids = memory.remember(realm, items)
    if as_json:
        _emit_json({"realm": realm, "ids": list(ids)})
    else:
        for memory_id in ids:
            _print(memory_id)


@memory_app.command("recall")
def recall(
    query: Annotated[str, typer.Argument(help="What to recall ('-' reads the query from stdin).")],
    realm: RealmOpt,
    store: StoreOpt = None,
    socket: SocketOpt = None,
    k: Annotated[int, typer.Option("-k", "--k", help="Most memories to return (1-100).")] = 5,
    lane: Annotated[list[str] | None, typer.Option(help="Use only this lane (repeatable; default all lanes).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Recall a realm's live memories for a query, best first (kill switch and ablation apply)."""
    from tasks_lib.memory.errors import MemoryInputError
    from tasks_lib.memory.realms import validate_realm
    from tasks_lib.memory.reference.store import SqliteMemoryStore
    from tasks_lib.memory.switches import active_lanes

    validate_realm(realm, field="--realm")
    raw = _read_text(query)
    try:
        text = raw if isinstance(raw, str) else raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise MemoryInputError(f"query: stdin is not valid UTF-8 (bad byte at offset {error.start}); re-encode it") from None
    with _memory(store, socket) as memory:
        if isinstance(memory, SqliteMemoryStore):
            hits = memory.recall(realm, text, k, lanes=lane)
        else:  # a served replica applies no switch: honour them here, as the hook does
            lanes = active_lanes(SqliteMemoryStore.LANES, lane)
            hits = memory.recall(realm, text, k, lanes=lanes) if lanes else ()
    if as_json:
        _emit_json([hit.model_dump(mode="json") for hit in hits])
    else:
        for hit in hits:
            _print(f"{hit.score:.4f}  {hit.id}  [{','.join(hit.lanes)}]  {' '.join(hit.text.split())}")
        if not hits:
            sys.stderr.write("no memories recalled\n")


@memory_app.command("forget")
def forget(
    ids: Annotated[list[str], typer.Argument(help="Exact ids of the memories to delete.")],
    store: StoreOpt = None,
    socket: SocketOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete exactly these memory ids, all or nothing."""
    with _memory(store, socket) as memory:
        forgotten = memory.forget(ids)
    if as_json:
        _emit_json({"ids": list(forgotten)})
    else:
        for memory_id in forgotten:
            _print(f"forgot {memory_id}")


@memory_app.command("hook")
def hook(
    plain: Annotated[bool, typer.Option("--plain", help="Print the bare memory block instead of Claude Code's hook JSON.")] = False,
) -> None:
    """The agent hook (UserPromptSubmit / SessionStart): event JSON on stdin, memory on stdout.

    Reads MEMORY_REALM, MEMORY_SOCKET or MEMORY_DB, MEMORY_DISABLED, MEMORY_SKIP_LANES and
    MEMORY_SESSION_QUERY; with no store set it prints nothing. Errors exit 1 (non-blocking for Claude Code).
    """
    from tasks_lib.memory.delivery.hook import run_hook

    result = run_hook(sys.stdin.buffer.read(), output="plain" if plain else "json")
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    raise typer.Exit(result.exit_code)


def _export_lines(env: dict[str, str]) -> list[str]:
    return [f"export {key}={shlex.quote(value)}" for key, value in sorted(env.items())]


@memory_app.command("serve")
def serve(
    store: Annotated[Path, typer.Option("--store", help="The replica file to serve.")],
    realm: Annotated[str | None, typer.Option("--realm", help="Realm to export as MEMORY_REALM for the agent.")] = None,
    socket_dir: Annotated[Path | None, typer.Option(help="Private (0700) folder for the socket; default a new folder under the temp dir.")] = None,
    detach: Annotated[bool, typer.Option("--detach", help="Start the server in the background, print its settings and return.")] = False,
    read_only: Annotated[bool, typer.Option("--read-only", help="Refuse remember and forget (for a socket the agent under test can reach).")] = False,
    as_json: JsonFlag = False,
) -> None:
    """Serve a replica on a private Unix socket and print the settings to export for the agent.

    In the foreground it serves until SIGTERM or Ctrl-C; with --detach, stop it with
    'memtrial memory stop --socket-dir DIR' (by its PID).
    """
    import tempfile

    from tasks_lib.memory.delivery import server
    from tasks_lib.memory.realms import validate_realm

    if realm is not None:
        validate_realm(realm, field="--realm")
    if not store.is_file():
        raise MemtrialError(f"--store: no memory store at {store}; restore or create one first")
    if detach:
        served = server.start_server(store, socket_dir, realm=realm, read_only=read_only)
    else:
        folder = server.private_dir(socket_dir if socket_dir is not None else Path(tempfile.mkdtemp(prefix="memtrial-mem-")))
        served = server.ServedReplica(pid=os.getpid(), socket_path=str(folder / server.SOCKET_NAME), socket_dir=str(folder),
                                      store_path=str(store.absolute()), realm=realm, read_only=read_only)
    if as_json:
        _emit_json({**served.model_dump(mode="json"), "env": served.env()})
    else:
        for line in _export_lines(served.env()):
            _print(line)
        _print(f"# pid {served.pid}; stop with: memtrial memory stop --socket-dir {shlex.quote(served.socket_dir)}")
    sys.stdout.flush()
    if not detach:
        raise typer.Exit(server.serve(store, Path(served.socket_dir), read_only=read_only))


@memory_app.command("stop")
def stop(
    socket_dir: Annotated[Path, typer.Option(help="The served replica's socket folder (printed by 'memtrial memory serve').")],
    as_json: JsonFlag = False,
) -> None:
    """Stop the memory server of a socket folder by the PID in its PID file."""
    from tasks_lib.memory.delivery.server import stop_server

    stopped = stop_server(socket_dir)
    if as_json:
        _emit_json({"socket_dir": str(socket_dir), "stopped": stopped})
    else:
        _print(f"stopped the server of {socket_dir}" if stopped else f"no server was running for {socket_dir}")


@memory_app.command("snapshot")
def snapshot(
    store: Annotated[Path, typer.Option("--store", help="The store to freeze (it may be open elsewhere).")],
    out: Annotated[Path, typer.Option("--out", help="New file for the frozen store; never overwritten.")],
    as_json: JsonFlag = False,
) -> None:
    """Freeze a store into one read-only file and print its SHA-256 (pin it in the fixture)."""
    from tasks_lib.memory.reference.replica import snapshot as freeze

    receipt = freeze(store, out)
    if as_json:
        _emit_json({"path": str(out), **receipt.model_dump(mode="json")})
    else:
        _print(f"froze {store} into {out}: sha256 {receipt.sha256}, {receipt.size} bytes")


@provisioner_app.command("check")
def provisioner_check(
    argv: Annotated[list[str], typer.Argument(help="The provisioner's command prefix, after '--' (the verb is appended).")],
    fixture_root: Annotated[Path, typer.Option(help="Folder the check writes its fixture into (memtrial-check/ inside it).")],
    timeout: Annotated[float, typer.Option(help="Seconds each verb may take before its process group is killed.")] = 60.0,
    env: Annotated[list[str] | None, typer.Option("--env", help="KEY=VALUE added to the provisioner's environment (repeatable).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run every conformance check against a provisioner: one line per check; exit 1 if any fails."""
    from tasks_lib.memory.provisioner.check import check_provisioner, format_results

    extra: dict[str, str] = {}
    for item in env or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise MemtrialError(f"--env: {item!r} is not KEY=VALUE; write it as NAME=value")
        extra[key] = value
    results = check_provisioner(argv, fixture_root, env=extra, timeout_seconds=timeout)
    ok = bool(results) and all(r.passed for r in results)
    if as_json:
        _emit_json({"ok": ok, "checks": [r.model_dump(mode="json") for r in results]})
    else:
        _print(format_results(results))
    if not ok:
        raise typer.Exit(1)

