"""Hostile classes 4 and 5: memory reachable where it must not be, and an agent that can tell its arm.

What the memory side shows an agent (its realm, the delivered block's wording, its environment, its
paths, its HOME) must have one form in every condition and name no condition, task corpus or harness;
an `off` or `ablate:all` arm must find no store, socket or replica anywhere it can look, and an
`ablate:<lane>` arm's replica must not answer that lane even when the agent opens it itself. One real
paired run with an observing `command` agent (unprivileged, in the real sandbox) records everything
it can see in each arm; the tests below diff and search those observations."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping
from pathlib import Path

import pytest

from hostile_flow import run_hostile
from tasks_lib.agents.base import Transcript
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.memory import env as memory_env_names
from tasks_lib.memory.delivery.notes import NOTES_PATHS
from tasks_lib.memory.delivery.provenance import find_provenance, wrap_block
from tasks_lib.memory.realms import new_run_secret, trial_realm
from tasks_lib.sandbox.local import LocalSandbox

GIVEAWAYS = re.compile(r"memtrial|benchmark|harness|trial|condition|ablat|calibration|\boff\b|\bon\b|logship", re.I)
"""Words that would tell an agent it is being measured, or in which arm."""


@pytest.mark.parametrize("condition", ["off", "on", "ablate:all", "ablate:keyword", "notes", "placebo", "harm:superseded", "harm:adjacent"])
def test_the_realm_an_agent_may_see_names_no_arm(condition: str) -> None:
    """Regression: `trial:<run>.<task>.<condition>.t0` handed the agent its condition and task id."""
    realm = trial_realm(new_run_secret(), "paired-20261203-101010-abc123", "logship-partial-exit", condition, 2)
    assert not GIVEAWAYS.search(realm), realm


def test_the_delivered_block_is_worded_neutrally() -> None:
    """Regression: delivered memory was wrapped in `<!-- memtrial-memory ... -->`, naming the apparatus."""
    block = wrap_block("prompt-time", ["1f2e3d4c5b6a7980"], "Partial deliveries exit with status 17.")
    marker_lines = [line for line in block.splitlines() if line.startswith("<!--")]
    assert len(marker_lines) == 2 and not any(GIVEAWAYS.search(line) for line in marker_lines), marker_lines
    assert find_provenance(block) == [("prompt-time", ("1f2e3d4c5b6a7980",))]


# --------------------------------------------------------------------------- what an agent sees, per arm

TASK = "logship-partial-exit"
"""A task with planted memories (the exit-status convention and a fact)."""
CONDITIONS = ("off", "on", "ablate:all", "ablate:keyword", "notes", "placebo", "harm:superseded")
KEYWORD = "pager"
"""A word only a planted memory holds: a keyword-lane probe for it finds the convention."""
OBSERVER = f"""
import json, os, socket, stat, sqlite3, sys

def listing(top):
    out = []
    for root, dirs, files in os.walk(top):
        dirs.sort()
        out += sorted(os.path.relpath(os.path.join(root, n), top) for n in dirs + files)
    return out

def read(path):
    try:
        with open(path, errors="replace") as f:
            return f.read()
    except OSError as error:
        return type(error).__name__

stores, sockets, texts = [], [], []
mounted = [line.split()[4] for line in read("/proc/self/mountinfo").splitlines()]
toolchain = ("/usr", "/bin", "/sbin", "/lib", "/proc", "/dev")
for top in {{"/etc", "/home", "/tmp", "/var", os.getcwd(), os.environ["HOME"], *(m for m in mounted if not m.startswith(toolchain))}}:
    for root, dirs, files in os.walk(top):
        for name in files:
            path = os.path.join(root, name)
            try:
                mode = os.lstat(path).st_mode
                if stat.S_ISSOCK(mode):
                    sockets.append(path)
                elif stat.S_ISREG(mode):
                    with open(path, "rb") as f:
                        if f.read(16) == b"SQLite format 3\\x00":
                            stores.append(path)
            except OSError:
                pass
