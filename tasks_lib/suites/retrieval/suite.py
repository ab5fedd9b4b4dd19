"""The offline retrieval suite: index every group in a disposable store, ask every case, score, gate.

`run_retrieval_suite(adapter_factory, cases, gates)` is the library entry point the CLI and the
Prefect flow call. The store lives in a temporary folder the suite creates and deletes; it never
touches an agent's configured memory path. Nothing here calls a chat model: LLM counters are read
from the adapter's own accounting, so a non-zero figure is the adapter's doing and fails the gate.
"""

from __future__ import annotations

import hashlib
import json
import math
import tempfile
from collections import defaultdict
from pathlib import Path

from tasks_lib.contracts import ContractModel
from tasks_lib.memory.adapter import Accounting, MemoryAdapter, MemoryHit
from tasks_lib.suites.retrieval.cases import (
    ANSWERABLE,
    BACKGROUND_FILE,
    CASES_DIR,
    GRAPH_CLASSES,
    GRAPH_DIR,
    UNANSWERABLE,
    Case,
    CaseGroup,
    CaseSet,
    bundled_root,
    load_case_set,
)
from tasks_lib.suites.retrieval.gates import GateResult, RetrievalGates, gate
from tasks_lib.suites.retrieval.graph import run_graph_calibration
from tasks_lib.suites.retrieval.indexing import (
    DEPTH,
    AdapterFactory,
    IndexedGroup,
    index_group,
    recall_keys,
)
from tasks_lib.suites.retrieval.policy import (
    POLICY_FILE,
    PolicyProbes,
    load_policy_probes,
    run_policy_probes,
)
from tasks_lib.suites.retrieval.ranking import (
    first_rank,
    hit_at,
    mean,
    ndcg_at,
    reciprocal_rank,
)
from tasks_lib.suites.retrieval.result import (
    CaseResult,
    Efficiency,
    QualityMetrics,
    RecalledText,
    RetrievalResult,
)
from tasks_lib.suites.retrieval.selector import POLICY_VERSION, select_automatic

SHOWN = 5
"""Recalled texts shown per case in the report."""


class Prices(ContractModel):
    """Prices used to turn the adapter's token counts into cost (0 for local models)."""

    embedding_usd_per_million_tokens: float = 0.0
    """Embedding price per million input tokens."""
    llm_usd_per_million_tokens: float = 0.0
    """Chat-model price per million tokens."""


def bundled_cases() -> tuple[CaseSet, CaseSet, PolicyProbes]:
    """The case set, graph calibration set and policy probes shipped in `corpora/retrieval`."""
    root = bundled_root()
    background = root / BACKGROUND_FILE
    return (
        load_case_set(root / CASES_DIR, background=background),
        load_case_set(root / GRAPH_DIR, GRAPH_CLASSES, background=background),
        load_policy_probes(root / POLICY_FILE),
    )


def config_digest(embedder: str, prices: Prices, graph: CaseSet | None, policy: PolicyProbes | None) -> str:
    """sha256 of everything besides the cases and the adapter that defines a run's numbers."""
    payload = {
        "depth": DEPTH,
        "embedder": embedder,
        "prices": prices.model_dump(mode="json"),
        "selector": POLICY_VERSION,
        "graph_cases": graph.digest if graph else None,
        "policy": hashlib.sha256(policy.model_dump_json().encode()).hexdigest() if policy else None,
    }
    return hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()


def _delta(after: Accounting, before: Accounting, field: str) -> int:
    return int(getattr(after, field)) - int(getattr(before, field))


def _percentile(values: list[float], share: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(share * len(ordered)) - 1))]


def _rate(flags: list[bool]) -> float | None:
    return mean([1.0 if f else 0.0 for f in flags])


Rankings = dict[str, tuple[list[str | None], tuple[str, ...]]]
"""Case id -> (recalled keys, relevant keys)."""


def _case_row(group: CaseGroup, case: Case, indexed: IndexedGroup, hits: list[MemoryHit], keys: list[str | None], picked: int | None) -> CaseResult:
    """Score one recalled list against the case's expectations."""
    answerable = case.case_class in ANSWERABLE
    rank = first_rank(keys, case.relevant) if answerable else None
    picked_key = keys[picked] if picked is not None else None
    if case.automatic == "inject":
        auto_ok: bool | None = picked_key in case.relevant
    elif case.automatic == "abstain":
        auto_ok = picked is None
    else:
        auto_ok = None
    top = [k for k in keys[:5] if k]
    return CaseResult(
        id=case.id, group=group.group, case_class=case.case_class, question=case.question,
        rank=rank, hit_at_5=(rank is not None and rank <= 5) if answerable else None,
        stale_in_top_5=any(k in case.stale for k in top),
        forbidden_in_top_5=any(h.id in indexed.foreign for h in hits[:5]) or any(k in case.forbidden for k in top),
        automatic=picked_key, automatic_expected=case.automatic, automatic_ok=auto_ok,
        top=tuple(RecalledText(key=k, text=h.text) for k, h in zip(keys[:SHOWN], hits[:SHOWN])),
    )


