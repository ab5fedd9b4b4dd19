"""The provisioner protocol: the example passes the conformance check; every misbehaviour gets its own error.

Every provisioner here is a real subprocess (a small Python script run with sys.executable);
nothing is mocked. Timeouts are short and every call is wrapped in a guard, so a regression
shows up as a failure, never as a hung suite.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Coroutine
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.contracts import ArmArtifacts, ArtifactRef
from tasks_lib.errors import DigestMismatchError, MemtrialError
from tasks_lib.memory.env import MEMORY_OFF_ENV
from tasks_lib.memory.provisioner import client as prov
from tasks_lib.memory.provisioner.check import (
    CHECK_NAMES,
    check_provisioner,
    format_results,
    write_check_fixture,
)
from tasks_lib.memory.provisioner.client import (
    FixtureArtifactDigestError,
    FixtureArtifactEscapeError,
    FixtureArtifactMissingError,
    Probe,
    ProbeReceiptError,
    Provisioner,
    ProvisionerConfig,
    ProvisionerError,
    ProvisionerExitError,
    ProvisionerLaunchError,
    ProvisionerOutputError,
    ProvisionerOutputLimitError,
    ProvisionerSchemaError,
    ProvisionerTimeoutError,
    provisioned,
    provisioned_sync,
)
from tasks_lib.trees import sha256_file

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "minimal_provisioner.py"
TIMEOUT = 2.0
GUARD_SECONDS = 20.0

PRELUDE = """\
import json, os, signal, subprocess, sys, time
verb = sys.argv[1]
request = json.loads(sys.stdin.read())
RESTORE = {"project": "p-1", "queue_before_count": 0, "restore_seconds": 0.1}
"""


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    """Run a coroutine with an outer guard so a client bug cannot hang the suite."""
    return asyncio.run(asyncio.wait_for(coro, GUARD_SECONDS))


def script(tmp_path: Path, body: str, prelude: str = PRELUDE) -> list[str]:
    """Write a provisioner script (prelude reads the request) and return its argv prefix."""
    path = tmp_path / "provisioner.py"
    path.write_text(prelude + body, encoding="utf-8")
    return [sys.executable, str(path)]


def make(argv: list[str], fixture_root: Path, **fields: Any) -> Provisioner:
    """A Provisioner with the test's short timeout."""
    return Provisioner(ProvisionerConfig(argv=tuple(argv), fixture_root=fixture_root, timeout_seconds=TIMEOUT, **fields))


@pytest.fixture
def fixture_root(tmp_path: Path) -> Path:
    """A fixture root holding the built-in check fixture."""
    root = tmp_path / "fixture"
    write_check_fixture(root)
    return root


@pytest.fixture
def arm(fixture_root: Path) -> ArmArtifacts:
    """The `alpha` arm of the built-in check fixture, pinned."""
    return write_check_fixture(fixture_root)[0].arm


def example(tmp_path: Path, fixture_root: Path) -> tuple[Provisioner, Path]:
    """The example provisioner with its own state folder."""
    state = tmp_path / "state"
    return make([sys.executable, str(EXAMPLE)], fixture_root, env={"MINIMAL_PROVISIONER_STATE": str(state)}), state


def is_alive(pid: int) -> bool:
    """Whether `pid` is a running process (a zombie counts as dead)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] not in ("Z", "X")


def wait_dead(pid: int, seconds: float = 3.0) -> bool:
    """Poll until `pid` is dead; return whether it died in time."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_alive(pid):
            return True
        time.sleep(0.05)
    return False


# --------------------------------------------------------------------------- conformance


def test_example_provisioner_passes_every_conformance_check(tmp_path: Path) -> None:
    """The example third parties copy must pass the check they will be held to."""
    results = check_provisioner([sys.executable, str(EXAMPLE)], tmp_path / "fixture", timeout_seconds=10,
                                env={"MINIMAL_PROVISIONER_STATE": str(tmp_path / "state")})
    assert [r.name for r in results] == list(CHECK_NAMES)
    assert all(r.passed for r in results), format_results(results)
    assert format_results(results).endswith(f"{len(CHECK_NAMES)}/{len(CHECK_NAMES)} checks passed: ok")
    assert list((tmp_path / "state").iterdir()) == [], "the check must destroy everything it restored"


