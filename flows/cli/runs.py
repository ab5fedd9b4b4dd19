"""`memtrial runs` and `memtrial show`: finding and reading the runs under an artifact root.

A thin edge over `tasks_lib.run.index`: an unknown run or attempt is a `MemtrialError` (one line naming
what exists, exit 2). Neither command starts Prefect or writes anything.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from flows.cli.common import JsonFlag, agent_run, emit_json, err, out, summary_table
from flows.cli.options import ArtifactRootOpt
from flows.cli.report import headline_lines

if TYPE_CHECKING:
    from tasks_lib.agents.base import TranscriptStep
    from tasks_lib.analysis.grading import GradingSummary
    from tasks_lib.artifacts import ArtifactStore
    from tasks_lib.run.index import AttemptView, RunEntry, RunView

COLUMNS = ["run", "status", "agents", "memory system", "started (UTC)", "headline"]
STEPS_SHOWN = 40
"""Transcript steps `memtrial show` prints before it elides the middle."""
STEP_WIDTH = 160
"""Characters of a step's text `memtrial show` prints."""


def _store(root: str | None, command: str = "memtrial runs") -> ArtifactStore:
    """The store of the artifact root to read; a root that cannot be one (a file) is refused in one
    line naming where it was given, never listed as a root with no runs."""
    from flows.runtime.settings import default_artifact_root
    from tasks_lib.artifacts import open_store
    from tasks_lib.errors import ContractError
    from tasks_lib.run.preflight import root_violation

    chosen = root or default_artifact_root()
    violation = root_violation(chosen, "--artifact-root" if root else None, command, Path.cwd(), write=False)
    if violation is not None:
        raise ContractError([violation])
    return open_store(chosen)


def _status(entry: RunEntry) -> str:
    text: str = entry.state
    if entry.state in ("failed", "interrupted") and entry.stage:
        text += f" ({entry.stage})"
    return text


def _headline(entry: RunEntry, parents: set[str]) -> str:
    if entry.headline is not None:
        return entry.headline.describe()
    if entry.run_id in parents:
        return "see its agents' runs below"
    if entry.state in ("failed", "interrupted", "running", "unreadable"):
        return "-"
    return "not graded ('memtrial report RUN')"


def _row(entry: RunEntry, parents: set[str]) -> dict[str, Any]:
    return {
        "run": f"  {entry.run_id}" if entry.parent else entry.run_id,
        "status": _status(entry),
        "agents": ",".join(entry.agents) or "-",
        "memory system": ",".join(entry.memory_systems) or "-",
        "started (UTC)": entry.started_at.strftime("%Y-%m-%d %H:%M:%S") if entry.started_at else "-",
        "headline": _headline(entry, parents),
    }


def runs(root: ArtifactRootOpt = None, as_json: JsonFlag = False) -> None:
    """List the runs under the artifact root, newest first: status, agents, memory system, when, headline
    (a run whose records cannot be read is listed `unreadable`, with why, and the listing exits 0)."""
    from tasks_lib.run.index import list_runs

    store = _store(root)
    entries = list_runs(store)
    if as_json:
        emit_json([e.model_dump(mode="json") for e in entries])
        return
    if not entries:
        out.print(f"no runs under {store.uri.rstrip('/')}/runs/; make one with 'memtrial paired' or 'memtrial run'")
        return
    parents = {e.parent for e in entries if e.parent}
    out.print(summary_table([_row(e, parents) for e in entries], COLUMNS, f"runs under {store.uri}"))
    for entry in entries:
        if entry.state == "failed":
            out.print(f"{entry.run_id}: failed{f' in {entry.stage}' if entry.stage else ''}: {entry.error}")
        if entry.state == "stopped" and not entry.parent:
            resume = (f"'memtrial rerun {entry.run_id}' finishes it from its cached stages" if entry.rerunnable
                      else "a paired run cannot be resumed: start a new 'memtrial paired'")
            out.print(f"{entry.run_id}: stopped: its marker says running but its process is gone (killed before it could end); {resume}")
        if entry.unreadable is not None:
            out.print(f"{entry.run_id}: unreadable: {entry.unreadable}")
        for problem in entry.problems:
            err.print(f"warning: {entry.run_id}: {problem}")