def _count_context(counts: dict[str, int], texts: list[str], picked: int | None) -> None:
    """Add the top 5's bytes and repeated texts, and the injected bytes, to `counts`."""
    if picked is not None:
        counts["automatic_bytes"] += len(texts[picked].encode())
    seen: set[str] = set()
    for text in texts[:5]:
        norm = " ".join(text.casefold().split())
        counts["context_bytes"] += len(text.encode())
        counts["top5_hits"] += 1
        counts["top5_duplicates"] += norm in seen
        seen.add(norm)


def _ask_cases(adapter: MemoryAdapter, cases: CaseSet) -> tuple[list[CaseResult], Rankings, dict[str, float], dict[str, int]]:
    """Index every group and ask its cases; return case rows, rankings, timings and byte/hit counts."""
    rows: list[CaseResult] = []
    rankings: Rankings = {}
    timing = {"index_ms": 0.0}
    counts: dict[str, int] = defaultdict(int)
    search_ms: list[float] = []
    for group in cases.groups:
        before = adapter.accounting().embedding_texts
        indexed = index_group(adapter, group, cases.background)
        counts["embedded_at_index"] += adapter.accounting().embedding_texts - before
        timing["index_ms"] += indexed.index_ms
        counts["stored"] += indexed.stored
        for case in group.cases:
            hits, keys, elapsed = recall_keys(adapter, indexed, case.question)
            search_ms.append(elapsed)
            texts = [h.text for h in hits]
            picked = select_automatic(case.question, texts)
            _count_context(counts, texts, picked)
            rows.append(_case_row(group, case, indexed, hits, keys, picked))
            rankings[case.id] = (keys, case.relevant)
    timing["search_mean"] = mean(search_ms) or 0.0
    timing["search_p95"] = _percentile(search_ms, 0.95)
    counts["queries"] = len(search_ms)
    return rows, rankings, timing, dict(counts)


def quality_of(rows: list[CaseResult], rankings: Rankings) -> QualityMetrics:
    """Quality metrics from the case rows and each answerable case's recalled keys."""
    answerable = [r for r in rows if r.case_class in ANSWERABLE]
    ranked = [rankings[r.id] for r in answerable]
    by_class: dict[str, list[CaseResult]] = defaultdict(list)
    for row in rows:
        by_class[row.case_class].append(row)
    cases_with_stale = [r for r in rows if r.case_class == "update"]

    def relevant_pick(row: CaseResult) -> bool:
        return row.automatic is not None and row.automatic in rankings[row.id][1]

    return QualityMetrics(
        recall_at_1=_rate([hit_at(k, rel, 1) for k, rel in ranked]),
        recall_at_5=_rate([hit_at(k, rel, 5) for k, rel in ranked]),
        recall_at_8=_rate([hit_at(k, rel, 8) for k, rel in ranked]),
        mrr=mean([reciprocal_rank(k, rel) for k, rel in ranked]),
        ndcg_at_8=mean([ndcg_at(k, rel, 8) for k, rel in ranked]),
        stale_recall=_rate([r.stale_in_top_5 for r in cases_with_stale]),
        false_recall=_rate([r.automatic is not None and not relevant_pick(r) for r in rows]),
        abstention={c: _rate([r.automatic is None for r in rs]) or 0.0 for c, rs in sorted(by_class.items())},
        unanswerable_abstention=_rate([r.automatic is None for r in rows if r.case_class in UNANSWERABLE]),
        direct_coverage=_rate([bool(r.automatic_ok) for r in rows if r.automatic_expected == "inject"]),
        automatic_coverage=_rate([relevant_pick(r) for r in answerable]),
        recall_at_5_by_class={
            c: _rate([bool(r.hit_at_5) for r in rs]) or 0.0 for c, rs in sorted(by_class.items()) if c in ANSWERABLE
        },
    )