BROKEN_EXAMPLES = [
    ("destroy-does-nothing",
     "m.VERBS['destroy'] = lambda: (m.read_request({'project'}), {'ok': True})[1]",
     {"snapshot-after-destroy-shows-nothing"}),
    ("restores-empty-graph",
     "m.load_graph = lambda path: {'nodes': [], 'edges': []}",
     {"snapshot-finds-planted-probes", "restore-isolates-run-identity", "restore-isolates-trials", "destroy-is-scoped"}),
    ("answers-from-nowhere",
     "m.run_probe = lambda probe, items, graph: {'name': probe['name'], 'hits': [{'id': 'x', 'text': "
     "str(probe.get('expect_text'))}], 'found': probe.get('expect_text') is not None}",
     set(CHECK_NAMES) - {"restore-valid-artifacts", "destroy-ok", "destroy-is-idempotent", "responses-are-strict-json"}),
    ("semantic-lane-echoes-the-query",
     "search = m.search; m.search = lambda lane, query, items, graph: "
     "([{'id': 'echo', 'text': query}] if lane == 'semantic' else []) + search(lane, query, items, graph)",
     {"snapshot-misses-absent-memory"}),
]


@pytest.mark.parametrize(("patch", "expected_failures"), [c[1:] for c in BROKEN_EXAMPLES],
                         ids=[c[0] for c in BROKEN_EXAMPLES])
def test_check_catches_subtly_wrong_provisioner(tmp_path: Path, patch: str, expected_failures: set[str]) -> None:
    """A provisioner that looks fine (exit 0, valid JSON) but keeps, loses or invents memory fails the check."""
    wrapper = tmp_path / "broken.py"
    wrapper.write_text(f"import sys\nsys.path.insert(0, {str(EXAMPLE.parent)!r})\nimport minimal_provisioner as m\n"
                       f"{patch}\nsys.exit(m.main(sys.argv[1:]))\n", encoding="utf-8")
    results = check_provisioner([sys.executable, str(wrapper)], tmp_path / "fixture", timeout_seconds=10,
                                env={"MINIMAL_PROVISIONER_STATE": str(tmp_path / "state")})
    assert {r.name for r in results if not r.passed} == expected_failures, format_results(results)
    assert format_results(results).endswith("FAILED")


def test_check_fails_everything_when_provisioner_prints_nothing(tmp_path: Path) -> None:
    """Nothing passes by default: a provisioner that never answers fails every check, including strictness."""
    argv = script(tmp_path, "pass\n")
    results = check_provisioner(argv, tmp_path / "fixture", timeout_seconds=TIMEOUT)
    assert not any(r.passed for r in results), format_results(results)
    assert results[-1].name == "responses-are-strict-json" and "stdout is empty" in results[-1].why


# --------------------------------------------------------------------------- misbehaving provisioners

MISBEHAVIOURS = [
    ("two-objects", "print(json.dumps(RESTORE)); print(json.dumps(RESTORE))\n", ProvisionerOutputError),
    ("array", "print(json.dumps([RESTORE]))\n", ProvisionerOutputError),
    ("garbage", "print('restored fine')\n", ProvisionerOutputError),
    ("trailing-garbage", "print(json.dumps(RESTORE) + ' done')\n", ProvisionerOutputError),
    ("nothing", "pass\n", ProvisionerOutputError),
    ("duplicate-key", "print('{\"project\":\"p-1\",\"project\":\"p-2\",\"queue_before_count\":0,\"restore_seconds\":1}')\n",
     ProvisionerOutputError),
    ("nan", "print('{\"project\":\"p-1\",\"queue_before_count\":0,\"restore_seconds\":NaN}')\n", ProvisionerOutputError),
    ("not-utf8", "sys.stdout.buffer.write(b'\\xff\\xfe')\n", ProvisionerOutputError),
    ("unknown-field", "print(json.dumps({**RESTORE, 'graph_loaded': True}))\n", ProvisionerSchemaError),
    ("missing-field", "RESTORE.pop('restore_seconds'); print(json.dumps(RESTORE))\n", ProvisionerSchemaError),
    ("string-for-int", "print(json.dumps({**RESTORE, 'queue_before_count': '0'}))\n", ProvisionerSchemaError),
    ("exits-3", "print(json.dumps(RESTORE)); sys.exit(3)\n", ProvisionerExitError),
    ("killed-by-signal", "os.kill(os.getpid(), signal.SIGKILL)\n", ProvisionerExitError),
    ("sleeps-forever", "time.sleep(600)\n", ProvisionerTimeoutError),
    ("floods-stdout", "while True:\n    sys.stdout.write('x' * 65536)\n", ProvisionerOutputLimitError),
]


