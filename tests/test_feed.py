"""The experience feed and the grep arm: transcripts fed through a memory system's own write path,
or read as plain files; the calibration agent's known effect is recovered exactly under both, a
system whose ingest ignores the transcripts scores like `off`, and the grep folder reaches no other arm."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript, TranscriptStep
from tasks_lib.agents.calibration_plan import (
    ingest_feed,
    measure_feed_delivery,
)
from tasks_lib.agents.registry import register_agent
from tasks_lib.arm.history import HISTORY_DIR
from tasks_lib.arm.steps import (
    Attempt,
    check_conditions,
    memory_env,
    provision_memory,
    release_memory,
    run_matrix,
    schedule,
    select_tasks,
)
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import TaskManifest, Turn
from tasks_lib.corpus.feed import FeedError, feed_documents, parse_transcript
from tasks_lib.corpus.tasks import LoadedTask, check_transcripts, load_tasks
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.env import HISTORY_ENV, REALM_ENV, SOCKET_ENV
from tasks_lib.memory.reference.store import SqliteMemoryStore

pytestmark = pytest.mark.integration  # real provisioner runs

REPO = Path(__file__).resolve().parents[1]
TASKS = load_tasks(REPO / "corpora" / "tasks")
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def run(task_ids: list[str], conditions: list[str], tmp_path: Path, agent: str = "calibration"):  # type: ignore[no-untyped-def]
    plan = schedule(select_tasks(TASKS, task_ids), conditions, 1)
    return run_matrix(plan, run_id="feed-run", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                      agent_name=agent, store=LocalStore(tmp_path / "artifacts"))


def without_transcripts(task: LoadedTask) -> LoadedTask:
    return LoadedTask(root=task.root, manifest=task.manifest.model_copy(update={"transcripts": ()}))


# --------------------------------------------------------------------------- the corpus


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_every_bundled_task_has_two_transcripts_saying_the_key_fact_in_passing(task: LoadedTask) -> None:
    assert len(task.manifest.transcripts) >= 2
    assert check_transcripts(task) == []


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_the_reference_store_fed_the_transcripts_recalls_a_key_turn(task: LoadedTask) -> None:
    """What `expected_attempt` assumes for `feed`: the store's own ingest keeps a turn the prompts recall."""
    assert measure_feed_delivery(task)


def test_transcript_lines_are_checked_naming_the_file_line_and_field() -> None:
    with pytest.raises(FeedError, match=r"s.jsonl:2: role: Input should be"):
        parse_transcript(b'{"role": "user", "text": "hi"}\n{"role": "robot", "text": "x"}\n', "s.jsonl")
    with pytest.raises(FeedError, match=r"s.jsonl:1: invalid JSON"):
        parse_transcript(b"not json\n", "s.jsonl")
    with pytest.raises(FeedError, match=r"s.jsonl:1: blank line"):
        parse_transcript(b"\n", "s.jsonl")
    with pytest.raises(FeedError, match=r"s.jsonl:1: note: unknown field; remove it"):
        parse_transcript(b'{"role": "user", "text": "a", "note": "b"}\n', "s.jsonl")


def test_a_transcript_whose_bytes_changed_is_refused(tmp_path: Path) -> None:
    source = select_tasks(TASKS, ["logship-partial-exit"])[0]
    root = tmp_path / "task"
    shutil.copytree(source.root, root)
    path = root / source.manifest.transcripts[0].path
    path.write_bytes(path.read_bytes().replace(b"17", b"18"))
    with pytest.raises(FeedError, match=r"session-1.jsonl: sha256 is .* but task.json transcripts pins"):
        feed_documents(root, source.manifest, "feed")


def test_feed_and_grep_refuse_a_task_without_transcripts_by_name(tmp_path: Path) -> None:
    """A task without transcripts stays valid, but the feed arms say they cannot run it instead of running it empty."""
    from tasks_lib.arm.steps import ArmsError

    bare = without_transcripts(select_tasks(TASKS, ["logship-partial-exit"])[0])
    for condition in ("feed", "grep"):
        root = tmp_path / condition
        root.mkdir()
        with pytest.raises(ArmsError, match=rf"task 'logship-partial-exit' carries no planted state for '{condition}' \(its task.json has no transcripts\)"):
            provision_memory(Attempt(bare, condition, 0, 0), "r", root)
        assert list(root.iterdir()) == [], "nothing is left behind"


def test_manifest_without_transcripts_is_still_valid() -> None:
    data = json.loads((select_tasks(TASKS, ["logship-partial-exit"])[0].root / "task.json").read_text())
    data.pop("transcripts")
    assert TaskManifest.model_validate(data).transcripts == ()


def test_feed_conditions_are_known_conditions() -> None:
    assert check_conditions(["off", "on", "feed", "grep"], ("keyword",)) == ["off", "on", "feed", "grep"]


# --------------------------------------------------------------------------- ingest through the write path


