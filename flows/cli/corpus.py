"""`memtrial corpus build|redact|check|fetch` and `memtrial certify`: the corpus stage, a thin edge over `tasks_lib.corpus`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import JsonFlag, emit_json, err, out, summary_table
from flows.cli.options import RevisionOpt, TasksRootOpt

corpus_app = typer.Typer(help="Build, redact and check task corpora.", no_args_is_help=True)


@corpus_app.command("build")
def corpus_build(
    repository: Annotated[str, typer.Argument(help="Local path or URL of a git repository.")],
    out_dir: Annotated[Path, typer.Option("--out", help="New folder for the packaged corpus (tree/ + corpus.json).")],
    commit: Annotated[str, typer.Option(help="Commit to build (resolved to its full id).")] = "HEAD",
    subdir: Annotated[str | None, typer.Option(help="Build only this subtree of the commit.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Build a corpus from git objects only: no .git, no history, no ignored or untracked files."""
    from tasks_lib.corpus.build import package_corpus

    build = package_corpus(repository, commit, out_dir, subdir)
    summary = {
        "corpus_id": build.corpus_id,
        "commit": build.source.commit,
        "tree_oid": build.tree_oid,
        "files": len(build.files),
        "out": str(out_dir),
    }
    if as_json:
        emit_json(summary)
    else:
        out.print(f"built corpus {build.corpus_id[:16]} from {build.source.commit[:12]}: {len(build.files)} files in {out_dir}")


@corpus_app.command("redact")
def corpus_redact(
    package: Annotated[Path, typer.Argument(help="A packaged corpus folder made by 'memtrial corpus build'.")],
    as_json: JsonFlag = False,
) -> None:
    """Remove hand-written agent memory (AGENTS.md, CLAUDE.md, .claude/, ...) and write a receipt."""
    from tasks_lib.corpus.redact import REDACTION_RECEIPT, redact_package

    receipt = redact_package(package)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    for item in receipt.removed:
        out.print(f"removed {item.path}  ({item.rule}, sha256 {item.sha256[:12]})")
    out.print(f"{len(receipt.removed)} removed; receipt {package / REDACTION_RECEIPT}")


@corpus_app.command("check")
def corpus_check(
    tasks_root: TasksRootOpt = None,
    revision: RevisionOpt = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Prove every task's invariants: fails untouched, passes with its solution, hidden tests
    unreachable, no answer leaked, certified clean, digests match. The tasks are built from the
    commit's git objects (what every arm runs); a task folder the working tree holds uncommitted or
    edited since is a failure too, since a run would refuse or leave it out. Exit 1 on any failure."""
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.corpus.tasks import INVARIANTS, check_corpus, check_split, edited_folders

    root = (tasks_root or PROJECT_ROOT / "corpora" / "tasks").resolve()
    report = check_corpus(root, PROJECT_ROOT, revision)
    # the check reads the commit; a run reads the working tree too, so an uncommitted edit is a failure here
    report = report.model_copy(update={"failures": (*report.failures, *edited_folders(root, PROJECT_ROOT, report.commit, report.tasks_dir))})
    split_problems = check_split(root)
    per_task = [
        {
            "task": check.task_id,
            "kind": check.kind or "?",
            **{name: "FAIL" if any(f.invariant == name for f in check.failures) else "ok" for name in INVARIANTS},
        }
        for check in report.tasks
    ]
    ok = report.ok and not split_problems
    if as_json:
        emit_json({
            "ok": ok,
            "commit": report.commit,
            "tasks": per_task,
            "failures": [f.model_dump(mode="json") for f in report.failures],
            "split_problems": split_problems,
        })
    else:
        short = {"fails-on-fixture": "fails", "passes-with-solution": "passes", "hidden-unreachable": "hidden",
                 "no-answer-leak": "no-leak", "certification-clean": "certified", "digests-match": "digests"}
        rows = [{short.get(k, k): v for k, v in row.items()} for row in per_task]
        out.print(summary_table(rows, list(rows[0]) if rows else ["task"], f"task corpus at {report.commit[:12]}"))
        for failure in report.failures:
            out.print(str(failure))
        for problem in split_problems:
            out.print(f"split: {problem}")
        out.print(f"{'ok' if ok else 'FAILED'}: {len(report.tasks)} tasks, {len(report.failures) + len(split_problems)} failures")
    if not ok:
        raise typer.Exit(1)


@corpus_app.command("fetch")
def corpus_fetch(
    tasks_root: TasksRootOpt = None,
    revision: RevisionOpt = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Set-up: fetch, verify and cache the pinned upstream source of every real-project task (PyPI sdist,
    npm tarball or git commit) in this machine's cache and compose its fixture; nothing is fetched twice,
    and runs never download. Exit 1 on any failure."""
    from flows.runtime.settings import PROJECT_ROOT
    from tasks_lib.corpus.prepare import fetch_upstream_sources
    from tasks_lib.corpus.upstream import upstream_cache_root

    root = (tasks_root or PROJECT_ROOT / "corpora" / "tasks").resolve()
    fetched = fetch_upstream_sources(PROJECT_ROOT, revision, root)
    failed = [f for f in fetched if f.error]
    if as_json:
        emit_json({"ok": not failed, "cache": str(upstream_cache_root()),
                   "tasks": [{"task": f.task_id, "source": f.source, "fixture_commit": f.fixture_commit, "error": f.error} for f in fetched]})
    else:
        rows = [{"task": f.task_id, "source": f.source, "fixture": (f.fixture_commit or "")[:12] or "FAILED"} for f in fetched]
        if rows:
            out.print(summary_table(rows, ["task", "source", "fixture"], f"upstream sources in {upstream_cache_root()}"))
        for failure in failed:
            err.print(failure.error or "")
        out.print(f"{'ok' if not failed else 'FAILED'}: {len(fetched)} upstream tasks, {len(failed)} failed")
    if failed:
        raise typer.Exit(1)


def certify(
    path: Annotated[Path, typer.Argument(help="A packaged corpus folder or any directory tree (the source corpus).")],
    challenge: Annotated[Path | None, typer.Option(help="challenge.json or task.json whose visible text and answer phrases are checked too.")] = None,
    fixture: Annotated[Path | None, typer.Option(help="fixture.json whose arms' graph and evidence artifacts are checked too (digests verified).")] = None,
    evidence: Annotated[list[Path] | None, typer.Option(help="Evidence corpus folder (repeatable).")] = None,
    graph: Annotated[list[Path] | None, typer.Option(help="Graph/memory artifact of an arm (repeatable).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Static, model-free, fail-closed leak check. Exit 1 with findings, 0 when clean, 2 on error."""
    from tasks_lib.corpus.certify import certify_path

    report = certify_path(path, challenge=challenge, fixture=fixture, evidence=evidence or [], graphs=graph or [])
    if as_json:
        emit_json(report.model_dump(mode="json"))
    else:
        for finding in report.findings:
            where = f"{finding.path}:{finding.line}" if finding.line else finding.path
            out.print(f"{finding.kind:20} {finding.surface:9} {where}  {finding.detail}")
        scanned = sum(s.files_scanned for s in report.scans)
        out.print(f"{report.verdict}: {len(report.findings)} findings in {scanned} files scanned")
        for item in report.unchecked:
            err.print(f"warning: UNCHECKED {item}")
    if report.verdict == "findings":
        raise typer.Exit(1)
