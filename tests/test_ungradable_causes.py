"""A run whose attempts are ungradable says why once per cause, with the count and the attempts or
tasks, and a harness check over no gradable attempt is "not measured", not a warning per task."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from gitrepo import git
from tasks_lib.analysis.aggregate import aggregate_run
from tasks_lib.analysis.grading import grade_attempts, summarize
from tasks_lib.arm.steps import run_matrix, schedule, select_tasks
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.tasks import load_tasks
from tasks_lib.report.html import ablation_section

REPO = Path(__file__).resolve().parents[1]
TASKS = ["pagekit-last-page", "paybridge-tenant-header"]
"""Two bundled tasks, copied into a corpus of their own that judges them in process: a judged-apart
task's check always runs in the judge's own bubblewrap namespaces (never in the agent's sandbox), so
only an in-process task takes the agent's sandbox options (no bundled task is judged in process)."""
NO_BWRAP = {"sandbox_options": {"bwrap": False}}
"""The check's local sandbox without bwrap: it cannot isolate the check, so every attempt is ungradable."""


def _in_process_corpus(repo: Path) -> tuple[Path, str]:
    """A git repository holding TASKS under `tasks/`, each manifest saying `judge: in-process`; (repo, commit)."""
    for task_id in TASKS:
        shutil.copytree(REPO / "corpora" / "tasks" / task_id, repo / "tasks" / task_id)
        manifest_path = repo / "tasks" / task_id / "task.json"
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
        manifest.update(judge="in-process", jail="python")
        manifest_path.write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "two tasks judged in process")
    return repo, git(repo, "rev-parse", "HEAD")


def test_a_run_whose_checks_cannot_be_sandboxed_names_the_cause_once_not_once_per_task(tmp_path: Path) -> None:
    """Regression: a machine without a usable sandbox got one "N attempt(s) are ungradable" line that
    did not say why, plus a "harness check ... 0 (0/0 vs 0/0 passed)" line per task and one pooled
    (46 lines for the embedded default). Now: one line with the count, the cause and the tasks, and
    one line saying the harness check was not measured; the report's table says "not measured"."""
    repo, head = _in_process_corpus(tmp_path / "corpus")
    tasks = load_tasks(repo / "tasks")
    plan = schedule(select_tasks(tasks, TASKS), ["off", "on", "ablate:all"], 1)
    store = LocalStore(tmp_path / "artifacts")
    records = run_matrix(plan, run_id="nosandbox-run", repo_root=repo, commit=head, tasks_subdir="tasks",
                         agent_name="calibration", store=store, agent_options=NO_BWRAP)
    assert [r.outcome for r in records] == ["ungradable"] * 6

    summary = aggregate_run(store, "nosandbox-run").summary
    ungradable = [line for line in summary.distrust if "ungradable" in line]
    assert len(ungradable) == 1, summary.distrust
    assert ungradable[0].startswith("6 attempt(s) are ungradable"), ungradable
    assert "could not be sandboxed" in ungradable[0] and "bwrap=False" in ungradable[0], ungradable
    assert f"in 2 task(s): {', '.join(TASKS)}" in ungradable[0], ungradable
    harness = [line for line in summary.distrust if line.startswith("harness check")]
    assert harness == ["harness check not measured: no gradable attempt under ablate:all or off in any of 2 task(s); "
                       "the ablation switch is unverified"], summary.distrust
    left_out = [line for line in summary.distrust if "left out" in line]
    assert left_out == [(f"2 task(s) left out of on - off (over 0 task(s)), on - ablate:all (over 0 task(s)), ablate:all - off "
                         f"(over 0 task(s)) (no gradable attempt under one side): {', '.join(TASKS)}")], summary.distrust
    assert len(summary.distrust) == 3, "one line per cause, one for the harness check, one naming the tasks the comparisons lost"
    assert all(not a.measured for a in summary.ablations if a.kind == "harness-check")
    section = ablation_section(summary)
    assert section.count("not measured") == 3 and "FLAGGED" not in section, "two tasks and the pooled row"


def _record(task: str, condition: str, outcome: str, reason: str | None) -> RunRecord:
    """A record of a scripted agent with `outcome` and `reason` (the rest fixed)."""
    return RunRecord(
        run_id="mixed-run", task_id=task, condition=condition, trial=0, agent="scripted", outcome=outcome,  # type: ignore[arg-type]
        infra_failure=outcome == "ungradable", failure_reason=reason, injection="no", input_tokens=10, output_tokens=1,
        cost_usd=0.0, wall_seconds=1.0, build_under_test="scripted/1",
    )


def test_grouping_keeps_every_cause_and_every_missing_evidence_attempt() -> None:
    """Grouping must lose nothing: two causes are two lines with their own counts and attempts, each
    missing-evidence attempt keeps its own line, and a gap measured on another task is still flagged."""
    sandbox = "the post-turn check could not be sandboxed: no bwrap"
    records = [
        _record("alpha", "off", "ungradable", sandbox), _record("alpha", "ablate:all", "ungradable", sandbox),
        _record("beta", "off", "ungradable", "the agent crashed"),
        _record("beta", "ablate:all", "ungradable", "missing evidence: no transcript at beta/ablate-all/t0"),
        _record("gamma", "off", "fail", None), _record("gamma", "ablate:all", "pass", None),
    ]
    summary = summarize("mixed-run", records, grade_attempts(records))
    assert summary.distrust == (
        f"2 attempt(s) are ungradable (no outcome; in no rate's denominator): {sandbox} (alpha/off/t0, alpha/ablate:all/t0)",
        "1 attempt(s) are ungradable (no outcome; in no rate's denominator): missing evidence (beta/ablate:all/t0)",
        "1 attempt(s) are ungradable (no outcome; in no rate's denominator): the agent crashed (beta/off/t0)",
        "beta/ablate:all/t0: missing evidence: no transcript at beta/ablate-all/t0",
        "harness check not measured for 2 task(s) with no gradable attempt under ablate:all or off: alpha, beta",
        "harness check, task gamma: success(ablate:all) - success(off) = 1 (1/1 vs 0/1 passed; limit 1/5)",
        "harness check: success(ablate:all) - success(off) = 1 (limit 1/5); the ablation switch may not reach every injection path",
        "2 task(s) left out of ablate:all - off (over 1 task(s)) (no gradable attempt under one side): alpha, beta",
    ), summary.distrust