def test_the_default_ingest_keeps_every_turn_as_it_is(tmp_path: Path) -> None:
    turns = (Turn(role="user", text="rotate the spool daily"), Turn(role="assistant", text="Done; the pager watches status 17."))
    with SqliteMemoryStore(tmp_path / "m.sqlite") as store:
        store.create_realm("probe:r")
        ids = store.ingest("probe:r", turns, session="s1")
        assert len(ids) == 2
        hits = store.recall("probe:r", "which status does the pager watch", k=5)
        assert [(h.text, h.speaker, h.session) for h in hits if h.id == ids[1]] == [("Done; the pager watches status 17.", "assistant", "s1")]


# --------------------------------------------------------------------------- the known effect


# The whole corpus under off, on, feed and grep (outcome, delivery, exact tokens per record) is checked
# on the whole-corpus calibration matrix in tests/test_arms.py, which runs off and on once for both.


class ForgetfulIngest:
    """A hostile memory system's write path: it accepts every transcript and keeps nothing."""

    def __call__(self, adapter: MemoryAdapter, realm: str, transcript: object, session: str) -> tuple[str, ...]:
        return ()


class NoisyIngest:
    """A hostile write path that keeps only the opening request of each session (never the work)."""

    def __call__(self, adapter: MemoryAdapter, realm: str, transcript: tuple[Turn, ...], session: str) -> tuple[str, ...]:
        return adapter.remember(realm, [transcript[0].text])


@pytest.mark.parametrize("ingest", [ForgetfulIngest(), NoisyIngest()], ids=["keeps-nothing", "keeps-only-the-request"])
def test_a_memory_system_whose_ingest_ignores_the_transcript_scores_like_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ingest: object
) -> None:
    """What a system's extraction keeps is what is measured: a write path that drops the work earns
    nothing over `off` (same outcome, no key delivered), whatever the curated items would have done."""
    monkeypatch.setattr(SqliteMemoryStore, "ingest", lambda self, realm, transcript, session: ingest(self, realm, transcript, session))  # type: ignore[operator]
    ids = ["logship-partial-exit", "quill-audit-format", "tabmill-delimiter"]
    records = run(ids, ["off", "feed"], tmp_path)
    by = {(r.task_id, r.condition): r for r in records}
    for task_id in ids:
        off, feed = by[(task_id, "off")], by[(task_id, "feed")]
        assert feed.outcome == off.outcome, task_id
        assert feed.output_tokens == off.output_tokens, task_id
        assert not any(t in json.dumps(feed.model_dump()) for t in ("pager rule", "AUD1"))
        if isinstance(ingest, ForgetfulIngest):
            assert feed.planted_ids == () and feed.injection == "no" and feed.input_tokens == off.input_tokens, task_id
    assert by[("logship-partial-exit", "feed")].outcome == "fail"


# --------------------------------------------------------------------------- the grep arm's folder


@pytest.mark.parametrize("condition", ["off", "on", "feed", "ablate:all", "ablate:keyword"])
def test_the_grep_folder_is_visible_to_no_other_arm(tmp_path: Path, condition: str) -> None:
    task = select_tasks(TASKS, ["logship-partial-exit"])[0]
    memory = provision_memory(Attempt(task, condition, 0, 0), "r", tmp_path)
    try:
        assert HISTORY_ENV not in memory.env
        assert not (tmp_path / HISTORY_DIR).exists()
        assert not any(str(tmp_path / HISTORY_DIR) in v for v in memory.env.values())
    finally:
        release_memory(memory)


def test_the_grep_arm_gets_only_a_read_only_folder_of_the_identical_transcripts(tmp_path: Path) -> None:
    task = select_tasks(TASKS, ["logship-partial-exit"])[0]
    memory = provision_memory(Attempt(task, "grep", 0, 0), "r", tmp_path)
    try:
        folder = Path(memory.env[HISTORY_ENV])
        assert set(memory.env) == {REALM_ENV, HISTORY_ENV} and SOCKET_ENV not in memory.env
        assert memory.witness is None and memory.planted_ids == () and not (tmp_path / "memory.sqlite").exists()
        assert sorted(p.name for p in folder.iterdir()) == ["session-1.jsonl", "session-2.jsonl"]
        for ref in task.manifest.transcripts:
            assert (folder / Path(ref.path).name).read_bytes() == (task.root / ref.path).read_bytes()
        assert not os.access(folder, os.W_OK) or os.geteuid() == 0
        assert folder.relative_to(tmp_path).as_posix() == HISTORY_DIR, "outside the workspace, in the runner-owned root"
        named = folder.relative_to(tmp_path).as_posix() + " " + " ".join(f"{k}={v}" for k, v in memory.env.items() if k != HISTORY_ENV)
        assert not any(word in named for word in ("grep", "feed", "transcript", "condition")), named
    finally:
        release_memory(memory)
    assert memory.violations == []
    shutil.rmtree(tmp_path / HISTORY_DIR)  # removable again after release


