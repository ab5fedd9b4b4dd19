"""The notes and placebo arms and the harm conditions: one condition table, planted states that hold
what their condition defines, a notes file only in the notes arm, skipped cells said out loud, and the
calibration agent's known effect recovered exactly through `memtrial run`."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks_lib.agents.base import Transcript
from tasks_lib.agents.calibration_plan import (
    expected_attempt,
    expected_input_tokens,
    key_texts,
    load_key_lanes,
)
from tasks_lib.arm.steps import (
    ArmsError,
    Attempt,
    TaskSource,
    check_conditions,
    check_home,
    materialize_workspace,
    provision_memory,
    release_memory,
    schedule,
    select_tasks,
    skipped_cells,
    teardown_workspace,
)
from tasks_lib.arm.workspace import build_redacted
from tasks_lib.artifacts import open_store
from tasks_lib.conditions import CONDITIONS, HARM_VARIANTS, applies, planted_memories
from tasks_lib.contracts import RunRecord, TaskManifest
from tasks_lib.corpus.tasks import LoadedTask, check_memories_hold_no_answer, load_tasks
from tasks_lib.memory.delivery.notes import NOTES_PATHS, NotesDelivery, notes_text
from tasks_lib.memory.delivery.witness import text_digest
from tasks_lib.memory.env import SOCKET_ENV
from tasks_lib.memory.reference.lanes import LANES
from tasks_lib.run.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
TASKS = load_tasks(REPO / "corpora" / "tasks")
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
NEW = ["notes", "placebo", *(f"harm:{v}" for v in HARM_VARIANTS)]
HARMED = [t for t in TASKS if t.manifest.harm is not None]
PLAIN = select_tasks(TASKS, ["rotlog-keep-count"])[0]
"""A task with neither placebo memories nor harm variants."""
LOGSHIP = select_tasks(TASKS, ["logship-partial-exit"])[0]
GIVEAWAYS = re.compile(r"memtrial|benchmark|harness|trial|condition|ablat|calibration|placebo|harm|notes arm|\boff\b", re.I)


def with_manifest(task: LoadedTask, **changes: object) -> dict[str, object]:
    """The task's manifest as JSON with `changes` applied (for building a hostile manifest)."""
    return {**task.manifest.model_dump(mode="json"), **changes}


def memory(text: str, kind: str = "fact", lane: str = "keyword", subject: str | None = None) -> dict[str, object]:
    return {"text": text, "kind": kind, "lane": lane, **({"subject": subject} if subject else {})}


# --------------------------------------------------------------------------- the condition table


@pytest.mark.parametrize("condition", [*CONDITIONS, "ablate:all", "ablate:keyword"])
def test_every_condition_of_the_table_is_accepted_by_configs_records_and_the_matrix(condition: str) -> None:
    assert RunConfig(conditions=[condition]).conditions == [condition]
    assert check_conditions([condition], LANES) == [condition]


@pytest.mark.parametrize("condition", ["harm:stale", "placebos", "notes:all", "harm:", "ablate:telepathy"])
def test_an_unknown_condition_is_refused_naming_the_known_ones(condition: str) -> None:
    with pytest.raises(ArmsError, match="harm:superseded"):
        check_conditions([condition], LANES)
    if condition.startswith("ablate:"):
        return  # any lane-shaped name is a valid record; the lanes are the memory system's, checked above
    with pytest.raises(ValidationError):
        RunRecord.model_validate({"run_id": "r", "task_id": "t", "condition": condition, "trial": 0, "outcome": "fail",
                                  "input_tokens": 0, "output_tokens": 0, "cost_usd": 0, "wall_seconds": 0, "injection": "no",
                                  "build_under_test": "b"})


def test_a_condition_named_twice_is_refused() -> None:
    with pytest.raises(ArmsError, match="named twice"):
        check_conditions(["off", "notes", "notes"], LANES)


# --------------------------------------------------------------------------- planted states in the manifest


