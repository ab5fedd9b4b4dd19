"""`memtrial suite retrieval`: the offline retrieval suite, its gates, report and trend snapshot."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from flows.cli.common import DEFAULT_EMBEDDER, JsonFlag, emit_json, err, out
from flows.cli.options import CurveOpt, EmbedderOpt, MemoryOpt, TrendRootOpt
from tasks_lib.errors import MemtrialError

if TYPE_CHECKING:
    from tasks_lib.suites.retrieval.result import RetrievalResult


def default_curve(memory: str, embedder: str) -> str:
    """The trend curve a run appends to: `retrieval` for the default configuration, else `retrieval-<memory>-<embedder>`."""
    return "retrieval" if (memory, embedder) == ("reference", "hashed") else f"retrieval-{memory}-{embedder}"


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.1f}%"


def suite_retrieval(
    memory: MemoryOpt = "reference",
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    min_score: Annotated[float | None, typer.Option("--min-score", help="Exit 1 when Recall@5 (the headline score, 0-1) is below this bar.")] = None,
    gates_file: Annotated[Path | None, typer.Option("--gates", help="JSON gates file overriding seed 002's thresholds (schema_version 1 plus any fields).")] = None,
    report: Annotated[Path | None, typer.Option("--report", help="Write the full result (every case, gates, efficiency) as JSON to this file.")] = None,
    artifacts: TrendRootOpt = None,
    curve: CurveOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Run the deterministic offline retrieval suite in a disposable store; exit 1 when a gate or --min-score fails.
    Embeds with the nightly default's embedder unless --embedder says otherwise."""
    from flows.runtime.settings import build_under_test
    from tasks_lib.analysis.trend import append_snapshot, now
    from tasks_lib.artifacts import open_store, write_atomically
    from tasks_lib.memory.registry import get_memory_system, open_memory_system
    from tasks_lib.suites.retrieval import (
        RetrievalGates,
        bundled_cases,
        load_gates,
        run_retrieval_suite,
    )
    from tasks_lib.suites.retrieval.snapshot import retrieval_snapshot

    if min_score is not None and not 0 <= min_score <= 1:
        raise MemtrialError(f"--min-score: {min_score} is outside 0..1; give a share such as 0.9")
    gates = load_gates(gates_file) if gates_file else RetrievalGates()
    cases, graph, policy = bundled_cases()
    get_memory_system(memory)  # an unknown name fails here, listing the known ones
    result = run_retrieval_suite(
        lambda folder: open_memory_system(memory, folder, embedder=embedder, scratch=True), cases, gates,
        graph_cases=graph, policy=policy, adapter_name=memory, embedder=embedder,
    )
    if report:
        write_atomically(report, (result.model_dump_json(indent=2) + "\n").encode())
    snapshot_key = None
    if artifacts:
        snapshot = retrieval_snapshot(result, build_under_test(), now())
        snapshot_key = append_snapshot(open_store(artifacts), snapshot, curve or default_curve(memory, embedder))
    below = min_score is not None and result.score < min_score
    if as_json:
        payload = result.model_dump(mode="json")
        payload["min_score"] = {"bar": min_score, "passed": not below} if min_score is not None else None
        payload["trend"] = f"{artifacts.rstrip('/')}/{snapshot_key}" if artifacts and snapshot_key else None
        emit_json(payload)
    else:
        _print_result(result)
        if snapshot_key:
            out.print(f"trend snapshot: {artifacts.rstrip('/')}/{snapshot_key}")  # type: ignore[union-attr]
        if min_score is not None:
            out.print(f"score (Recall@5) {result.score:.3f} {'<' if below else '>='} --min-score {min_score}")
    if below or not result.passed:
        raise typer.Exit(1)


def _print_result(result: RetrievalResult) -> None:
    out.print(f"retrieval suite: {result.adapter} ({result.embedder}), {result.groups} groups, {len(result.cases)} cases")
    cases = Table(title="every question (hit = relevant memory in the top 5; auto = automatic injection)")
    for column in ("case", "class", "rank", "top 5", "auto"):
        cases.add_column(column)
    for row in result.cases:
        hit = "-" if row.hit_at_5 is None else ("hit" if row.hit_at_5 else "MISS")
        auto = {None: "-", True: "ok", False: "WRONG"}[row.automatic_ok]
        cases.add_row(row.id, row.case_class, str(row.rank or "-"), hit, f"{auto} ({row.automatic or 'abstained'})")
    out.print(cases)
    for row in result.cases:
        if row.hit_at_5 is False or row.automatic_ok is False or row.stale_in_top_5 or row.forbidden_in_top_5:
            out.print(f"{row.id}: {row.question}")
            for recalled in row.top or ():
                out.print(f"    [{recalled.key}] {recalled.text}")
            if not row.top:
                out.print("    (nothing recalled)")
    q, e = result.quality, result.efficiency
    metrics = Table(title="quality")
    metrics.add_column("metric")
    metrics.add_column("value")
    for name, value in (
        ("Recall@1", q.recall_at_1), ("Recall@5", q.recall_at_5), ("Recall@8", q.recall_at_8), ("MRR", q.mrr),
        ("nDCG@8", q.ndcg_at_8), ("stale recall", q.stale_recall), ("false recall", q.false_recall),
        ("unanswerable abstention", q.unanswerable_abstention), ("direct-fact automatic coverage", q.direct_coverage),
        ("automatic coverage (informational)", q.automatic_coverage),
    ):
        metrics.add_row(name, f"{value:.3f}" if name in ("MRR", "nDCG@8") and value is not None else _pct(value))
    for name, value in q.abstention.items():
        metrics.add_row(f"abstention: {name}", _pct(value))
    for name, value in q.recall_at_5_by_class.items():
        metrics.add_row(f"Recall@5: {name}", _pct(value))
    out.print(metrics)
    cost = Table(title="efficiency (adapter accounting)")
    cost.add_column("measure")
    cost.add_column("value")
    for name, value in e.model_dump().items():
        cost.add_row(name, "n/a" if value is None else str(value))
    out.print(cost)
    if result.graph is not None:
        graph = Table(title="one-hop graph calibration (Recall@5)")
        for column in ("class", "cases", "graph off", "graph on"):
            graph.add_column(column)
        for name in ("direct", "multi-hop", "overall"):
            count = result.graph.counts.get(name, sum(result.graph.counts.get(c, 0) for c in ("direct", "multi-hop")))
            graph.add_row(name, str(count), _pct(result.graph.recall_at_5_off.get(name)), _pct(result.graph.recall_at_5_on.get(name)))
        out.print(graph)
        out.print(f"graph calibration: {result.graph.leaks} leaks, {result.graph.required_misses} required misses, "
                  f"{result.graph.embedding_calls_per_query} embedding calls per query, {result.graph.llm_calls} LLM calls")
    gates = Table(title="gates")
    for column in ("gate", "value", "bar", "result", "detail"):
        gates.add_column(column)
    for g in result.gates:
        shown = "n/a" if g.value is None else (str(int(g.value)) if float(g.value).is_integer() else f"{g.value:.3f}")
        gates.add_row(g.name, shown, f"{g.op} {g.threshold:g}", "pass" if g.passed else "FAIL", g.detail)
    out.print(gates)
    failed = [g.name for g in result.gates if not g.passed]
    out.print("all gates pass" if not failed else f"FAILED gates: {', '.join(failed)}")
    if failed:
        err.print(f"memtrial: {len(failed)} retrieval gate(s) failed")