def test_memory_env_names_the_history_folder_only_under_grep(tmp_path: Path) -> None:
    for condition in ("off", "on", "feed", "ablate:all"):
        assert HISTORY_ENV not in memory_env(condition, "r", tmp_path / "s.sock", tmp_path / HISTORY_DIR)
    assert memory_env("grep", "r", tmp_path / "s.sock", tmp_path / HISTORY_DIR) == {REALM_ENV: "r", HISTORY_ENV: str(tmp_path / HISTORY_DIR)}


class HistoryEditingAgent(Agent):
    """Hostile: makes the read-only history folder writable and plants a session that states a wrong answer."""

    name = "history-editor"

    def run(self, session: AgentSession) -> AgentRun:
        folder = Path(session.env.get(HISTORY_ENV, ""))
        if folder.name == HISTORY_DIR:
            folder.chmod(0o755)
            (folder / "session-3.jsonl").write_text('{"role": "assistant", "text": "partial delivery exits 3"}\n')
        steps = (TranscriptStep(source="user", kind="prompt", text=session.prompts[0]),)
        return AgentRun(exit_code=0, input_tokens=1, output_tokens=1, cost_usd=0.0, wall_seconds=0.0,
                        transcript=Transcript(agent=self.name, session_id="h", steps=steps))


register_agent("history-editor", HistoryEditingAgent)


def test_an_agent_that_edits_the_history_folder_fails_naming_it(tmp_path: Path) -> None:
    (record,) = run(["rotlog-keep-count"], ["grep"], tmp_path, agent="history-editor")
    assert record.outcome == "fail"
    assert "history folder history/ changed during the attempt: session-3.jsonl" in (record.failure_reason or "")


def test_ingest_feed_feeds_one_session_per_transcript(tmp_path: Path) -> None:
    task = select_tasks(TASKS, ["quill-audit-format"])[0]
    with SqliteMemoryStore(tmp_path / "m.sqlite") as store:
        store.create_realm("probe:r")
        ids = ingest_feed(store, "probe:r", task)
        turns = sum(len(t) for _, _, t in feed_documents(task.root, task.manifest, "feed"))
        assert len(ids) == turns == len(store.live_ids("probe:r"))


# --------------------------------------------------------------------------- the feed through a provisioner


def test_the_feed_reaches_a_provisioner_as_its_evidence_corpus(tmp_path: Path) -> None:
    """The reference provisioner, a real subprocess, restores the transcripts as its evidence corpus; the
    calibration effect is the one the embedded store gives, and delivery is witnessed by exact turn text."""
    import sys

    from tasks_lib.memory.provisioner.client import ProvisionerSpec
    from tasks_lib.memory.provisioner.verbs import SERVE_ENV, STATE_ENV

    state = tmp_path / "state"
    reference = (sys.executable, "-m", "tasks_lib.memory.provisioner.reference")
    spec = ProvisionerSpec(argv=reference, env={STATE_ENV: str(state), SERVE_ENV: "ro"}, timeout_seconds=120)
    plan = schedule(select_tasks(TASKS, ["logship-partial-exit", "quill-audit-format"]), ["off", "feed"], 1)
    store = LocalStore(tmp_path / "artifacts")
    records = run_matrix(plan, run_id="feed-prov", repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=store, provisioner=spec)
    by = {(r.task_id, r.condition): r for r in records}
    for task_id in ("logship-partial-exit", "quill-audit-format"):
        assert by[(task_id, "off")].outcome == "fail"
        feed = by[(task_id, "feed")]
        assert feed.outcome == "pass" and feed.injection == "yes" and feed.delivered_ids, task_id
        assert feed.build_under_test == "provisioner: " + " ".join(reference)
    assert list((state / "projects").iterdir()) == [], "a project outlived its attempt"


def test_a_run_asking_feed_of_a_task_without_transcripts_skips_and_lists_its_cells() -> None:
    """A feed arm never runs empty on a task without transcripts: the matrix has no such cell and names it."""
    from tasks_lib.arm.steps import skipped_cells

    bare = without_transcripts(select_tasks(TASKS, ["logship-partial-exit"])[0])
    fed = select_tasks(TASKS, ["auditq-since-default"])[0]
    cells = {(a.task.task_id, a.condition) for a in schedule([bare, fed], ["off", "feed", "grep"], 1)}
    assert cells == {("logship-partial-exit", "off"), ("auditq-since-default", "off"), ("auditq-since-default", "feed"),
                     ("auditq-since-default", "grep")}
    assert skipped_cells([bare, fed], ["off", "feed", "grep"]) == [("logship-partial-exit", "feed"), ("logship-partial-exit", "grep")]
    assert len(schedule([bare], ["off", "on"], 1)) == 2, "without the feed conditions the task runs as before"
