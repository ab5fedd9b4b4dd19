"""The write-path suite: the calibration agent learns exactly what an earlier check's feedback stated,
a system whose write path keeps nothing scores like `off`, and the flow re-uses every completed step."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest

from tasks_lib.agents.base import AgentRun, Transcript, TranscriptStep
from tasks_lib.agents.calibration import tokens
from tasks_lib.agents.calibration_plan import ExpectedAttempt, expected_input_tokens, key_texts
from tasks_lib.arm.steps import ArmSetup, TaskSource
from tasks_lib.artifacts import LocalStore, open_store
from tasks_lib.corpus.tasks import check_corpus
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.run.config import RunConfig
from tasks_lib.suites.writepath import (
    WritePathError,
    WritePathResult,
    load_sequence,
    run_sequence,
    session_turns,
    summarize,
)
from tasks_lib.trees import walk_files

REPO = Path(__file__).resolve().parents[1]
SEQUENCE = REPO / "corpora" / "sequences" / "ticketq"
HEAD = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
MANIFEST, TASKS = load_sequence(SEQUENCE)


def run(tmp_path: Path):  # type: ignore[no-untyped-def]
    setup = ArmSetup(run_id="wp-test", source=TaskSource(REPO, HEAD, "corpora/sequences/ticketq"), agent_name="calibration",
                     store=LocalStore(tmp_path / "artifacts"))
    return run_sequence(MANIFEST.sequence_id, TASKS, setup), LocalStore(tmp_path / "artifacts")


def hook_context(store: LocalStore, key: str | None) -> str:
    transcript = store.get_json(key or "", Transcript)
    return "".join(step.text for step in transcript.steps if step.source == "hook")


def solution_tokens(position: int) -> int:
    solution = TASKS[position].solution_dir
    return tokens(sum((solution / rel).stat().st_size for rel in walk_files(solution)))


def test_the_sequence_tasks_pass_the_corpus_invariants() -> None:
    report = check_corpus(SEQUENCE, REPO)
    assert report.ok, "\n".join(str(f) for f in report.failures)
    assert [t.task_id for t in TASKS] == ["ticketq-show", "ticketq-export", "ticketq-close"]


def test_the_calibration_agent_learns_exactly_what_the_feedback_states(tmp_path: Path) -> None:
    """Known effect: without memory every task fails (the convention is in no file); with memory the first
    fails, its check's message is ingested, and every later task passes by what that message stated,
    with exact tokens (prompt + delivered context, no exploration)."""
    steps, store = run(tmp_path)
    by = {(s.arm, s.position): s for s in steps}
    for position, task in enumerate(TASKS):
        off = by[("off", position)].record
        assert off.outcome == "fail" and off.injection == "no" and off.output_tokens == 0
        assert off.input_tokens == expected_input_tokens(task, ExpectedAttempt(False, True, "fail", 0), 0)
        assert by[("off", position)].ingested_ids == ()
    first = by[("feed", 0)]
    assert first.record.outcome == "fail" and first.feedback and first.ingested_ids
    assert first.record.input_tokens == by[("off", 0)].record.input_tokens, "nothing learned before the first task"
    for position in (1, 2):
        step = by[("feed", position)]
        context = hook_context(store, step.record.transcript)
        assert step.record.outcome == "pass" and step.record.injection == "yes", position
        assert any(text in context for text in key_texts(TASKS[position])), "the fact arrived as the feedback stated it"
        assert "The check failed" in context, "it came from the first task's feedback"
        assert step.record.output_tokens == solution_tokens(position)
        expected = ExpectedAttempt(True, False, "pass", solution_tokens(position))
        assert step.record.input_tokens == expected_input_tokens(TASKS[position], expected, len(context.encode()))
        assert not step.feedback, "a passing check feeds nothing back"
    result = summarize(MANIFEST.sequence_id, "calibration", steps)
    assert [(c.passed["off"], c.passed["feed"]) for c in result.curve] == [(False, False), (False, True), (False, True)]
    assert result.later.tasks == 2 and result.later.success_difference == 1.0
    assert result.later.success_interval is None, "two tasks cannot bound a sign-flip interval at 95%"
    WritePathResult.model_validate_json(result.model_dump_json())


def test_a_memory_system_whose_ingest_ignores_the_sessions_scores_like_off(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Hostile write path: it accepts every session and keeps nothing. No later task may gain."""
    monkeypatch.setattr(SqliteMemoryStore, "ingest", lambda self, realm, transcript, session: ())
    steps, _ = run(tmp_path)
    by = {(s.arm, s.position): s.record for s in steps}
    for position in range(len(TASKS)):
        off, feed = by[("off", position)], by[("feed", position)]
        assert (feed.outcome, feed.input_tokens, feed.output_tokens, feed.injection) == (off.outcome, off.input_tokens, off.output_tokens, "no")
    assert summarize(MANIFEST.sequence_id, "calibration", steps).later.success_difference == 0.0


