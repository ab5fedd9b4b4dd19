"""Hostile class: an agent that tells its arm from the metadata of the memories it is served.

Memories planted for `harm:superseded` and `harm:contradictory` were served with `kind: superseded`,
which no `on` arm serves, and `placebo` memories were all `fact`s while `on` served conventions and
corrections; per-hit `lanes` named the `corrections` lane only where a correction was planted, and a
reference id (the first 16 hex of sha256(realm, counter, kind, text)) could be searched back to its
kind from the realm and text the agent holds. An agent that ignores whatever looks stale or placebo
cannot be harmed, and measured damage reads 0. One real paired matrix with a probing `command` agent
(unprivileged, in the real sandbox, asking the witness's socket itself; `hostile_matrix`) records
every hit served in `on`, `placebo` and both harm arms; every field must have one form in all of them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from hostile_matrix import run_command_matrix
from tasks_lib.agents.base import Transcript
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory import env as memory_env_names
from tasks_lib.memory.reference.store import memory_id
from tasks_lib.sandbox.local import LocalSandbox

TASK = "logship-partial-exit"
"""A task with placebo memories and every harm variant (its stale value is planted as `superseded`)."""
CONDITIONS = ("on", "placebo", "harm:superseded", "harm:contradictory")
KINDS = ("convention", "fact", "decision", "procedure", "correction", "superseded")
PROBE = f"""
import json, os, socket
def ask(request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(os.environ[{memory_env_names.SOCKET_ENV!r}])
        conn.sendall((json.dumps(request) + "\\n").encode())
        return json.loads(conn.makefile("rb").readline())
realm = os.environ[{memory_env_names.REALM_ENV!r}]
answers = [ask({{"op": "recall", "realm": realm, "query": q, "k": 20, "lanes": None}})
           for q in ("exit status partial delivery pager", "partial", "status", "delivery acknowledged", "log shipping exit code")]
print(json.dumps({{"kind": "message", "text": json.dumps({{"realm": realm, "answers": answers}})}}))
"""
"""The probing agent: five recalls over every lane in its realm, straight to the socket; prints every answer."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Condition -> {realm, hits (every hit of every answer, in order)} as the probing agent saw them."""
    if LocalSandbox().capabilities().isolation != "namespace":
        pytest.skip("bubblewrap is not usable here; the agent's view would not be the sandbox's")
    tmp_path = tmp_path_factory.mktemp("arm-metadata")
    records, store = run_command_matrix(tmp_path / "artifacts", PROBE, [TASK], CONDITIONS, "metadata")
    return {r.condition: _probe(store.get_json(r.transcript or "", Transcript), r) for r in records}


def _probe(transcript: Transcript, record: RunRecord) -> dict[str, object]:
    messages = [s.text for s in transcript.steps if s.source == "agent" and s.kind == "message"]
    assert messages, f"{record.condition}: the probe printed nothing: {transcript.steps}"
    seen = json.loads(messages[0])
    hits = [hit for answer in seen["answers"] for hit in answer.get("hits") or []]
    assert all(answer.get("ok") for answer in seen["answers"]), seen["answers"]
    return {"realm": seen["realm"], "hits": hits}


def _stale_text() -> str:
    (task,) = [t for t in load_tasks(Path(__file__).resolve().parents[1] / "corpora" / "tasks") if t.task_id == TASK]
    assert task.manifest.harm is not None
    (stale,) = [m.text for m in task.manifest.harm.superseded if m.kind == "superseded"]
    return stale


def test_a_harm_or_placebo_arm_serves_memories_of_the_same_kind_lanes_and_scores_as_on(served: dict[str, dict[str, object]]) -> None:
    """Regression: harm arms served `kind: superseded` (no `on` arm does), placebo served only `fact`s,
    and only `on` hits named the `corrections` lane; an agent skipping such memories was never harmed.
    Every field but the text must take the same values, by rank, in every arm."""
    assert any(h["text"] == _stale_text() for h in served["harm:superseded"]["hits"]), "the stale memory was never served: proves nothing"
    forms = {}
    for condition, seen in served.items():
        hits = seen["hits"]
        assert hits, f"{condition}: nothing served, nothing compared"
        forms[condition] = {
            "fields": sorted({tuple(sorted(h)) for h in hits}),
            "kinds": sorted({h["kind"] for h in hits}),
            "lanes": sorted({tuple(h["lanes"]) for h in hits}),
            "metadata": sorted({(h.get("speaker"), h.get("timestamp"), h.get("session")) for h in hits}),
            "ids": sorted({bool(re.fullmatch(r"[0-9a-f]{16}", h["id"])) for h in hits}),
        }
    assert all(form == forms["on"] for form in forms.values()), json.dumps(forms, indent=1)
    for condition, seen in served.items():
        answers_scores = [h["score"] for h in seen["hits"]]
        assert set(answers_scores) <= {round(1 / (rank + 1), 6) for rank in range(20)}, (condition, answers_scores)


def test_a_served_id_cannot_be_searched_back_to_its_planted_kind(served: dict[str, dict[str, object]]) -> None:
    """Regression: a served id was the reference store's sha256(realm, counter, kind, text)[:16]; with its
    realm and the text in hand, an agent tried the six kinds and a few counters and read `superseded`
    off the id. No served id may be recomputed from what the agent holds."""
    for condition, seen in served.items():
        for hit in seen["hits"]:  # type: ignore[attr-defined]
            guesses = {memory_id(str(seen["realm"]), counter, kind, hit["text"]) for counter in range(50) for kind in KINDS}
            assert hit["id"] not in guesses, f"{condition}: id {hit['id']} of {hit['text'][:40]!r} recomputed from realm, kind and text"