def test_at_least_eight_bundled_tasks_carry_a_placebo_and_every_harm_variant() -> None:
    carrying = [t.task_id for t in TASKS if t.manifest.placebo_memories and t.manifest.harm is not None]
    assert len(carrying) >= 8, carrying
    assert {t.manifest.kind for t in HARMED} & {"deducible", "cross-file"}, "harm must be able to damage a task off passes"


@pytest.mark.parametrize("task", TASKS, ids=[t.task_id for t in TASKS])
def test_no_planted_state_that_must_be_answer_free_gives_the_answer_away(task: LoadedTask) -> None:
    assert check_memories_hold_no_answer(task) == []


def test_a_placebo_that_states_the_answer_is_an_answer_leak() -> None:
    """Regression guard: a placebo is irrelevant by definition; one holding the exit status would make
    the placebo arm a second `on` arm."""
    placebo = json.loads(json.dumps(task_json(LOGSHIP)["placebo_memories"]))
    assert "every five minutes" in placebo[0]["text"]
    placebo[0]["text"] = placebo[0]["text"].replace("every five minutes", "and exits 17 on a partial send")
    hostile = LoadedTask(root=LOGSHIP.root, manifest=TaskManifest.model_validate(with_manifest(LOGSHIP, placebo_memories=placebo)))
    failures = check_memories_hold_no_answer(hostile)
    assert [f.path for f in failures] == ["task.json:placebo_memories[0]:1"] and "'17'" in failures[0].message


def task_json(task: LoadedTask) -> dict[str, list[dict[str, object]]]:
    return json.loads((task.root / "task.json").read_text())


@pytest.mark.parametrize(("changes", "message"), [
    ({"placebo_memories": [memory("Short.")] * 2}, "placebo_memories: .* within 10%"),
    ({"placebo_memories": [memory("x" * 300)]}, "give exactly as many as memories"),
    ({"placebo_memories": "copy"}, "repeats one of the task's memories"),
    ({"placebo_memories": "correction"}, "never superseded or a correction"),
    ({"harm": "absent-with-key"}, "harm.absent: must not hold the task's key memory"),
    ({"harm": "superseded-with-correction"}, "harm.superseded: a harm variant plants no correction"),
    ({"harm": "contradictory-without-key"}, "harm.contradictory: must hold the old value"),
], ids=["placebo-too-short", "placebo-count", "placebo-copies-a-memory", "placebo-correction", "absent-keeps-key",
        "superseded-corrected", "contradictory-without-new-value"])
def test_a_planted_state_that_does_not_hold_what_its_condition_defines_is_refused(changes: dict[str, object], message: str) -> None:
    raw = task_json(LOGSHIP)
    key = next(m for m in raw["memories"] if m["kind"] == "convention")
    harm = json.loads(json.dumps(raw["harm"]))
    if changes.get("placebo_memories") == "copy":
        changes = {"placebo_memories": [raw["memories"][1], raw["memories"][0]]}
    elif changes.get("placebo_memories") == "correction":
        changes = {"placebo_memories": [{**raw["placebo_memories"][0], "kind": "correction"}, raw["placebo_memories"][1]]}
    elif changes.get("harm") == "absent-with-key":
        changes = {"harm": {**harm, "absent": [*harm["absent"], key]}}
    elif changes.get("harm") == "superseded-with-correction":
        changes = {"harm": {**harm, "superseded": [*harm["superseded"], memory("The pager now matches 18.", "correction", "corrections")]}}
    elif changes.get("harm") == "contradictory-without-key":
        changes = {"harm": {**harm, "contradictory": [m for m in harm["contradictory"] if m != key]}}
    with pytest.raises(ValidationError, match=message):
        TaskManifest.model_validate(with_manifest(LOGSHIP, **changes))