@pytest.mark.parametrize(("body", "error"), [c[1:] for c in MISBEHAVIOURS], ids=[c[0] for c in MISBEHAVIOURS])
def test_misbehaving_provisioner_raises_its_own_error(
    tmp_path: Path, fixture_root: Path, arm: ArmArtifacts, body: str, error: type[ProvisionerError]
) -> None:
    """Each way a provisioner can be wrong while looking fine is refused with its own class, quickly."""
    argv = script(tmp_path, body)
    started = time.monotonic()
    with pytest.raises(error) as caught:
        run(make(argv, fixture_root, output_limit_bytes=64 * 1024).restore("fx", arm, "run-1"))
    assert type(caught.value) is error
    assert time.monotonic() - started < TIMEOUT + 3
    message = str(caught.value)
    assert "'restore'" in message and argv[1] in message, message


GRANDCHILDREN = [
    ("child-sleeps-with-grandchild",
     "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
     "open(os.environ['PID_FILE'], 'w').write(str(p.pid))\ntime.sleep(600)\n"),
    ("child-exits-grandchild-holds-stdout",
     "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
     "open(os.environ['PID_FILE'], 'w').write(str(p.pid))\nprint(json.dumps(RESTORE))\n"),
]


@pytest.mark.parametrize("body", [c[1] for c in GRANDCHILDREN], ids=[c[0] for c in GRANDCHILDREN])
def test_timeout_kills_the_whole_process_group(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts, body: str) -> None:
    """A timed-out provisioner must not leave a grandchild running: the process group is killed."""
    pid_file = tmp_path / "grandchild.pid"
    argv = script(tmp_path, body)
    with pytest.raises(ProvisionerTimeoutError):
        run(make(argv, fixture_root, env={"PID_FILE": str(pid_file)}).restore("fx", arm, "run-1"))
    grandchild = int(pid_file.read_text())
    assert wait_dead(grandchild), f"grandchild {grandchild} survived the timeout"