def _print_run(view: RunView, run_id: str, children: Sequence[tuple[str, GradingSummary]] = ()) -> None:
    entry, status = view.entry, view.status
    out.print(f"run:           {run_id}{f' (agent run of {entry.parent})' if entry.parent else ''}")
    source = {"marker": "", "parent": " (its nightly run's marker)", "files": " (no status marker: inferred from its files)"}
    out.print(f"status:        {_status(entry)}{source[entry.state_from]}")
    if entry.error:
        out.print(f"error:         {entry.error}")
    out.print(f"agents:        {', '.join(entry.agents) or '-'}")
    out.print(f"memory system: {', '.join(entry.memory_systems) or '-'}")
    if status is not None:
        ended = status.ended_at.isoformat() if status.ended_at else "-"
        resumed = f"  resumed: {status.resumed_at.isoformat()}" if status.resumed_at else ""
        out.print(f"started:       {status.started_at.isoformat()}{resumed}  ended: {ended}  by {status.memtrial_version}")
    elif entry.started_at is not None:
        out.print(f"started:       {entry.started_at.isoformat()}")
    out.print(f"attempts:      {view.attempts}")
    out.print(f"evidence:      {view.seal}")
    for child in view.agent_runs:
        out.print(f"agent run:     {child}  ('memtrial show {child}')")
    for child, summary in children:
        out.print(f"headline of {child}:")
        for line in headline_lines(summary) or ["no on/off comparison in this run"]:
            out.print(f"  {line}")
    if view.summary is not None:
        for line in headline_lines(view.summary) or ["headline: no on/off comparison in this run"]:
            out.print(line)
    elif view.attempts:
        out.print(f"not graded yet: 'memtrial report {run_id}' writes its summary and report")
    if view.delivery:
        checked = "" if view.summary is not None else " (records checked against their evidence)"
        out.print(f"delivery per condition{checked}:")
        for rate in view.delivery:
            note = f"  WARNING: {rate.warning}" if rate.warning else ""
            out.print(f"  {rate.condition:<14} {rate.confirmed}/{rate.attempts} confirmed, {rate.unknown} unknown{note}")
    for warning in view.summary.warnings if view.summary is not None else ():
        out.print(f"warning: {warning}")
    for problem in entry.problems:
        err.print(f"warning: {problem}")


def _print_attempt(view: AttemptView) -> None:
    from tasks_lib.run.index import abbreviate

    r = view.record
    out.print(f"attempt:          {r.task_id} {r.condition} trial {r.trial} of run {r.run_id} ({r.agent})")
    out.print(f"outcome:          {r.outcome}{' (infrastructure failure)' if r.infra_failure else ''}")
    out.print(f"failure reason:   {r.failure_reason or '-'}")
    if view.evidence_problem:
        out.print(f"evidence:         DOES NOT BACK THE OUTCOME: {view.evidence_problem} (grading counts it ungradable)")
    out.print(f"injection:        {r.injection}{f' via {r.injection_channel}' if r.injection_channel else ''}")
    out.print(f"planted ids:      {', '.join(r.planted_ids) or '-'}")
    out.print(f"delivered ids:    {', '.join(r.delivered_ids) or '-'}")
    if r.unwitnessed_ids:
        out.print(f"unwitnessed ids:  {', '.join(r.unwitnessed_ids)} (never counted as delivered)")
    if r.witness_flooded:
        out.print("witness:          flooded (connections or requests over its bounds were refused; see delivery.json)")
    out.print(f"tokens:           {r.input_tokens} in, {r.output_tokens} out; cost ${r.cost_usd:.4f}")
    out.print(f"wall time:        {r.wall_seconds:.2f} s")
    if r.agent_unenforced:
        out.print(f"agent limits:     not enforced: {'; '.join(r.agent_unenforced)}")
    out.print(f"check exit code:  {'-' if r.check_exit_code is None else r.check_exit_code}")
    unenforced = f" (not enforced: {', '.join(r.check_unenforced)})" if r.check_unenforced else ""
    out.print(f"check sandbox:    {r.check_sandbox or '-'}{unenforced}")
    judged = {"apart": "apart (a judge of its own uid; the code reached only through the jail)",
              "in-process": "in process (beside the code it judges, which could read or forge it)"}
    out.print(f"judged:           {judged.get(r.judge or '', '-')}")
    if view.check_output is not None:
        out.print(f"check output:     {r.check_output}")
        out.print(view.check_output.rstrip())
    else:
        out.print("check output:     not stored (no check ran, or the run predates check.txt)")
    if view.audit is not None:
        a = view.audit
        verdict = "passed" if a.passed else f"FAILED: {len(a.violations)} change(s) outside the allowed paths"
        if a.limit_breach is not None:
            verdict = f"FAILED: {a.limit_breach.describe()}"
        out.print(f"audit receipt:    {verdict}; {len(a.allowed_changes)} allowed change(s) ({r.audit_receipt})")
        for change in a.violations[:10]:
            out.print(f"  violation: {change.kind} {change.path}")
    else:
        out.print(f"audit receipt:    missing or unreadable ({r.audit_receipt or 'the record names none'})")
    if r.delivery_receipt:
        served = f"{len(view.delivery.recalls)} recall(s) served by {view.delivery.served_by}" if view.delivery else "missing or unreadable"
        out.print(f"delivery receipt: {served} ({r.delivery_receipt})")
    if view.transcript is None:
        out.print(f"transcript:       missing or unreadable ({r.transcript or 'the record names none'})")
        return
    steps = view.transcript.steps
    out.print(f"transcript:       {len(steps)} step(s) ({r.transcript})")
    shown: list[tuple[int, TranscriptStep | None]] = list(enumerate(steps))
    if len(shown) > STEPS_SHOWN:
        head, tail = STEPS_SHOWN - 10, 10
        shown = [*shown[:head], (-1, None), *shown[-tail:]]
    for index, step in shown:
        if step is None:
            out.print(f"  ... {len(steps) - STEPS_SHOWN} step(s) not shown ...")
            continue
        out.print(f"  {index:>3} {step.source}/{step.kind}: {abbreviate(step.text, STEP_WIDTH)}")