def test_a_version_1_manifest_without_the_new_fields_still_loads_and_has_no_such_cells() -> None:
    data = json.loads((PLAIN.root / "task.json").read_text())
    assert "placebo_memories" not in data and "harm" not in data
    manifest = TaskManifest.model_validate(data)
    assert [c for c in CONDITIONS if not applies(manifest, c)] == ["placebo", *(f"harm:{v}" for v in HARM_VARIANTS)]


# --------------------------------------------------------------------------- the matrix skips, says so, and refuses


def test_a_task_without_the_planted_state_has_no_cell_and_the_skip_is_listed() -> None:
    tasks = [PLAIN, LOGSHIP]
    plan = schedule(tasks, ["off", "harm:absent", "placebo"], 2)
    assert {(a.task.task_id, a.condition) for a in plan} == {
        ("rotlog-keep-count", "off"), ("logship-partial-exit", "off"), ("logship-partial-exit", "harm:absent"),
        ("logship-partial-exit", "placebo")}
    assert skipped_cells(tasks, ["off", "harm:absent", "placebo"]) == [("rotlog-keep-count", "harm:absent"), ("rotlog-keep-count", "placebo")]


def test_provisioning_a_harm_condition_for_a_task_without_it_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ArmsError, match="rotlog-keep-count.*harm:superseded.*no harm"):
        provision_memory(Attempt(PLAIN, "harm:superseded", 0, 0), "r", tmp_path)


@pytest.mark.parametrize("condition", ["placebo", *(f"harm:{v}" for v in HARM_VARIANTS)])
def test_each_condition_plants_exactly_its_state_through_the_memory_system(tmp_path: Path, condition: str) -> None:
    """The placebo and every harm variant go through the same store and witness as `on`: the receipt
    names the condition's memories as planted, never the task's own when the state drops them."""
    source = TaskSource(REPO, HEAD, "corpora/tasks")
    workspace = materialize_workspace(Attempt(LOGSHIP, condition, 0, 0), source, tmp_path)
    try:
        memory_ = provision_memory(Attempt(LOGSHIP, condition, 0, 0), "r", workspace.root)
        assert memory_.witness is not None and SOCKET_ENV in memory_.env
        release_memory(memory_)
        receipt = memory_.witness.close()  # type: ignore[union-attr]
        assert len(receipt.planted_ids) == len(planted_memories(LOGSHIP.manifest, condition))
        assert set(receipt.planted_text_sha256) == {text_digest(m.text) for m in planted_memories(LOGSHIP.manifest, condition)}
        assert list((workspace.home).iterdir()) == [], "no arm but notes gets a notes file"
    finally:
        teardown_workspace(workspace)


# --------------------------------------------------------------------------- the notes arm


def test_the_notes_file_is_in_the_notes_arms_home_only_and_the_workspace_is_the_same(tmp_path: Path) -> None:
    source = TaskSource(REPO, HEAD, "corpora/tasks")
    seen = {}
    for condition in ("notes", "on", "off"):
        attempt = Attempt(LOGSHIP, condition, 0, 0)
        workspace = materialize_workspace(attempt, source, tmp_path)
        try:
            memory_ = provision_memory(attempt, "r", workspace.root)
            home = sorted(p.relative_to(workspace.home).as_posix() for p in workspace.home.rglob("*") if p.is_file())
            notes = (workspace.home / NOTES_PATHS[0]).read_text() if condition == "notes" else None
            seen[condition] = (home, workspace.before.digest, dict(memory_.env), notes)
            release_memory(memory_)
        finally:
            teardown_workspace(workspace)
    assert seen["notes"][0] == sorted(NOTES_PATHS) and seen["on"][0] == seen["off"][0] == []
    assert seen["notes"][1] == seen["on"][1] == seen["off"][1], "the workspace is byte-identical in every arm"
    assert set(seen["notes"][2]) == set(seen["off"][2]), "the notes arm reaches no memory system"
    notes = seen["notes"][3] or ""
    assert all(m.text in notes for m in LOGSHIP.manifest.memories)
    assert not GIVEAWAYS.search(notes), notes


