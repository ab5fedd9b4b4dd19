"""A retrieval-suite result as a trend snapshot: which scores are kept and which are gated."""

from __future__ import annotations

from datetime import datetime

from tasks_lib.analysis.trend import Direction, Snapshot
from tasks_lib.suites.retrieval.result import RetrievalResult

SUITE = "retrieval"

GATED: dict[str, Direction] = {
    "recall_at_5": "higher",
    "mrr": "higher",
    "ndcg_at_8": "higher",
    "stale_recall": "lower",
    "false_recall": "lower",
    "direct_coverage": "higher",
    "unanswerable_abstention": "higher",
    "ambiguous_abstention": "higher",
    "graph_multi_hop_recall_at_5": "higher",
    "graph_direct_recall_at_5": "higher",
}
"""Metrics a nightly run may not let fall (or rise, for `lower`)."""


def retrieval_scores(result: RetrievalResult) -> dict[str, float]:
    """The result's measured scores by flat name (unmeasured ones left out)."""
    q = result.quality
    scores: dict[str, float | None] = {
        "recall_at_1": q.recall_at_1, "recall_at_5": q.recall_at_5, "recall_at_8": q.recall_at_8,
        "mrr": q.mrr, "ndcg_at_8": q.ndcg_at_8, "stale_recall": q.stale_recall, "false_recall": q.false_recall,
        "direct_coverage": q.direct_coverage, "unanswerable_abstention": q.unanswerable_abstention,
        "ambiguous_abstention": q.abstention.get("ambiguous-binding"), "automatic_coverage": q.automatic_coverage,
        "duplicate_ratio": result.efficiency.duplicate_ratio, "vector_coverage": result.efficiency.vector_coverage,
        "search_ms_mean": result.efficiency.search_ms_mean, "index_ms": result.efficiency.index_ms,
        "context_bytes_top_5": float(result.efficiency.context_bytes_top_5),
        "storage_bytes": float(result.efficiency.storage_bytes),
        "gates_passed": float(sum(g.passed for g in result.gates)),
    }
    if result.graph is not None:
        scores["graph_multi_hop_recall_at_5"] = result.graph.recall_at_5_on.get("multi-hop")
        scores["graph_multi_hop_recall_at_5_off"] = result.graph.recall_at_5_off.get("multi-hop")
        scores["graph_direct_recall_at_5"] = result.graph.recall_at_5_on.get("direct")
        scores["graph_leaks"] = float(result.graph.leaks)
    return {k: float(v) for k, v in scores.items() if v is not None}


def retrieval_snapshot(result: RetrievalResult, build: str, time: datetime) -> Snapshot:
    """The trend snapshot of one retrieval-suite run."""
    scores = retrieval_scores(result)
    counts = {f"cases_{k}": v for k, v in result.counts.items()}
    counts.update(groups=result.groups, gates=len(result.gates), policy_probes=len(result.policy))
    return Snapshot(
        suite=SUITE, case_set_digest=result.case_set_digest, adapter=result.adapter, config_digest=result.config_digest,
        build=build, time=time, scores=scores, counts=counts, gated={k: v for k, v in GATED.items() if k in scores},
    )
