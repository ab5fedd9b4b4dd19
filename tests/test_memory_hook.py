"""The agent delivery hook: output shape, provenance, kill switch, ablation and refusal to default."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks_lib.memory.delivery.hook import HOOK_ERROR_EXIT, MAX_CONTEXT_CHARS, run_hook
from tasks_lib.memory.delivery.provenance import find_provenance, wrap_block
from tasks_lib.memory.env import (
    ABLATE_LANES_ENV,
    MEMORY_OFF_ENV,
    REALM_ENV,
    SESSION_QUERY_ENV,
    STORE_ENV,
)
from tasks_lib.memory.reference.store import SqliteMemoryStore

REALM = "trial:run-1.task-a.on.t0"


@pytest.fixture
def db(tmp_path: Path) -> tuple[Path, tuple[str, ...]]:
    path = tmp_path / "memory.sqlite"
    with SqliteMemoryStore(path) as store:
        store.create_realm(REALM)
        store.create_realm("trial:other")
        ids = store.remember(REALM, ["The uploader exits with code 75 when the disk quota is full."])
        store.remember("trial:other", ["The uploader exits with code 99 in the other realm."])
    return path, ids


def _event(prompt: str = "what exit code does the uploader use for a full disk quota?", name: str = "UserPromptSubmit") -> str:
    return json.dumps({"hook_event_name": name, "prompt": prompt, "session_id": "s1", "cwd": "/work", "transcript_path": "/t.jsonl"})


def _env(db: Path, **extra: str) -> dict[str, str]:
    return {REALM_ENV: REALM, STORE_ENV: str(db), **extra}


def test_prompt_submit_delivers_json_additional_context_with_provenance(db: tuple[Path, tuple[str, ...]]) -> None:
    path, ids = db
    result = run_hook(_event(), _env(path))
    assert result.exit_code == 0 and result.stderr == ""
    output = json.loads(result.stdout)
    context = output["hookSpecificOutput"]["additionalContext"]
    assert output["hookSpecificOutput"]["hookEventName"] == "UserPromptSubmit"
    assert "code 75" in context and "code 99" not in context
    assert find_provenance(context) == [("prompt-time", ids)]
    assert find_provenance(result.stdout) == [("prompt-time", ids)], "the marker survives JSON escaping"
    assert (result.channel, result.ids) == ("prompt-time", ids)


def test_plain_output_is_the_bare_block(db: tuple[Path, tuple[str, ...]]) -> None:
    path, ids = db
    result = run_hook(_event(), _env(path), output="plain")
    assert result.stdout.startswith("<!-- recalled-memory channel=prompt-time") and find_provenance(result.stdout) == [("prompt-time", ids)]


@pytest.mark.parametrize(
    ("env_extra", "stdin"),
    [
        ({MEMORY_OFF_ENV: "1"}, None),
        ({MEMORY_OFF_ENV: "1", REALM_ENV: ""}, "not even json"),
        ({ABLATE_LANES_ENV: "all"}, None),
        ({STORE_ENV: "", REALM_ENV: ""}, "not even json"),
        ({}, _event(name="SessionStart")),
        ({}, _event(prompt="zebra crossing lollipop")),
    ],
    ids=["kill-switch", "kill-switch-before-anything-else", "ablate-all",
         "no-store-is-silent-like-an-arm-without-memory", "session-start-without-query", "no-hit"],
)
def test_hook_emits_nothing(db: tuple[Path, tuple[str, ...]], env_extra: dict[str, str], stdin: str | None) -> None:
    result = run_hook(stdin if stdin is not None else _event(), {**_env(db[0]), **env_extra})
    assert (result.exit_code, result.stdout, result.stderr) == (0, "", "")


def test_ablated_lanes_are_skipped_by_the_hook(db: tuple[Path, tuple[str, ...]]) -> None:
    """With every lane but one ablated, the hook delivers exactly what that lane alone recalls."""
    prompt = json.loads(_event())["prompt"]
    with SqliteMemoryStore(db[0]) as store:
        lanes = store.LANES
        alone = {lane: tuple(h.id for h in store.recall(REALM, prompt, 5, lanes=[lane])) for lane in lanes}
    assert alone["keyword"] == db[1] and alone["graph"] == (), "the lanes must differ for this test to tell them apart"
    for lane in lanes:
        result = run_hook(_event(), _env(db[0], **{ABLATE_LANES_ENV: ",".join(x for x in lanes if x != lane)}))
        assert result.exit_code == 0 and result.ids == alone[lane], lane
        assert (result.stdout == "") == (alone[lane] == ()), lane


def test_session_start_uses_the_session_query(db: tuple[Path, tuple[str, ...]]) -> None:
    result = run_hook(_event(name="SessionStart"), _env(db[0], **{SESSION_QUERY_ENV: "uploader disk quota"}))
    assert result.exit_code == 0 and result.channel == "session-start"
    assert json.loads(result.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"


@pytest.mark.parametrize(
    ("env_extra", "stdin", "message"),
    [
        ({REALM_ENV: ""}, None, f"{REALM_ENV} is not set"),
        ({REALM_ENV: "nocolon"}, None, f"{REALM_ENV}: 'nocolon' is not a canonical realm name"),
        ({REALM_ENV: "trial:never-made"}, None, "was never created"),
        ({STORE_ENV: "/nonexistent/memory.sqlite"}, None, "no memory store at"),
        ({ABLATE_LANES_ENV: "keywrod"}, None, "unknown lane(s) keywrod"),
        ({MEMORY_OFF_ENV: "yes"}, None, f"{MEMORY_OFF_ENV}='yes' is not understood"),
        ({}, b"\xff\xfe", "stdin: hook input is not UTF-8"),
        ({}, "{not json", "stdin: hook input is not JSON"),
        ({}, "[]", "must be a JSON object"),
        ({}, _event(name="PreToolUse"), "hook_event_name: 'PreToolUse' is not supported"),
        ({}, json.dumps({"hook_event_name": "UserPromptSubmit"}), "prompt: missing"),
    ],
    ids=[
        "missing-realm", "malformed-realm", "unknown-realm", "absent-db", "misspelt-lane",
        "bad-kill-switch", "non-utf8-stdin", "bad-json", "not-an-object", "wrong-event", "no-prompt",
    ],
)
def test_hook_errors_exit_nonzero_with_one_line(db: tuple[Path, tuple[str, ...]], env_extra: dict[str, str], stdin: object, message: str) -> None:
    result = run_hook(stdin if stdin is not None else _event(), {**_env(db[0]), **env_extra})  # type: ignore[arg-type]
    assert result.exit_code == HOOK_ERROR_EXIT and result.stdout == ""
    assert message in result.stderr and result.stderr.count("\n") == 1


def test_delivered_block_stays_under_the_context_limit(tmp_path: Path) -> None:
    path = tmp_path / "big.sqlite"
    with SqliteMemoryStore(path) as store:
        store.create_realm(REALM)
        store.remember(REALM, [f"giraffe note {i}: " + "tall necks " * 1400 for i in range(5)])
    result = run_hook(_event(prompt="giraffe note tall necks"), _env(path), output="plain")
    assert len(result.stdout) <= MAX_CONTEXT_CHARS and len(result.ids) == 1
    assert find_provenance(result.stdout) == [("prompt-time", result.ids)]


def test_find_provenance_counts_only_complete_blocks() -> None:
    block = wrap_block("prompt-time", ["aaaa", "bbbb"], "- x")
    unclosed = "<!-- recalled-memory channel=session-start ids=cccc -->\nno close"
    text = f"{unclosed}\n{block}\n{wrap_block('session-start', ['dddd'], '- y')}"
    assert find_provenance(text) == [("prompt-time", ("aaaa", "bbbb")), ("session-start", ("dddd",))]
    assert find_provenance("nothing here") == []


def test_hook_runs_as_a_process(db: tuple[Path, tuple[str, ...]]) -> None:
    env = {**os.environ, **_env(db[0])}
    env.pop(MEMORY_OFF_ENV, None)
    env.pop(ABLATE_LANES_ENV, None)
    done = subprocess.run(
        [sys.executable, "-m", "tasks_lib.memory.delivery.hook"], input=_event().encode(), capture_output=True, env=env, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    assert find_provenance(done.stdout.decode()) == [("prompt-time", db[1])]


def test_the_off_path_loads_neither_pydantic_nor_the_store() -> None:
    """Regression: the hook runs on every prompt; importing the store (SQLite, numpy) or pydantic
    before the kill switch is read made every prompt of an `off` arm pay for them (~0.3 s)."""
    env = {**os.environ, MEMORY_OFF_ENV: "1"}
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tasks_lib.memory.delivery.hook"], input=_event().encode(),
        capture_output=True, env=env, timeout=60, check=False,
    )
    assert (done.returncode, done.stdout) == (0, b""), done.stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.decode().splitlines() if line.startswith("import time:")}
    heavy = sorted(name for name in loaded if name.split(".")[0] in ("pydantic", "numpy", "sqlite3", "socket")
                   or name in ("tasks_lib.contracts", "tasks_lib.memory.adapter", "tasks_lib.memory.reference.store"))
    assert heavy == [], f"the off path imported {heavy}"


def test_the_hooks_standard_library_constants_match_the_typed_ones() -> None:
    """The hook's socket branch spells the protocol without pydantic (to stay cheap); a drift from the
    typed protocol or the adapter's query limit would make it send what a server refuses."""
    from tasks_lib.memory import adapter
    from tasks_lib.memory.delivery import hook, protocol, socket_recall

    assert socket_recall.PROTOCOL_VERSION == protocol.PROTOCOL_VERSION
    assert socket_recall.MAX_ANSWER_BYTES == protocol.MAX_RESPONSE_BYTES
    assert hook.MAX_QUERY_BYTES == adapter.MAX_QUERY_BYTES
