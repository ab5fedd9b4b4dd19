"""`memtrial memory ...` and `memtrial provisioner check`: JSON where they report, one line and exit 2 on bad input.

The error paths run the installed console script (`.venv/bin/memtrial`) as a real process, so
argv and stdin bytes reach it exactly as a shell would pass them.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flows.cli.main import main
from tasks_lib.memory.delivery.provenance import find_provenance
from tasks_lib.memory.env import MEMORY_OFF_ENV, REALM_ENV, SOCKET_ENV, STORE_ENV
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.trees import sha256_file

MEMTRIAL = Path(sys.executable).parent / "memtrial"
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "minimal_provisioner.py"
REALM = "trial:run-1.uploader.on.t0"
FACT = "The uploader exits with code 75 when the disk quota is full."


def _cli(args: list[str | bytes], stdin: bytes = b"", env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMTRIAL_")}
    return subprocess.run([str(MEMTRIAL), *args], input=stdin, capture_output=True, timeout=120, check=False,
                          env={**clean, **(env or {})})


@pytest.fixture
def store(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, str]:
    """A store holding FACT in REALM, made through the CLI: (path, the memory's id)."""
    path = tmp_path / "memory.sqlite"
    assert main(["memory", "remember", FACT, "--store", str(path), "--realm", REALM, "--create", "--json"]) == 0
    (memory_id,) = json.loads(capsys.readouterr().out)["ids"]
    return path, memory_id


def test_remember_recall_forget_round_trip(store: tuple[Path, str], capsys: pytest.CaptureFixture[str]) -> None:
    path, memory_id = store
    assert main(["memory", "recall", "uploader disk quota exit code", "--store", str(path), "--realm", REALM, "--json"]) == 0
    hits = json.loads(capsys.readouterr().out)
    assert [h["id"] for h in hits] == [memory_id] and hits[0]["text"] == FACT
    assert main(["memory", "recall", "uploader quota", "--store", str(path), "--realm", REALM, "--lane", "keyword", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["lanes"] == ["keyword"]
    assert main(["memory", "forget", memory_id, "--store", str(path), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == {"ids": [memory_id]}
    assert main(["memory", "recall", "uploader", "--store", str(path), "--realm", REALM, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_recall_honours_the_kill_switch(store: tuple[Path, str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(MEMORY_OFF_ENV, "1")
    assert main(["memory", "recall", "uploader", "--store", str(store[0]), "--realm", REALM, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


@pytest.mark.parametrize(
    ("args", "stdin", "message"),
    [
        (["--realm", "nocolon", FACT], b"", b"--realm: 'nocolon' is not a canonical realm name"),
        (["--realm", "Trial:Upper", FACT], b"", b"is not a canonical realm name"),
        (["--realm", REALM, ""], b"", b"texts[0].text: text is empty"),
        (["--realm", REALM, "   "], b"", b"texts[0].text: text is empty"),
        (["--realm", REALM, "x" * 20_000], b"", b"text is 20000 bytes; the limit is 16384"),
        (["--realm", REALM, b"caf\xe9 \xff"], b"", b"text is not valid UTF-8"),
        (["--realm", REALM, "-"], b"\xff\xfe\x00broken", b"text is not valid UTF-8 (bad byte at offset 0)"),
        (["--realm", REALM, "ok text", ""], b"", b"texts[1].text: text is empty"),
        (["--realm", "trial:never-made", FACT], b"", b"was never created"),
        (["--realm", REALM, "--kind", "rumour", FACT], b"", b"texts[0].kind"),
    ],
    ids=["realm-without-colon", "realm-uppercase", "empty-text", "blank-text", "huge-text", "non-utf8-argv",
         "non-utf8-stdin", "second-of-two-empty", "unknown-realm", "unknown-kind"],
)
def test_bad_remember_is_one_line_exit_2_and_loses_nothing(
    store: tuple[Path, str], args: list[str | bytes], stdin: bytes, message: bytes,
) -> None:
    path, memory_id = store
    before = sha256_file(path)
    done = _cli(["memory", "remember", "--store", str(path), *args], stdin=stdin)
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""
    assert done.stderr.startswith(b"memtrial: error: ") and done.stderr.count(b"\n") == 1, done.stderr
    assert message in done.stderr
    assert sha256_file(path) == before, "a refused remember changed the store"
    with SqliteMemoryStore(path, create=False) as opened:
        assert opened.live_ids(REALM) == (memory_id,)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["memory", "recall", "q", "--realm", REALM], b"--store: missing"),
        (["memory", "recall", "q", "--realm", REALM, "--store", "/nonexistent/m.sqlite"], b"no memory store at"),
        (["memory", "forget", "deadbeefdeadbeef", "--store", "{store}"], b"not stored"),
        (["memory", "recall", "q", "--realm", REALM, "--store", "{store}", "--socket", "/tmp/x.sock"], b"give one of them"),
        (["memory", "recall", "q", "--realm", REALM, "--store", "{store}", "--lane", "keywrod"], b"unknown lane(s) keywrod"),
        (["memory", "recall", "q", "--realm", REALM, "--socket", "/nonexistent/memory.sock"], b"no memory server is listening"),
        (["memory", "snapshot", "--store", "{store}", "--out", "{store}"], b"already exists"),
        (["provisioner", "check", "--fixture-root", "{tmp}", "--env", "NOEQUALS", "--", "x"], b"--env: 'NOEQUALS' is not KEY=VALUE"),
    ],
    ids=["no-store", "absent-store", "unknown-id", "store-and-socket", "misspelt-lane", "no-server",
         "snapshot-over-existing", "bad-env"],
)
def test_other_errors_are_one_line_exit_2(store: tuple[Path, str], tmp_path: Path, args: list[str], message: bytes) -> None:
    filled = [a.replace("{store}", str(store[0])).replace("{tmp}", str(tmp_path)) for a in args]
    done = _cli(filled)
    assert done.returncode == 2 and done.stderr.count(b"\n") == 1 and message in done.stderr, done.stderr


def test_snapshot_prints_the_digest_of_the_frozen_file(store: tuple[Path, str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "frozen" / "memory.sqlite"
    assert main(["memory", "snapshot", "--store", str(store[0]), "--out", str(out), "--json"]) == 0
    receipt = json.loads(capsys.readouterr().out)
    assert receipt["sha256"] == sha256_file(out) and receipt["size"] == out.stat().st_size


def test_serve_detached_then_hook_through_the_socket_then_stop(store: tuple[Path, str]) -> None:
    path, memory_id = store
    served = _cli(["memory", "serve", "--store", str(path), "--realm", REALM, "--detach", "--json"])
    assert served.returncode == 0, served.stderr
    info = json.loads(served.stdout)
    try:
        assert info["env"] == {SOCKET_ENV: info["socket_path"], REALM_ENV: REALM}
        event = json.dumps({"hook_event_name": "UserPromptSubmit", "prompt": "uploader disk quota exit code"}).encode()
        hooked = _cli(["memory", "hook"], stdin=event, env=info["env"])
        assert hooked.returncode == 0, hooked.stderr
        context = json.loads(hooked.stdout)["hookSpecificOutput"]["additionalContext"]
        assert find_provenance(context) == [("prompt-time", (memory_id,))]
        remembered = _cli(["memory", "remember", "The uploader retries three times.", "--realm", REALM, "--json"], env=info["env"])
        assert remembered.returncode == 0, remembered.stderr
        switched_off = _cli(["memory", "hook"], stdin=event, env={**info["env"], MEMORY_OFF_ENV: "1"})
        assert (switched_off.returncode, switched_off.stdout) == (0, b"")
    finally:
        stopped = _cli(["memory", "stop", "--socket-dir", info["socket_dir"], "--json"])
        shutil.rmtree(info["socket_dir"], ignore_errors=True)
    assert json.loads(stopped.stdout)["stopped"] is True
    with pytest.raises(ProcessLookupError):
        os.kill(info["pid"], 0)


def test_hook_command_fails_non_blocking_in_one_line(tmp_path: Path) -> None:
    done = _cli(["memory", "hook"], stdin=b"{}", env={REALM_ENV: REALM, STORE_ENV: str(tmp_path / "memory.sqlite")})
    assert done.returncode == 1 and done.stdout == b"" and done.stderr.count(b"\n") == 1


def test_provisioner_check_passes_the_example(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["provisioner", "check", "--fixture-root", str(tmp_path / "fixture"),
            "--env", f"MINIMAL_PROVISIONER_STATE={tmp_path / 'state'}", "--", sys.executable, str(EXAMPLE)]
    assert main(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 11 and all(line.startswith("PASS  ") for line in lines[:10])
    assert lines[-1] == "10/10 checks passed: ok"


def test_provisioner_check_fails_with_exit_1_and_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["provisioner", "check", "--fixture-root", str(tmp_path), "--json", "--", "/bin/false"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["ok"] is False and len(report["checks"]) == 10 and not any(c["passed"] for c in report["checks"])