probe = {{}}
for path in sorted(set(stores)):
    try:
        db = sqlite3.connect(f"file:{{path}}?mode=ro", uri=True)
        texts += [row[0] for row in db.execute("SELECT text FROM memories")]
        probe[path] = {{
            "fts_rows": db.execute("SELECT count(*) FROM memories_fts").fetchone()[0],
            "keyword_hits": db.execute("SELECT count(*) FROM memories_fts WHERE memories_fts MATCH ?", ({KEYWORD!r},)).fetchone()[0],
        }}
    except sqlite3.Error as error:
        probe[path] = {{"error": str(error)}}
def ask(path, request):
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(10)
            conn.connect(path)
            conn.sendall((json.dumps(request) + "\\n").encode())
            return json.loads(conn.makefile("rb").readline())
    except (OSError, ValueError) as error:
        return {{"error": type(error).__name__ + ": " + str(error)}}
realm = os.environ.get({memory_env_names.REALM_ENV!r}, "")
for path in sorted(set(sockets)):
    keyword = ask(path, {{"op": "recall", "realm": realm, "query": {KEYWORD!r}, "k": 5, "lanes": ["keyword"]}})
    every = ask(path, {{"op": "recall", "realm": realm, "query": {KEYWORD!r}, "k": 5, "lanes": None}})
    texts += [hit["text"] for hit in every.get("hits") or []]
    probe[path] = {{"keyword_hits": len(keyword.get("hits") or []), "all_hits": len(every.get("hits") or []), "answers": [keyword, every]}}
stdin = sys.stdin.read()
seen = {{
    "env": dict(os.environ), "argv": sys.argv, "cwd": os.getcwd(), "uid": os.getuid(),
    "stdin": stdin.split("\\n\\n<system-reminder>")[0].rstrip(), "home": listing(os.environ["HOME"]),
    "workspace": listing("."), "tmp": listing("/tmp"), "mountinfo": read("/proc/self/mountinfo"),
    "transcript": [json.loads(line) for line in read(os.environ[{memory_env_names.TRANSCRIPT_ENV!r}]).splitlines()],
    "stores": sorted(set(stores)), "sockets": sockets, "texts": texts, "probe": probe,
    "notes": {{rel: read(os.path.join(os.environ["HOME"], rel)) for rel in {list(NOTES_PATHS)!r}}},
    "reminders": stdin.split("\\n\\n<system-reminder>")[1:],
}}
print(json.dumps({{"kind": "message", "text": json.dumps(seen)}}))
"""
"""The observing agent: records what it can see, searches every folder it can write or that is mounted
(all but the toolchain) for a store or socket, opens every store it finds itself (no hook, no
memtrial code: plain sqlite3), asks every socket it finds itself (a keyword-lane recall and one
over every lane, in its realm), then prints it all as one message."""


@pytest.fixture(scope="module")
def seen(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Condition -> what the observing agent recorded in that arm (its first prompt)."""
    if LocalSandbox().capabilities().isolation != "namespace":
        pytest.skip("bubblewrap is not usable here; the agent's view would not be the sandbox's")
    tmp_path = tmp_path_factory.mktemp("blind-arms")
    with pytest.MonkeyPatch.context() as monkeypatch:
        records = run_hostile(tmp_path, monkeypatch, OBSERVER, [TASK], conditions=CONDITIONS, run_id="blind")
    store = open_store(tmp_path / "artifacts")
    return {r.condition: _observation(store.get_json(r.transcript or "", Transcript), r) for r in records}


def _observation(transcript: Transcript, record: RunRecord) -> dict[str, object]:
    messages = [s.text for s in transcript.steps if s.source == "agent" and s.kind == "message"]
    assert messages, f"{record.condition}: the observer printed nothing: {transcript.steps}"
    return {**json.loads(messages[0]), "injection": record.injection, "outcome": record.outcome}


RANDOM = [
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<uuid>"),
    (re.compile(r"project:[0-9a-f]{16}"), "project:<realm>"),
    (re.compile(r"tmp[A-Za-z0-9_]{8}"), "tmp<random>"),
    (re.compile(r"\b(?:shared|master|propagate_from):\d+"), "<peer>"),
]
"""Run-specific random parts: the session id, the realm's digest, temp folder names, mount peer groups."""


