"""The `memtrial` command: a thin edge over the library.

Library errors (`MemtrialError`) become one readable line on stderr and exit status 2; findings
and failed checks exit 1; success exits 0. Prefect is imported only by the commands that run flows.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.table import Table

from tasks_lib.errors import ContractError, MemtrialError

app = typer.Typer(
    name="memtrial",
    help="Measure whether a memory system makes an AI agent better.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
corpus_app = typer.Typer(help="Build, redact and check task corpora.", no_args_is_help=True)
app.add_typer(corpus_app, name="corpus")

out = Console(highlight=False, soft_wrap=True, markup=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True, markup=False)

JsonFlag = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]


def emit_json(payload: Any) -> None:
    """Print a JSON payload on stdout."""
    sys.stdout.write(json.dumps(payload, indent=2, sort_keys=True) + "\n")


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Manifests or receipts to validate (kind from the file name).")],
    kind: Annotated[Optional[str], typer.Option(help="Validate every file as this kind, e.g. task.json.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Validate manifests and receipts against their contracts; report every wrong field."""
    from tasks_lib.contracts import DOCUMENT_KINDS, load_document

    model = None
    if kind is not None:
        model = DOCUMENT_KINDS.get(kind)
        if model is None:
            raise MemtrialError(f"--kind {kind!r} is unknown; known kinds: {', '.join(sorted(DOCUMENT_KINDS))}")
    results = []
    for path in paths:
        try:
            load_document(path, model)
            results.append({"path": str(path), "valid": True, "errors": []})
        except ContractError as error:
            results.append({"path": str(path), "valid": False, "errors": [str(v) for v in error.violations]})
    if as_json:
        emit_json(results)
    else:
        for result in results:
            if result["valid"]:
                out.print(f"ok      {result['path']}")
            for line in result["errors"]:
                out.print(f"invalid {line}")
    if not all(r["valid"] for r in results):
        raise typer.Exit(1)


