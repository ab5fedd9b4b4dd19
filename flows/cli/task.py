"""`memtrial task new|check|try`: authoring one task, a thin edge over `tasks_lib.corpus.authoring`.

`check` and `try` build the task from a snapshot of the working tree (a commit object made with a
private index; HEAD, the branch and the index are untouched) unless `--revision` names a commit,
so an author checks a task before committing it, from git objects as every run does.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, out, summary_table
from flows.cli.options import TasksRootOpt, WorkingTreeRevisionOpt

task_app = typer.Typer(help="Author one task: scaffold it, check its invariants, try the calibration pair on it.", no_args_is_help=True)



def _roots(tasks_root: Path | None) -> tuple[Path, Path, str]:
    """(corpus folder, repository root, corpus folder relative to the repository)."""
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.corpus.tasks import TaskCorpusError

    root = (tasks_root or PROJECT_ROOT / "corpora" / "tasks").resolve()
    if not root.is_dir():
        raise TaskCorpusError(f"{root}: the task corpus folder does not exist; pass --tasks-root")
    done = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TaskCorpusError(f"{root}: not inside a git checkout; tasks are built from git objects")
    repo = Path(done.stdout.strip()).resolve()
    return root, repo, root.relative_to(repo).as_posix()


def _commit(repo: Path, subdir: str, revision: str | None) -> str:
    from tasks_lib.corpus.authoring import snapshot_commit
    from tasks_lib.corpus.build import resolve_commit

    return snapshot_commit(repo, [subdir]) if revision is None else resolve_commit(repo, revision, str(repo))


def _fetch_release(folder: Path, repo: Path, commit: str, task_subdir: str) -> None:
    """Fetch the pinned upstream release of the task in `folder` into the machine's cache (an author's
    first check of a new pin); a task without one, or whose manifest the check refuses, fetches nothing."""
    from tasks_lib.contracts import TaskManifest
    from tasks_lib.corpus.upstream import fixture_origin

    try:
        manifest = TaskManifest.model_validate_json((folder / "task.json").read_bytes())
    except (OSError, ValueError):
        return
    if manifest.upstream is not None:
        fixture_origin(repo, commit, task_subdir, manifest, fetch=True)


@task_app.command("new")
def task_new(
    task_id: Annotated[str, typer.Argument(help="The new task's id and folder name (lowercase letters, digits, '-').")],
    kind: Annotated[str, typer.Option(help="Task kind: convention, deducible, cross-file, investigation, continuity, tare, stale-trap.")],
    toolchain: Annotated[str, typer.Option(help="Skeleton to write: sh, python or node.")] = "sh",
    tasks_root: TasksRootOpt = None,
) -> None:
    """Scaffold a task folder: a valid manifest and skeleton whose every TODO(task new) fails the check until written."""
    from tasks_lib.corpus.authoring import scaffold_task

    root, _, _ = _roots(tasks_root)
    files = scaffold_task(root, task_id, kind, toolchain)
    for path in files:
        out.print(f"wrote {path.relative_to(root)}")
    out.print(f"next: fill in every TODO(task new), then 'memtrial task check {task_id}'")


@task_app.command("check")
def task_check(
    task_id: Annotated[str, typer.Argument(help="The task to check (its folder name).")],
    tasks_root: TasksRootOpt = None,
    revision: WorkingTreeRevisionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Run every corpus invariant for one task, with seconds per check; an upstream task's pinned release is
    fetched into the machine's cache first (the one check that downloads). Exit 1 on any failure."""
    from tasks_lib.corpus.tasks import INVARIANTS, check_corpus

    root, repo, subdir = _roots(tasks_root)
    commit = _commit(repo, subdir, revision)
    _fetch_release(root / task_id, repo, commit, f"{subdir}/{task_id}")
    started = time.monotonic()
    report = check_corpus(root, repo, commit, only=[task_id])
    wall = time.monotonic() - started
    check = next((t for t in report.tasks if t.task_id == task_id), None)
    seconds = dict(check.seconds) if check else {}
    failed = {f.invariant for f in report.failures}
    rows = [{"check": name, "result": "FAIL" if name in failed else ("ok" if name in seconds else "not run"),
             "seconds": f"{seconds[name]:.2f}" if name in seconds else "-"} for name in (*INVARIANTS, "build")]
    if as_json:
        emit_json({"ok": report.ok, "task": task_id, "commit": report.commit, "checks": rows, "wall_seconds": round(wall, 3),
                   "failures": [f.model_dump(mode="json") for f in report.failures]})
    else:
        out.print(summary_table(rows, ["check", "result", "seconds"], f"task {task_id} at {report.commit[:12]}"))
        for failure in report.failures:
            out.print(str(failure))
        out.print(f"{'ok' if report.ok else 'FAILED'}: {len(report.failures)} failures in {wall:.1f} s of wall time "
                  "(the fixture and solution check runs overlap)")
    if not report.ok:
        raise typer.Exit(1)


@task_app.command("try")
def task_try(
    task_id: Annotated[str, typer.Argument(help="The task to run (its folder name).")],
    tasks_root: TasksRootOpt = None,
    revision: WorkingTreeRevisionOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the calibration agent's off/on pair on one task and set each outcome beside the corpus's prediction.
    Exit 1 when an outcome differs from the prediction."""
    from tasks_lib.arm.calibration_try import try_task
    from tasks_lib.corpus.tasks import load_task

    root, repo, subdir = _roots(tasks_root)
    task = load_task(root / task_id)
    commit = _commit(repo, subdir, revision)
    outcomes = try_task(task, repo_root=repo, commit=commit, tasks_subdir=subdir)
    rows = [{"condition": o.condition, "outcome": o.record.outcome, "predicted": o.expected.outcome,
             "memories delivered": f"{len(o.record.delivered_ids)}/{len(o.record.planted_ids)}",
             "key memory predicted": "yes" if o.expected.delivered else "no",
             "tokens in+out": o.record.input_tokens + o.record.output_tokens} for o in outcomes]
    ok = all(o.as_expected for o in outcomes)
    if as_json:
        emit_json({"ok": ok, "task": task_id, "commit": commit, "conditions": rows})
    else:
        out.print(summary_table(rows, list(rows[0]), f"calibration pair on {task_id} at {commit[:12]}"))
        flips = {o.condition: o.record.outcome for o in outcomes}
        effect = "memory flips the outcome" if flips.get("off") != flips.get("on") else "memory does not change the outcome"
        out.print(f"{'as predicted' if ok else 'DIFFERS from the prediction'}: {effect} ({task.manifest.kind} task)")
    if not ok:
        raise typer.Exit(1)