def test_what_memory_delivered_is_never_fed_back_as_the_agents_own_work() -> None:
    """Re-ingesting the hook's own context would let a system 'learn' what it already served."""
    steps = (TranscriptStep(source="user", kind="prompt", text="add show"),
             TranscriptStep(source="hook", kind="context", text="recalled: ids are TQ-", channel="UserPromptSubmit"),
             TranscriptStep(source="system", kind="error", text="hook exited 1"),
             TranscriptStep(source="agent", kind="tool-call", text="read README.md"),
             TranscriptStep(source="agent", kind="message", text="done"))
    run = AgentRun(exit_code=0, input_tokens=0, output_tokens=0, cost_usd=0.0, wall_seconds=0.0,
                   transcript=Transcript(agent="a", session_id="s", steps=steps))
    assert [(t.role, t.text) for t in session_turns(run)] == [("user", "add show"), ("tool", "read README.md"), ("assistant", "done")]


def test_a_broken_sequence_manifest_names_the_file_and_field(tmp_path: Path) -> None:
    folder = tmp_path / "ticketq"
    folder.mkdir()
    (folder / "sequence.json").write_text(json.dumps({"schema_version": 1, "sequence_id": "ticketq", "tasks": ["ticketq-show", "nope"]}))
    with pytest.raises(WritePathError, match=r"sequence.json: tasks: no folder for ticketq-show, nope"):
        load_sequence(folder)
    (folder / "sequence.json").write_text(json.dumps({"schema_version": 1, "sequence_id": "ticketq", "tasks": ["a"]}))
    with pytest.raises(WritePathError, match=r"sequence.json.*tasks.*at least 2"):
        load_sequence(folder)


STEPS = [f"write-path-step:{arm}:{p}" for arm in ("off", "feed") for p in range(3)]


def test_the_flow_reuses_every_completed_step_after_a_late_failure(prefect_harness: None, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The last step fails; the rerun of the same run executes only that step, from the store the
    cached earlier steps left, and gives the same learning curve as an uninterrupted run."""
    from flows.stages import FAIL_STAGE_ENV, TRACE_ENV, InjectedFailure
    from flows.writepath import write_path_flow

    trace = tmp_path / "trace.tsv"
    monkeypatch.setenv(TRACE_ENV, str(trace))
    monkeypatch.setenv(FAIL_STAGE_ENV, "write-path-step:feed:2")
    config = RunConfig(name="wp", suites=["write-path"], artifact_root=str(tmp_path / "artifacts"))
    with pytest.raises(InjectedFailure):
        write_path_flow(config, "wp-rerun", str(tmp_path / "artifacts"))
    first = Counter(line.split("\t")[0] for line in trace.read_text().splitlines() if line.startswith("write-path-step"))
    assert first == Counter(STEPS)
    monkeypatch.delenv(FAIL_STAGE_ENV)
    before = len(trace.read_text().splitlines())
    key = write_path_flow(config, "wp-rerun", str(tmp_path / "artifacts"))
    again = [line.split("\t")[0] for line in trace.read_text().splitlines()[before:] if line.startswith("write-path-step")]
    assert again == ["write-path-step:feed:2"]
    (result,) = [WritePathResult.model_validate(r) for r in json.loads(open_store(tmp_path / "artifacts").get_bytes(key))]
    assert [(c.passed["off"], c.passed["feed"]) for c in result.curve] == [(False, False), (False, True), (False, True)]
    from tasks_lib.report.html import suites_section
    from tasks_lib.report.suites import load_suites

    shown = suites_section(load_suites(open_store(tmp_path / "artifacts"), "wp-rerun", None), lambda key: None, lambda key: True)
    assert "Write-path sequence ticketq: learning curve" in shown
    assert "<td>ticketq-export</td><td>fail</td><td>pass</td>" in shown.replace(' class="num"', "")