@corpus_app.command("build")
def corpus_build(
    repository: Annotated[str, typer.Argument(help="Local path or URL of a git repository.")],
    out_dir: Annotated[Path, typer.Option("--out", help="New folder for the packaged corpus (tree/ + corpus.json).")],
    commit: Annotated[str, typer.Option(help="Commit to build (resolved to its full id).")] = "HEAD",
    subdir: Annotated[Optional[str], typer.Option(help="Build only this subtree of the commit.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Build a corpus from git objects only: no .git, no history, no ignored or untracked files."""
    from tasks_lib.corpus import package_corpus

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
    from tasks_lib.redact import REDACTION_RECEIPT, redact_package

    receipt = redact_package(package)
    if as_json:
        emit_json(receipt.model_dump(mode="json"))
        return
    for item in receipt.removed:
        out.print(f"removed {item.path}  ({item.rule}, sha256 {item.sha256[:12]})")
    out.print(f"{len(receipt.removed)} removed; receipt {package / REDACTION_RECEIPT}")


@corpus_app.command("check")
def corpus_check(
    tasks_root: Annotated[Optional[Path], typer.Option(help="Task corpus folder inside this checkout (default: the bundled corpora/tasks).")] = None,
    revision: Annotated[str, typer.Option(help="Commit whose git objects the tasks are built from.")] = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Prove every task's invariants: fails untouched, passes with its solution, hidden tests
    unreachable, no answer leaked, certified clean, digests match. Exit 1 on any failure."""
    from flows.settings import PROJECT_ROOT
    from tasks_lib.taskcorpus import INVARIANTS, check_corpus, check_split

    root = (tasks_root or PROJECT_ROOT / "corpora" / "tasks").resolve()
    report = check_corpus(root, PROJECT_ROOT, revision)
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
        out.print(_summary_table(rows, list(rows[0]) if rows else ["task"], f"task corpus at {report.commit[:12]}"))
        for failure in report.failures:
            out.print(str(failure))
        for problem in split_problems:
            out.print(f"split: {problem}")
        out.print(f"{'ok' if ok else 'FAILED'}: {len(report.tasks)} tasks, {len(report.failures) + len(split_problems)} failures")
    if not ok:
        raise typer.Exit(1)


@app.command()
def certify(
    path: Annotated[Path, typer.Argument(help="A packaged corpus folder or any directory tree (the source corpus).")],
    challenge: Annotated[Optional[Path], typer.Option(help="challenge.json or task.json whose visible text and answer phrases are checked too.")] = None,
    fixture: Annotated[Optional[Path], typer.Option(help="fixture.json whose arms' graph and evidence artifacts are checked too (digests verified).")] = None,
    evidence: Annotated[Optional[list[Path]], typer.Option(help="Evidence corpus folder (repeatable).")] = None,
    graph: Annotated[Optional[list[Path]], typer.Option(help="Graph/memory artifact of an arm (repeatable).")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Static, model-free, fail-closed leak check. Exit 1 with findings, 0 when clean, 2 on error."""
    from tasks_lib.certify import certify_path

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


@app.command()
def run(
    artifacts: Annotated[Optional[str], typer.Option(help="Artifact root: a folder or s3://bucket/prefix (default $MEMTRIAL_ARTIFACT_ROOT or .memtrial/artifacts).")] = None,
    tasks_root: Annotated[Optional[Path], typer.Option(help="Task corpus folder (default: the bundled corpora/tasks).")] = None,
    revision: Annotated[str, typer.Option(help="Commit of this checkout whose git objects the fixtures are built from.")] = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Run the main job on the embedded default. Today: the preparation phase of every bundled task
    (build from git objects, redact, certify) as a Prefect flow with cached stages."""
    import logging
    import os

    from flows.settings import PROJECT_ROOT, configure_prefect, default_artifact_root

    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # The embedded ephemeral server logs a harmless shutdown race as an ERROR traceback.
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    configure_prefect()
    logging.getLogger("prefect").setLevel(logging.WARNING)
    from flows.prepare import prepare_flow
    from tasks_lib.artifacts import new_run_id

    root = artifacts or default_artifact_root()
    run_id = new_run_id()
    err.print(f"memtrial: preparing the bundled tasks (run {run_id}); Prefect's local server can take ~20 s to start")
    summary = prepare_flow(
        tasks_root=str((tasks_root or PROJECT_ROOT / "corpora" / "tasks").resolve()),
        repo_root=str(PROJECT_ROOT),
        artifact_root=root,
        run_id=run_id,
        revision=revision,
    )
    rows = [
        {
            "task": p.name,
            "files": len(p.build.files),
            "redacted": len(p.redaction.removed),
            "certification": p.certification.verdict,
            "findings": len(p.certification.findings),
            "cached": "yes" if cached else "no",
        }
        for p, cached in zip(summary.prepared, summary.cached)
    ]
    location = f"{root.rstrip('/')}/runs/{run_id}/prepare/"
    if as_json:
        emit_json({"run_id": run_id, "artifacts": location, "table": summary.table_key, "tasks": rows, "clean": summary.clean})
    else:
        out.print(_summary_table(rows, list(rows[0]) if rows else [], f"preparation, run {run_id}"))
        out.print(f"artifacts: {location}")
    if not summary.clean:
        raise typer.Exit(1)


COMMAND_MODULES = ("cli_memory", "cli_suite", "cli_grading", "cli_report", "cli_flows", "cli_budget", "cli_trend")
"""Modules that add their commands to `app` (or a group) when imported; each imports `app` from here."""


def _register_command_modules() -> None:
    import importlib

    here = Path(__file__).parent
    for name in COMMAND_MODULES:
        if (here / f"{name}.py").exists():
            importlib.import_module(f"flows.{name}")


_register_command_modules()


@app.command()
def paired(
    agent: Annotated[str, typer.Option(help="Agent adapter: calibration, claude-code, openai-chat, command.")] = "calibration",
    tasks: Annotated[Optional[str], typer.Option(help="Comma-separated task ids (default: every bundled task).")] = None,
    conditions: Annotated[str, typer.Option(help="Comma-separated conditions: off, on, ablate:<lane>, ablate:all.")] = "off,on",
    trials: Annotated[int, typer.Option(help="Trials per task and condition.")] = 1,
    sandbox: Annotated[str, typer.Option(help="Sandbox the agent's commands run in: local or docker.")] = "local",
    embedder: Annotated[str, typer.Option(help="Embedder of the reference memory system: hashed (offline default) or minilm.")] = "hashed",
    artifacts: Annotated[Optional[str], typer.Option(help="Artifact root: a folder or s3://bucket/prefix.")] = None,
    revision: Annotated[str, typer.Option(help="Commit of this checkout whose git objects the fixtures are built from.")] = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Run the paired matrix: every task under every condition, several trials, conditions interleaved."""
    import pyarrow as pa

    from flows.settings import PROJECT_ROOT, default_artifact_root
    from tasks_lib.arms import check_conditions, run_matrix, schedule, select_tasks, task_subdir_of
    from tasks_lib.artifacts import RECORDS_TABLE, new_run_id, open_store, run_key
    from tasks_lib.corpus import resolve_commit
    from tasks_lib.memory.lanes import LANES
    from tasks_lib.taskcorpus import load_tasks

    tasks_root = PROJECT_ROOT / "corpora" / "tasks"
    chosen = select_tasks(load_tasks(tasks_root), [t.strip() for t in tasks.split(",") if t.strip()] if tasks else None)
    plan = schedule(chosen, check_conditions([c.strip() for c in conditions.split(",") if c.strip()], LANES), trials)
    root = artifacts or default_artifact_root()
    store = open_store(root)
    run_id = new_run_id("paired")
    commit = resolve_commit(PROJECT_ROOT, revision, str(PROJECT_ROOT))
    err.print(f"memtrial: {len(plan)} attempts ({len(chosen)} tasks x {conditions} x {trials}), run {run_id}")
    records = run_matrix(
        plan, run_id=run_id, repo_root=PROJECT_ROOT, commit=commit, tasks_subdir=task_subdir_of(tasks_root, PROJECT_ROOT),
        agent_name=agent, store=store, agent_options={}, embedder=embedder, sandbox=sandbox,
        progress=lambda r: err.print(f"  {r.task_id} {r.condition} t{r.trial}: {r.outcome} (injection {r.injection})"),
    )
    table_key = run_key(run_id, RECORDS_TABLE)
    store.put_table(table_key, pa.Table.from_pylist([r.model_dump(mode="json") for r in records]))
    summary: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        cell = summary.setdefault((r.task_id, r.condition), {"task": r.task_id, "condition": r.condition, "passes": 0, "runs": 0, "injected": 0, "tokens": 0})
        cell["runs"] += 1
        cell["passes"] += r.outcome == "pass"
        cell["injected"] += r.injection == "yes"
        cell["tokens"] += r.input_tokens + r.output_tokens
    rows = [{**c, "mean_tokens": round(c.pop("tokens") / c["runs"])} for c in summary.values()]
    location = f"{root.rstrip('/')}/runs/{run_id}/"
    if as_json:
        emit_json({"run_id": run_id, "artifacts": location, "records": table_key, "cells": rows})
    else:
        out.print(_summary_table(rows, ["task", "condition", "passes", "runs", "injected", "mean_tokens"], f"paired run {run_id} ({agent})"))
        out.print(f"records: {root.rstrip('/')}/{table_key}")


def _summary_table(rows: list[dict[str, Any]], columns: list[str], title: str) -> Table:
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    return table


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; return the exit status instead of raising.

    Usage errors are reported by typer (exit 2); a MemtrialError becomes one line on stderr
    and exit 2; commands signal findings or failed checks with exit 1.
    """
    try:
        app(args=argv, prog_name="memtrial", standalone_mode=True)
    except SystemExit as exit_:
        code = exit_.code
        return code if isinstance(code, int) else (0 if code is None else 1)
    except MemtrialError as error:
        err.print(f"memtrial: error: {error}")
        return 2
    return 0


def entry() -> None:
    """Console-script entry point."""
    sys.exit(main())
