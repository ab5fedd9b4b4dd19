"""Hostile class: an agent that names its own condition by recomputing its realm.

The realm was the first 16 hex of sha256(run id, task, condition, trial). The run id is a timestamp
and 24 random bits, the task and trial are easy to guess, and the agent holds its realm, so an
`ablate:all` attempt searched the run ids with the compiler and libcrypto under `/usr` and named its
condition in minutes. Now the realm is an HMAC under a per-run secret kept in the run folder, which
no sandbox mounts. One real paired matrix (`hostile_matrix`) with a `command` agent that records
what it can see (its realm, its environment, its first prompt): given everything it holds, and even the exact run id,
task and trial, no condition's keyless digest gives its realm; under the run's secret, each does.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hostile_matrix import run_command_matrix
from tasks_lib.agents.base import Transcript
from tasks_lib.artifacts import open_store, run_key
from tasks_lib.conditions import known_conditions
from tasks_lib.memory import env as memory_env_names
from tasks_lib.memory.realms import ensure_run_secret, trial_realm
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.run.layout import REALMS_KEY as RUN_SECRET_KEY
from tasks_lib.sandbox.local import LocalSandbox

TASK = "logship-partial-exit"
CONDITIONS = ("off", "on", "ablate:all")
RUN = "realms"
OBSERVER = f"""
import json, os, sys
seen = {{"realm": os.environ.get({memory_env_names.REALM_ENV!r}, ""), "env": dict(os.environ), "stdin": sys.stdin.read()}}
print(json.dumps({{"kind": "message", "text": json.dumps(seen)}}))
"""
"""The agent: records its realm, environment and prompt, as a brute-forcing agent would start."""


def _keyless(run_id: str, task: str, condition: str, trial: int) -> str:
    """The realm as it used to be derived: `project:` and 16 hex of a SHA-256 anyone can recompute."""
    return "project:" + hashlib.sha256("\0".join((run_id, task, condition, str(trial))).encode()).hexdigest()[:16]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[tuple[object, dict[str, object]]]]:
    """The artifact root and, per hostile record, what its agent saw."""
    if LocalSandbox().capabilities().isolation != "namespace":
        pytest.skip("bubblewrap is not usable here; the agent's view would not be the sandbox's")
    tmp_path = tmp_path_factory.mktemp("realm-guessing")
    records, store = run_command_matrix(tmp_path / "artifacts", OBSERVER, [TASK], CONDITIONS, RUN)
    out = []
    for record in records:
        transcript = store.get_json(record.transcript or "", Transcript)
        (message,) = [s.text for s in transcript.steps if s.source == "agent" and s.kind == "message"]
        out.append((record, json.loads(message)))
    return tmp_path / "artifacts", out


def test_a_realm_cannot_be_recomputed_from_the_run_id_task_condition_and_trial(run: tuple[Path, list]) -> None:  # type: ignore[type-arg]
    """Regression: an `ablate:all` agent recovered the run id by brute force and named its condition from
    sha256(run id, task, condition, trial). Handed the exact run id, task and trial, the keyless digest
    of no condition may give the realm the agent saw; the run's secret must (else the test proves nothing)."""
    root, seen = run
    assert {r.condition for r, _ in seen} == set(CONDITIONS)
    secret = ensure_run_secret(open_store(root), RUN)
    for record, observed in seen:
        realm = observed["realm"]
        assert realm, f"{record.condition}: the agent saw no realm"
        guesses = {_keyless(record.run_id, record.task_id, c, record.trial) for c in known_conditions(LANES)}
        assert realm not in guesses, f"{record.condition}: realm {realm} recomputed without any secret"
        assert realm == trial_realm(secret, record.run_id, record.task_id, record.condition, record.trial), record.condition


def test_the_run_secret_stays_in_the_run_folder_and_out_of_every_record_receipt_and_view(run: tuple[Path, list]) -> None:  # type: ignore[type-arg]
    """The secret keys every realm, so it must reach no agent and no published evidence: it is stored
    once, under the run folder (read again by a rerun), and no other artifact nor the agent's view holds it."""
    root, seen = run
    store = open_store(root)
    secret_key = run_key(RUN, RUN_SECRET_KEY)
    secret_hex = store.get_bytes(secret_key).decode().strip()
    assert len(secret_hex) == 64
    for path in root.rglob("*"):
        if path.is_file() and path.relative_to(root).as_posix() != secret_key:
            assert secret_hex.encode() not in path.read_bytes(), f"{path} holds the run's realm secret"
    for record, observed in seen:
        assert secret_hex not in json.dumps(observed), f"{record.condition}: the agent saw the run's realm secret"
    assert ensure_run_secret(store, RUN).hex() == secret_hex, "a rerun would draw a new secret and move every realm"