def _normalized(value: object) -> object:
    text = json.dumps(value, sort_keys=True)
    for pattern, replacement in RANDOM:
        text = pattern.sub(replacement, text)
    return json.loads(text)


def _view(observed: Mapping[str, object]) -> object:
    """What an agent sees, minus the memory variable and what its memory delivers (the witness socket's
    mount and folder, the hook's steps in the transcript); mount ids and device numbers dropped."""
    env = dict(observed["env"])  # type: ignore[call-overload]
    sock = env.pop(memory_env_names.SOCKET_ENV, None)
    mounted = str(Path(sock).parent) if sock else None
    folder = Path(sock).parent.parent.name + "/" if sock else None
    mounts = [" ".join(line.split()[3:]) for line in str(observed["mountinfo"]).splitlines()]
    return _normalized({
        **{k: observed[k] for k in ("argv", "cwd", "stdin", "home", "workspace")},
        "uid": "<per-attempt>" if observed["uid"] != 0 else 0,  # each attempt runs as a fresh unprivileged uid
        "env": env,
        "tmp": sorted(_normalized([p for p in observed["tmp"] if not (folder and (p + "/").startswith(folder))])),  # type: ignore[union-attr, call-overload]
        "mounts": sorted(_normalized([m for m in mounts if not (mounted and mounted in m)])),  # type: ignore[call-overload]
        "transcript": [s for s in observed["transcript"] if s.get("source") != "hook"],  # type: ignore[union-attr]
    })


def _difference(got: object, want: object) -> object:
    """The items only one side has (for lists), else both values."""
    if isinstance(got, list) and isinstance(want, list):
        here, there = Counter(map(json.dumps, got)), Counter(map(json.dumps, want))
        return {"only here": sorted((here - there).elements()), "only in on": sorted((there - here).elements())}
    return {"here": got, "on": want}


def test_an_off_arm_differs_from_on_only_by_its_memory(seen: dict[str, dict[str, object]]) -> None:
    """Regression: `off` carried MEMTRIAL_MEMORY_OFF=1 and `ablate:*` a lane switch, so an agent could read
    its arm off its environment; every other name, path, file and mount must match `on` exactly."""
    on = _view(seen["on"])
    for condition in ("off", "ablate:all", "ablate:keyword"):
        view = _view(seen[condition])
        assert view == on, f"{condition} differs from on beyond its memory: " + json.dumps(
            {k: _difference(view[k], on[k]) for k in on if view[k] != on[k]})  # type: ignore[index]
    assert memory_env_names.SOCKET_ENV in seen["on"]["env"] and memory_env_names.SOCKET_ENV not in seen["off"]["env"]  # type: ignore[operator]
    assert seen["on"]["injection"] == "yes" and seen["off"]["injection"] == "no"


def test_nothing_an_agent_sees_names_the_apparatus_or_its_arm(seen: dict[str, dict[str, object]]) -> None:
    """Regression: variable names said MEMTRIAL, the session id named the harness, the scratch folder
    was `memtrial-arm-*`: any of them tells the agent it is measured."""
    for condition, observed in seen.items():
        names = " ".join(observed["env"])  # type: ignore[arg-type]
        env = {k: v for k, v in observed["env"].items() if k != memory_env_names.HOOK_ARGV_ENV}  # type: ignore[union-attr]
        values = json.dumps({"env": env, **{k: observed[k] for k in ("argv", "cwd", "home", "tmp")}})  # hook argv: see README
        assert not re.search(r"memtrial|ablat|\boff\b", names + " " + values, re.I), (condition, names, values)
        assert not {memory_env_names.MEMORY_OFF_ENV, memory_env_names.ABLATE_LANES_ENV} & set(observed["env"]), condition  # type: ignore[arg-type]