@pytest.mark.parametrize(("written", "allowed"), [
    ({".claude/CLAUDE.md": "- the pager rule is 17\n"}, None),
    ({".codex/AGENTS.md": "# Notes\n"}, None),
    ({".claude/CLAUDE.md": "- forged\n"}, "runner"),
    ({"AGENTS.md": "# Notes\n"}, "runner"),
], ids=["notes-in-another-arm", "agents-md-in-another-arm", "notes-file-not-the-runners", "extra-agents-md-beside-notes"])
def test_a_notes_file_the_runner_did_not_write_for_the_notes_arm_fails_home_certification(
        tmp_path: Path, written: dict[str, str], allowed: str | None) -> None:
    expected = notes_text(LOGSHIP.manifest.memories)
    notes = {rel: expected for rel in NOTES_PATHS} if allowed else None
    if allowed:
        for rel in NOTES_PATHS:
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(expected)
    for rel, text in written.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    with pytest.raises(ArmsError, match="does not certify"):
        check_home(tmp_path, notes)


def test_a_notes_file_naming_the_experiment_fails_home_certification(tmp_path: Path) -> None:
    text = "# Notes\n\n- You are being evaluated by memtrial.\n"
    for rel in NOTES_PATHS:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    with pytest.raises(ArmsError, match="benchmark-awareness"):
        check_home(tmp_path, {rel: text for rel in NOTES_PATHS})