def _attempt_run(store: ArtifactStore, run_id: str) -> str:
    """The run holding `run_id`'s attempts: itself, or a nightly run's one agent run (named on stderr).
    Raises MemtrialError listing the agent runs when a nightly run has several."""
    return agent_run(store, run_id, "attempt", "memtrial show {run} TASK CONDITION TRIAL")


def show(
    run_id: Annotated[str, typer.Argument(metavar="RUN", help="Run id, as 'memtrial runs' lists it.")],
    task: Annotated[str | None, typer.Argument(help="Task id of one attempt (give CONDITION and TRIAL too).")] = None,
    condition: Annotated[str | None, typer.Argument(help="Condition of the attempt: off, on, ablate:<lane>, ablate:all.")] = None,
    trial: Annotated[str | None, typer.Argument(help="Trial of the attempt: 0, 1, ... (or t0, t1, ...).")] = None,
    root: ArtifactRootOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Show a run (status, headline, delivery per condition, warnings), or one attempt of it (record,
    transcript steps, audit verdict, check)."""
    from tasks_lib.errors import MemtrialError
    from tasks_lib.run.index import show_attempt, show_run

    store = _store(root, "memtrial show")
    if task is None:
        view = show_run(store, run_id)
        if as_json:
            emit_json({"entry": view.entry.model_dump(mode="json"), "status": view.status.model_dump(mode="json") if view.status else None,
                       "summary": view.summary.model_dump(mode="json") if view.summary else None, "attempts": view.attempts,
                       "delivery": [d.model_dump(mode="json") for d in view.delivery], "agent_runs": list(view.agent_runs),
                       "evidence": view.seal})
            return
        graded: list[tuple[str, GradingSummary]] = []
        for child in view.agent_runs:
            summary = show_run(store, child).summary
            if summary is not None:
                graded.append((child, summary))
        _print_run(view, run_id, graded)
        return
    if condition is None or trial is None:
        raise MemtrialError(f"show {run_id} {task}: an attempt is TASK CONDITION TRIAL, e.g. 'memtrial show {run_id} {task} on 0'")
    attempt = show_attempt(store, _attempt_run(store, run_id), task, condition, trial)
    if as_json:
        emit_json({"record": attempt.record.model_dump(mode="json"), "evidence_problem": attempt.evidence_problem,
                   "audit": attempt.audit.model_dump(mode="json") if attempt.audit else None,
                   "delivery": attempt.delivery.model_dump(mode="json") if attempt.delivery else None,
                   "transcript": attempt.transcript.model_dump(mode="json") if attempt.transcript else None,
                   "check_output": attempt.check_output})
        return
    _print_attempt(attempt)