@pytest.mark.parametrize("condition", ["placebo", "harm:superseded"])
def test_a_placebo_or_harm_arm_looks_exactly_like_on(seen: dict[str, dict[str, object]], condition: str) -> None:
    """The placebo and harm arms go through the same memory system, witness and socket as `on`: what the
    agent sees must match `on` exactly but for what its memory delivers (else it could tell a placebo)."""
    assert _view(seen[condition]) == _view(seen["on"]), condition
    assert memory_env_names.SOCKET_ENV in seen[condition]["env"] and seen[condition]["injection"] == "yes"  # type: ignore[operator]


def test_the_notes_arm_differs_from_off_only_by_the_notes_its_harness_loads(seen: dict[str, dict[str, object]]) -> None:
    """The notes arm reaches no memory system (no socket, no store); the only difference from `off` is the
    notes file the agent's harness loads from the arm's HOME (for the command agent: its adapter, as the
    first prompt's reminder and a `notes-file` transcript step), worded neutrally; no other arm gets it."""
    def without_notes(view: object) -> object:
        steps = [s for s in view["transcript"] if s.get("channel") != "notes-file"]  # type: ignore[index]
        return {**view, "transcript": steps}  # type: ignore[dict-item]

    assert without_notes(_view(seen["notes"])) == without_notes(_view(seen["off"]))
    assert (seen["notes"]["stores"], seen["notes"]["sockets"]) == ([], []) and seen["notes"]["injection"] == "yes"
    (reminder,) = seen["notes"]["reminders"]  # type: ignore[misc]
    assert all(m.text in reminder for m in _task_memories()), reminder
    wording = reminder
    for m in _task_memories():
        wording = wording.replace(m.text, "")
    assert not GIVEAWAYS.search(wording), wording  # the harness's and the runner's own words, not the task's memories'
    for condition in ("off", "ablate:all"):
        assert seen[condition]["reminders"] == [], condition
    for condition in ("on", "ablate:keyword", "placebo", "harm:superseded"):
        assert not any("Contents of" in r for r in seen[condition]["reminders"]), condition  # type: ignore[union-attr]


def _task_memories() -> list:  # type: ignore[type-arg]
    return [t for t in load_tasks(Path(__file__).resolve().parents[1] / "corpora" / "tasks") if t.task_id == TASK][0].manifest.memories


@pytest.mark.parametrize("condition", ["off", "ablate:all"])
def test_an_arm_without_memory_finds_no_store_or_socket_anywhere(seen: dict[str, dict[str, object]], condition: str) -> None:
    """Regression: the store was mounted read-only into `ablate:all`, and an agent reading it directly
    passed with injection "no"; nothing may be planted, mounted or named for an arm without memory."""
    observed = seen[condition]
    assert seen["on"]["sockets"], "the search found no socket even in `on`: it proves nothing"
    assert (observed["stores"], observed["sockets"], observed["texts"]) == ([], [], []), condition
    assert observed["injection"] == "no" and observed["outcome"] == "fail", condition
    memories = [m.text for t in load_tasks(Path(__file__).resolve().parents[1] / "corpora" / "tasks")
                if t.task_id == TASK for m in t.manifest.memories]
    assert not any(text in json.dumps(observed) for text in memories), f"{condition} saw a planted memory"


def test_an_ablated_lane_cannot_be_queried_even_by_asking_the_socket_itself(seen: dict[str, dict[str, object]]) -> None:
    """Regression: `ablate:keyword` got the full replica and a switch asking the hook to skip the lane;
    an agent opening the file itself still had every keyword row. Now no arm sees a store file at all,
    and the witness's socket drops the lane whatever the agent asks; the same keyword probe must find
    the memory in `on` (else it proves nothing), and the other lanes still answer under the ablation."""
    assert (seen["on"]["stores"], seen["ablate:keyword"]["stores"]) == ([], []), "a store file is reachable by the agent"
    (on_probe,) = seen["on"]["probe"].values()  # type: ignore[union-attr]
    (ablated_probe,) = seen["ablate:keyword"]["probe"].values()  # type: ignore[union-attr]
    assert on_probe["keyword_hits"] >= 1, on_probe
    assert ablated_probe["keyword_hits"] == 0 and ablated_probe["all_hits"] >= 1, ablated_probe
