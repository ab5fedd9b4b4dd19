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
    tasks_root: Annotated[Optional[Path], typer.Option(help="Task corpus folder inside this checkout (default: the bundled corpora/tasks).")] = None,
    revision: Annotated[str, typer.Option(help="Commit whose git objects the tasks are built from.")] = "HEAD",
    as_json: JsonFlag = False,
) -> None:
    """Prove every task's invariants: fails untouched, passes with its solution, hidden tests
    unreachable, no answer leaked, certified clean, digests match. Exit 1 on any failure."""
    from flows.settings import PROJECT_ROOT
    from tasks_lib.corpus.tasks import INVARIANTS, check_corpus, check_split

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


def _summary_table(rows: list[dict[str, Any]], columns: list[str], title: str) -> Table:
    """A rich table of `rows` (dicts) showing `columns`, titled `title`."""
    table = Table(title=title)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*(str(row[c]) for c in columns))
    return table


COMMAND_MODULES = ("memory", "suite", "grading", "report", "run", "budget", "trend")
"""Modules that add their commands to `app` (or a group) when imported; each imports `app` from here."""


def _register_command_modules() -> None:
    import importlib

    here = Path(__file__).parent
    for name in COMMAND_MODULES:
        if (here / f"{name}.py").exists():
            importlib.import_module(f"flows.cli.{name}")


_register_command_modules()


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