def evaluate_gates(
    rows: list[CaseResult], quality: QualityMetrics, efficiency: Efficiency, policy_passed: list[bool],
    graph_gates: list[GateResult], gates: RetrievalGates,
) -> list[GateResult]:
    """Every gate of the fast suite (graph gates computed by the calibration are appended)."""
    direct = [r for r in rows if r.automatic_expected == "inject"]
    ambiguous = [r for r in rows if r.case_class == "ambiguous-binding"]
    abstain_rate = quality.abstention
    out = [
        gate("recall_at_5_min", quality.recall_at_5, gates.recall_at_5_min, ">="),
        gate("mrr_min", quality.mrr, gates.mrr_min, ">="),
        gate("direct_probes_min", float(len(direct)), gates.direct_probes_min, ">=", "canonical direct-fact probes present"),
        gate("direct_coverage_min", quality.direct_coverage, gates.direct_coverage_min, ">=", f"{sum(bool(r.automatic_ok) for r in direct)}/{len(direct)} injected a relevant memory"),
        gate("ambiguous_probes_min", float(len(ambiguous)), gates.ambiguous_probes_min, ">=", "ambiguous-binding probes present"),
        gate("ambiguous_abstention_min", abstain_rate.get("ambiguous-binding"), gates.ambiguous_abstention_min, ">="),
        gate("unanswerable_abstention_min", quality.unanswerable_abstention, gates.unanswerable_abstention_min, ">="),
        gate("missing_attribute_abstention_min", abstain_rate.get("missing-attribute"), gates.missing_attribute_abstention_min, ">="),
        gate("out_of_domain_abstention_min", abstain_rate.get("out-of-domain"), gates.out_of_domain_abstention_min, ">="),
        gate("stale_recall_max", quality.stale_recall, gates.stale_recall_max, "<="),
        gate("false_recall_max", quality.false_recall, gates.false_recall_max, "<="),
        gate("llm_calls_max", float(efficiency.llm_calls), gates.llm_calls_max, "<=", "from the adapter's accounting"),
        gate("policy_pass_min", _rate(policy_passed), gates.policy_pass_min, ">=", f"{sum(policy_passed)}/{len(policy_passed)} selector-policy probes pass"),
    ]
    return out + graph_gates


def run_retrieval_suite(
    adapter_factory: AdapterFactory,
    cases: CaseSet,
    gates: RetrievalGates | None = None,
    *,
    graph_cases: CaseSet | None = None,
    policy: PolicyProbes | None = None,
    adapter_name: str = "custom",
    embedder: str = "hashed",
    prices: Prices | None = None,
) -> RetrievalResult:
    """Run the fast suite (and, when the gates ask for it, the graph calibration) on fresh stores.

    `adapter_factory(folder)` must return a new adapter keeping its data under `folder`, a
    temporary folder this function creates and removes. Raises the adapter's errors and
    ContractError for an unusable case set.
    """
    gates = gates or RetrievalGates()
    prices = prices or Prices()
    with tempfile.TemporaryDirectory(prefix="memtrial-retrieval-") as scratch:
        adapter = adapter_factory(Path(scratch) / "suite")
        try:
            start = adapter.accounting()
            rows, rankings, timing, counts = _ask_cases(adapter, cases)
            end = adapter.accounting()
            index_texts = counts.get("stored", 0)
        finally:
            adapter.close()
        graph = None
        graph_gates: list[GateResult] = []
        if gates.graph_calibration:
            if graph_cases is None:
                graph_gates.append(gate("graph_calibration", None, 1, ">=", "no graph calibration cases were given"))
            else:
                graph, graph_gates = run_graph_calibration(adapter_factory, Path(scratch) / "graph", graph_cases, gates)
    quality = quality_of(rows, rankings)
    embedding_tokens = _delta(end, start, "embedding_tokens")
    llm_tokens = _delta(end, start, "llm_tokens")
    embedded_at_index = counts.get("embedded_at_index", 0)
    efficiency = Efficiency(
        memories_stored=index_texts,
        queries=counts.get("queries", 0),
        context_bytes_top_5=counts.get("context_bytes", 0),
        automatic_context_bytes=counts.get("automatic_bytes", 0),
        index_ms=round(timing["index_ms"], 3),
        search_ms_mean=round(timing["search_mean"], 3),
        search_ms_p95=round(timing["search_p95"], 3),
        storage_bytes=end.storage_bytes,
        embedding_calls=_delta(end, start, "embedding_calls"),
        embedding_texts=_delta(end, start, "embedding_texts"),
        embedding_tokens=embedding_tokens,
        embedding_cost_usd=embedding_tokens * prices.embedding_usd_per_million_tokens / 1e6,
        llm_calls=_delta(end, start, "llm_calls"),
        llm_tokens=llm_tokens,
        llm_cost_usd=llm_tokens * prices.llm_usd_per_million_tokens / 1e6,
        duplicate_ratio=(counts.get("top5_duplicates", 0) / counts["top5_hits"]) if counts.get("top5_hits") else None,
        vector_coverage=min(1.0, embedded_at_index / index_texts) if index_texts else None,
    )
    policy_rows = run_policy_probes(policy) if policy else ()
    all_gates = evaluate_gates(rows, quality, efficiency, [p.passed for p in policy_rows], graph_gates, gates)
    class_counts: dict[str, int] = defaultdict(int)
    for row in rows:
        class_counts[row.case_class] += 1
    return RetrievalResult(
        adapter=adapter_name, embedder=embedder, case_set_digest=cases.digest,
        config_digest=config_digest(embedder, prices, graph_cases if gates.graph_calibration else None, policy),
        groups=len(cases.groups), counts=dict(sorted(class_counts.items())), quality=quality, efficiency=efficiency,
        policy=policy_rows, graph=graph, gates=tuple(all_gates), passed=all(g.passed for g in all_gates),
        score=quality.recall_at_5 or 0.0, cases=tuple(rows),
    )