def test_redaction_still_removes_the_projects_own_claude_md_in_the_notes_arm(make_repo, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo, commit = make_repo({"fx/CLAUDE.md": "exit 17 on partial\n", "fx/AGENTS.md": "use 17\n", "fx/app.py": "print(1)\n"})
    _, snapshot = build_redacted(repo, commit, "fx", tmp_path / "workspace")
    assert sorted(e.path for e in snapshot.entries) == ["app.py"]
    home = tmp_path / "home"
    home.mkdir()
    notes = NotesDelivery(home, "project:0123456789abcdef", LOGSHIP.manifest.memories).start()
    check_home(home, {rel: notes.text for rel in NOTES_PATHS})
    assert not (tmp_path / "workspace" / "CLAUDE.md").exists()


def test_the_notes_receipt_names_every_note_and_a_file_changed_during_the_turn(tmp_path: Path) -> None:
    notes = NotesDelivery(tmp_path, "project:0123456789abcdef", LOGSHIP.manifest.memories).start()
    (tmp_path / NOTES_PATHS[0]).write_text("# Notes\n\n- exit 0 always\n")
    receipt = notes.close()
    assert receipt.planted_served() == notes.ids and len(notes.ids) == len(LOGSHIP.manifest.memories)
    assert receipt.refused == (f"notes file {NOTES_PATHS[0]}: changed by the end of the turn",)
    assert notes.close() is receipt


# --------------------------------------------------------------------------- the known effect, end to end


@pytest.fixture(scope="module")
def arms_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    """`memtrial run` on configs/arms.yaml (every new arm and harm condition, the embedded default), for
    the eight tasks that carry them and one that carries none."""
    from flows.cli.main import main

    tmp = tmp_path_factory.mktemp("arms-run")
    config = tmp / "arms.yaml"
    text = (REPO / "configs" / "arms.yaml").read_text()
    ids = [t.task_id for t in HARMED] + [PLAIN.task_id]
    config.write_text(text.replace("tasks_root: corpora/tasks", f"tasks_root: corpora/tasks\ntasks: {json.dumps(ids)}"))
    code = main(["run", "--config", str(config), "--artifacts", str(tmp / "artifacts"), "--json"])
    return code, tmp / "artifacts"


@pytest.mark.slow
def test_memtrial_run_recovers_the_calibration_agents_known_effect_in_every_arm_and_condition(arms_run) -> None:  # type: ignore[no-untyped-def]
    """Outcome, delivery, input and output tokens of every attempt follow exactly from the corpus: notes
    delivers like on, placebo and absent/adjacent equal off's outcome, contradictory makes it explore,
    superseded makes it act on the old value (damage exactly on the tasks off passes)."""
    from tasks_lib.analysis.grading import GradingSummary
    from tasks_lib.run.records import read_records

    code, root = arms_run
    store = open_store(root)
    (run_dir,) = [k.split("/")[1] for k in store.list_keys("runs") if k.endswith("-calibration/summary.json")]
    records = read_records(store, run_dir)
    key_lanes = load_key_lanes(REPO / "corpora" / "tasks", TASKS).tasks
    conditions = ["off", "on", *NEW]
    by = {(r.task_id, r.condition): r for r in records}
    assert len(records) == len(HARMED) * len(conditions) + 3, "rotlog runs off, on and notes only"
    assert not any(r.task_id == PLAIN.task_id and (r.condition == "placebo" or r.condition.startswith("harm:")) for r in records)
    for (task_id, condition), record in by.items():
        task = select_tasks(TASKS, [task_id])[0]
        expected = expected_attempt(task, condition, key_lanes[task_id])
        transcript = store.get_json(record.transcript or "", Transcript)
        context = "".join(s.text for s in transcript.steps if s.source == "hook" or s.channel == "notes-file")
        where = f"{task_id} under {condition}"
        assert (record.outcome, record.output_tokens) == (expected.outcome, expected.output_tokens), where
        assert record.input_tokens == expected_input_tokens(task, expected, len(context.encode())), where
        assert any(t in context for t in key_texts(task)) == expected.delivered, where
        assert record.injection == ("no" if condition == "off" else "yes"), where
        if condition == "notes":
            assert record.injection_channel is None and record.delivered_ids == record.planted_ids != ()
    summary = store.get_json(f"runs/{run_dir}/summary.json", GradingSummary)
    damage = {d.condition: d for d in summary.damage}
    off_passes = sorted(t.task_id for t in HARMED if by[(t.task_id, "off")].outcome == "pass")
    assert off_passes == ["stockroom-adjust-event", "tabmill-delimiter"]
    assert damage["harm:superseded"].damaged_tasks == tuple(off_passes)
    assert damage["harm:superseded"].share.estimate == pytest.approx(2 / 8) and damage["harm:superseded"].share.high is not None
    assert all(damage[c].damaged_pairs == 0 for c in damage if c != "harm:superseded"), damage
    kinds = {(c.kind, c.condition_a, c.condition_b) for c in summary.headline}
    assert {("versus-notes", "on", "notes"), ("versus-notes", "placebo", "notes"), ("versus-off", "notes", "off"),
            ("versus-off", "placebo", "off")} <= kinds
    assert not [d for d in summary.delivery if d.warning], summary.delivery
    html = store.get_bytes(f"runs/{run_dir}/report.html").decode()
    assert "Damage per arm and condition" in html and "versus the notes file" in html
    assert code == 0, summary.distrust
    (nightly_key,) = [k for k in store.list_keys("runs") if k.endswith("/nightly.json")]
    skipped = json.loads(store.get_bytes(nightly_key))["skipped"]
    assert skipped == [f"{PLAIN.task_id} {c}" for c in NEW if c != "notes"]


def test_memtrial_paired_lists_the_cells_it_skips(prefect_harness: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A task without a harm variant is not silently dropped from a harm condition: the run says which cells it skipped."""
    from flows.cli.main import main

    code = main(["paired", "--embedder", "hashed", "--tasks", f"{PLAIN.task_id},{LOGSHIP.task_id}", "--conditions", "off,harm:absent",
                 "--artifacts", str(tmp_path / "artifacts"), "--json"])
    result = json.loads(capsys.readouterr().out)
    assert code == 0, result["distrust"]
    assert result["skipped"] == [f"{PLAIN.task_id} harm:absent"]
    assert sorted((c["task"], c["condition"]) for c in result["cells"]) == [
        (LOGSHIP.task_id, "harm:absent"), (LOGSHIP.task_id, "off"), (PLAIN.task_id, "off")]