def test_cancelled_call_kills_the_process_group(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """A caller that gives up (cancels the call) must not leave the provisioner or its children running."""
    pid_file = tmp_path / "grandchild.pid"
    body = ("p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
            "open(os.environ['PID_FILE'], 'w').write(str(p.pid))\ntime.sleep(600)\n")
    call = make(script(tmp_path, body), fixture_root, env={"PID_FILE": str(pid_file)}).restore("fx", arm, "run-1")

    async def give_up() -> None:
        task = asyncio.create_task(call)
        while not pid_file.exists() or not pid_file.read_text():
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    run(give_up())
    assert wait_dead(int(pid_file.read_text()))


def test_missing_executable_is_a_launch_error(fixture_root: Path, arm: ArmArtifacts) -> None:
    """An argv prefix naming no executable fails with a launch error, not an OSError."""
    with pytest.raises(ProvisionerLaunchError, match="cannot start"):
        run(make(["/nonexistent/provisioner"], fixture_root).restore("fx", arm, "run-1"))


def test_chatty_stderr_is_not_data(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """Megabytes of stderr (JSON-looking included) neither break nor feed the response."""
    body = ("sys.stderr.write(json.dumps({'project': 'from-stderr'}) + '\\n')\n"
            "sys.stderr.write('diagnostic line\\n' * 70000)\nprint(json.dumps(RESTORE))\n")
    restored = run(make(script(tmp_path, body), fixture_root, output_limit_bytes=4096).restore("fx", arm, "run-1"))
    assert restored.project == "p-1"


def test_exit_error_keeps_a_bounded_stderr_tail(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """A failing provisioner's stderr is kept only as a bounded tail, and the message quotes its end."""
    body = "sys.stderr.write('x' * 200000 + 'LAST-LINE\\n'); sys.exit(3)\n"
    with pytest.raises(ProvisionerExitError) as caught:
        run(make(script(tmp_path, body), fixture_root, stderr_tail_bytes=1024).restore("fx", arm, "run-1"))
    assert len(caught.value.stderr_tail) == 1024
    assert caught.value.stderr_tail.endswith(b"LAST-LINE\n")
    assert "status 3" in str(caught.value) and "LAST-LINE" in str(caught.value)


SNAPSHOT_LIES = [
    ("found-without-hits",
     "print(json.dumps({'state': {'exists': True, 'evidence_documents': 1, 'graph_nodes': 0, 'graph_edges': 0},"
     " 'probes': [{'name': 'p', 'hits': [], 'found': True}], 'queue_after_count': 0, 'snapshot_seconds': 0}))\n"),
    ("wrong-probe-name",
     "print(json.dumps({'state': {'exists': True, 'evidence_documents': 1, 'graph_nodes': 0, 'graph_edges': 0},"
     " 'probes': [{'name': 'other', 'hits': [], 'found': False}], 'queue_after_count': 0, 'snapshot_seconds': 0}))\n"),
]


@pytest.mark.parametrize("body", [c[1] for c in SNAPSHOT_LIES], ids=[c[0] for c in SNAPSHOT_LIES])
def test_snapshot_probe_receipt_must_be_truthful(tmp_path: Path, fixture_root: Path, body: str) -> None:
    """A snapshot cannot claim memory was retrievable without returning the hits that show it."""
    probe = Probe(name="p", lane="fulltext", query="kestrel", expect_ids=("alpha-doc-1",))
    with pytest.raises(ProbeReceiptError):
        run(make(script(tmp_path, body), fixture_root).snapshot("p-1", [probe]))


# --------------------------------------------------------------------------- artifacts


def _escape_dotdot(root: Path, outside: Path) -> ArtifactRef:
    return ArtifactRef.model_construct(path="../outside/evidence.jsonl", sha256=sha256_file(outside))


def _escape_absolute(root: Path, outside: Path) -> ArtifactRef:
    return ArtifactRef.model_construct(path=str(outside), sha256=sha256_file(outside))


def _escape_symlink(root: Path, outside: Path) -> ArtifactRef:
    (root / "linked.jsonl").symlink_to(outside)
    return ArtifactRef(path="linked.jsonl", sha256=sha256_file(outside))


def _escape_symlinked_dir(root: Path, outside: Path) -> ArtifactRef:
    (root / "linked-dir").symlink_to(outside.parent, target_is_directory=True)
    return ArtifactRef(path="linked-dir/evidence.jsonl", sha256=sha256_file(outside))


def _wrong_digest(root: Path, outside: Path) -> ArtifactRef:
    return ArtifactRef(path="memtrial-check/alpha/evidence.jsonl", sha256="0" * 64)


def _missing_file(root: Path, outside: Path) -> ArtifactRef:
    return ArtifactRef(path="memtrial-check/alpha/nope.jsonl", sha256="0" * 64)


BAD_ARTIFACTS = [
    ("dotdot", _escape_dotdot, FixtureArtifactEscapeError),
    ("absolute", _escape_absolute, FixtureArtifactEscapeError),
    ("symlink", _escape_symlink, FixtureArtifactEscapeError),
    ("symlinked-dir", _escape_symlinked_dir, FixtureArtifactEscapeError),
    ("digest-mismatch", _wrong_digest, FixtureArtifactDigestError),
    ("missing", _missing_file, FixtureArtifactMissingError),
]


@pytest.mark.parametrize(("make_ref", "error"), [c[1:] for c in BAD_ARTIFACTS], ids=[c[0] for c in BAD_ARTIFACTS])
def test_bad_artifact_is_refused_before_the_provisioner_runs(
    tmp_path: Path, fixture_root: Path, make_ref: Any, error: type[ProvisionerError]
) -> None:
    """An artifact outside the fixture root or with the wrong digest never reaches the memory system."""
    outside = tmp_path / "outside" / "evidence.jsonl"
    outside.parent.mkdir()
    outside.write_text('{"id": "secret", "text": "not part of the fixture"}\n', encoding="utf-8")
    marker = tmp_path / "ran"
    argv = script(tmp_path, f"open({str(marker)!r}, 'w').close()\nprint(json.dumps(RESTORE))\n")
    arm = ArmArtifacts(arm="on", evidence=make_ref(fixture_root, outside), graph=None)
    with pytest.raises(error) as caught:
        run(make(argv, fixture_root).restore("fx", arm, "run-1"))
    assert type(caught.value) is error
    assert not marker.exists(), "the provisioner ran although the artifact was refused"
    if error is FixtureArtifactDigestError:
        assert isinstance(caught.value, DigestMismatchError)


def test_request_is_one_compact_object_with_verified_absolute_paths(
    tmp_path: Path, fixture_root: Path, arm: ArmArtifacts
) -> None:
    """The provisioner receives one compact JSON line whose artifact paths are absolute and inside the root."""
    raw = tmp_path / "stdin.bin"
    body = f"open({str(raw)!r}, 'wb').write(sys.stdin.buffer.read())\nprint(json.dumps(RESTORE))\n"
    argv = script(tmp_path, body, prelude=PRELUDE.replace("request = json.loads(sys.stdin.read())\n", ""))
    run(make(argv, fixture_root).restore("fx", arm, "run-1"))
    data = raw.read_bytes()
    assert data.count(b"\n") == 1 and data.endswith(b"\n")
    assert b": " not in data and b", " not in data
    request = json.loads(data)
    assert set(request) == {"fixture", "graph_arm", "run_identity", "artifacts"}
    for path in request["artifacts"].values():
        assert Path(path).is_absolute() and Path(path).is_relative_to(fixture_root.resolve())


# --------------------------------------------------------------------------- finalizer


def test_destroy_runs_when_the_body_raises(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """A failing run must not leave its memory live: destroy runs in the finalizer (seen on disk)."""
    provisioner, state = example(tmp_path, fixture_root)
    seen: list[Path] = []

    async def body() -> None:
        async with provisioned(provisioner, "fx", arm, "run-1") as live:
            seen.append(state / live.project)
            assert seen[0].is_dir()
            snap = await live.snapshot(write_check_fixture(fixture_root)[0].probes)
            assert all(p.found for p in snap.probes)
            raise RuntimeError("agent crashed")

    with pytest.raises(RuntimeError, match="agent crashed"):
        run(body())
    assert seen and not seen[0].exists()


def test_failed_destroy_does_not_hide_the_body_error(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """When both the body and destroy fail, the body's error propagates with the destroy failure noted."""
    argv = script(tmp_path, "if verb == 'destroy':\n    sys.exit(1)\nprint(json.dumps(RESTORE))\n")

    async def body() -> None:
        async with provisioned(make(argv, fixture_root), "fx", arm, "run-1"):
            raise ValueError("body failed")

    with pytest.raises(ValueError, match="body failed") as caught:
        run(body())
    assert any("destroy" in note for note in caught.value.__notes__)


def test_sync_context_manager_destroys(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    """The synchronous wrapper restores on entry and destroys on exit."""
    provisioner, state = example(tmp_path, fixture_root)
    with provisioned_sync(provisioner, "fx", arm, "run-1") as restored:
        assert (state / restored.project).is_dir()
    assert not (state / restored.project).exists()


# --------------------------------------------------------------------------- error classes


def test_error_classes_are_distinct_memtrial_errors_with_one_line_docstrings() -> None:
    """Each refusal has its own class so callers and reports can tell them apart."""
    classes = [c for c in vars(prov).values() if isinstance(c, type) and issubclass(c, ProvisionerError)]
    assert len(classes) == len(set(classes)) >= 11
    for cls in classes:
        assert issubclass(cls, MemtrialError)
        assert cls.__doc__ and "\n" not in cls.__doc__.strip(), cls


# --------------------------------------------------------------------------- rejected restores, later verbs

LOGGING = PRELUDE + """\
with open(os.environ['VERB_LOG'], 'a') as log:
    log.write(verb + ' ' + str(request.get('project', '')) + '\\n')
"""


@pytest.mark.parametrize(
    ("restore_body", "error"),
    [
        ("print(json.dumps({**RESTORE, 'graph_loaded': True}))\n", ProvisionerSchemaError),
        ("print(json.dumps({**RESTORE, 'env': {'PATH': '/evil'}}))\n", ProvisionerSchemaError),
        (f"print(json.dumps({{**RESTORE, 'env': {{{MEMORY_OFF_ENV!r}: '0'}}}}))\n", ProvisionerSchemaError),
        ("print(json.dumps(RESTORE) + ' and more')\n", ProvisionerOutputError),
    ],
    ids=["unknown-field", "env-sets-path", "env-sets-kill-switch", "trailing-text"],
)
def test_a_rejected_restore_that_names_its_project_is_destroyed(
    tmp_path: Path, fixture_root: Path, arm: ArmArtifacts, restore_body: str, error: type[ProvisionerError]
) -> None:
    """Live state behind a response memtrial refuses would otherwise leak: the named project is destroyed."""
    log = tmp_path / "verbs.log"
    body = (f"if verb == 'restore':\n    {restore_body}"
            "else:\n    print(json.dumps({'ok': True}))\n")
    with pytest.raises(error) as caught:
        run(make(script(tmp_path, body, LOGGING), fixture_root, env={"VERB_LOG": str(log)}).restore("fx", arm, "run-1"))
    assert log.read_text().splitlines() == ["restore ", "destroy p-1"]
    assert any("'p-1' the rejected response named was destroyed" in note for note in caught.value.__notes__)


def test_a_rejected_restore_naming_no_valid_project_destroys_nothing(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    log = tmp_path / "verbs.log"
    body = "print(json.dumps({**RESTORE, 'project': '../etc', 'extra': 1}))\n"
    with pytest.raises(ProvisionerSchemaError):
        run(make(script(tmp_path, body, LOGGING), fixture_root, env={"VERB_LOG": str(log)}).restore("fx", arm, "run-1"))
    assert log.read_text().splitlines() == ["restore "]


def test_restore_env_reaches_the_caller(tmp_path: Path, fixture_root: Path, arm: ArmArtifacts) -> None:
    body = "print(json.dumps({**RESTORE, 'env': {'MEMORY_SOCKET': '/run/m.sock'}}))\n"
    restored = run(make(script(tmp_path, body), fixture_root).restore("fx", arm, "run-1"))
    assert restored.env == {"MEMORY_SOCKET": "/run/m.sock"}


SNAPSHOT_OK = ("{'state': {'exists': True, 'evidence_documents': 0, 'graph_nodes': 0, 'graph_edges': 0}, "
               "'probes': [], 'queue_after_count': 0, 'snapshot_seconds': 0.1}")
LATER_VERBS = [
    ("snapshot", f"print(json.dumps({{**{SNAPSHOT_OK}, 'cache_hits': 3}}))\n", ProvisionerSchemaError),
    ("snapshot", "print('snapshot ok')\n", ProvisionerOutputError),
    ("snapshot", f"print(json.dumps({SNAPSHOT_OK})); sys.exit(1)\n", ProvisionerExitError),
    ("snapshot", "time.sleep(600)\n", ProvisionerTimeoutError),
    ("destroy", "print(json.dumps({'ok': False}))\n", ProvisionerSchemaError),
    ("destroy", "print(json.dumps({'ok': True, 'removed': 2}))\n", ProvisionerSchemaError),
    ("destroy", "print(json.dumps({'ok': True}) + json.dumps({'ok': True}))\n", ProvisionerOutputError),
    ("destroy", "while True:\n    sys.stdout.write('x' * 65536)\n", ProvisionerOutputLimitError),
]


@pytest.mark.parametrize(("verb", "body", "error"), LATER_VERBS,
                         ids=[f"{c[0]}-{c[2].__name__}-{i}" for i, c in enumerate(LATER_VERBS)])
def test_snapshot_and_destroy_are_held_to_the_same_rules(
    tmp_path: Path, fixture_root: Path, verb: str, body: str, error: type[ProvisionerError]
) -> None:
    pid_file = tmp_path / "child.pid"
    argv = script(tmp_path, "open(os.environ['PID_FILE'], 'w').write(str(os.getpid()))\n" + body)
    provisioner = make(argv, fixture_root, env={"PID_FILE": str(pid_file)}, output_limit_bytes=64 * 1024)
    call = provisioner.snapshot("p-1") if verb == "snapshot" else provisioner.destroy("p-1")
    with pytest.raises(error) as caught:
        run(call)
    assert type(caught.value) is error and f"'{verb}'" in str(caught.value)
    assert wait_dead(int(pid_file.read_text())), "the provisioner outlived its rejected call"
