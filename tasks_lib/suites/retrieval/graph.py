"""The one-hop graph calibration: the same retrieval with the graph lane off and on.

Every group of the calibration set is stored once; each case is recalled twice, with every lane
of the adapter except `graph`, then with all of them. Multi-hop cases name an entity whose answer
sits one shared entity away; direct cases must not suffer; adversarial cases name memories that
expansion must never pull into the top 5 (two hops away, superseded, or in another realm).

A leak is a forbidden memory in the top 5 with the graph lane on that was not there without it
(what expansion added), any memory of another realm, or one id listed twice.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from tasks_lib.suites.retrieval.cases import CaseSet
from tasks_lib.suites.retrieval.gates import GateResult, RetrievalGates, gate
from tasks_lib.suites.retrieval.indexing import AdapterFactory, index_group, recall_keys
from tasks_lib.suites.retrieval.ranking import first_rank, mean
from tasks_lib.suites.retrieval.result import GraphCalibration, GraphCaseResult, RecalledText

GRAPH_LANE = "graph"


def _recall_at_5(ranks: list[int | None]) -> float | None:
    return mean([1.0 if r is not None and r <= 5 else 0.0 for r in ranks])


def run_graph_calibration(
    adapter_factory: AdapterFactory, folder: Path, cases: CaseSet, gates: RetrievalGates
) -> tuple[GraphCalibration | None, list[GateResult]]:
    """Run the calibration in a fresh adapter under `folder`; return its report and its gates."""
    adapter = adapter_factory(folder)
    try:
        lanes_on = tuple(adapter.LANES)
        if GRAPH_LANE not in lanes_on:
            why = f"the adapter has no {GRAPH_LANE!r} lane (lanes: {', '.join(lanes_on) or 'none'}); disable graph_calibration in the gates file"
            return None, [gate("graph_calibration", None, 1, ">=", why)]
        lanes_off = tuple(lane for lane in lanes_on if lane != GRAPH_LANE)
        rows: list[GraphCaseResult] = []
        before = adapter.accounting()
        searches = 0
        search_embedding_calls = 0
        for group in cases.groups:
            indexed = index_group(adapter, group, cases.background)
            searching = adapter.accounting()
            for case in group.cases:
                _, keys_off, _ = recall_keys(adapter, indexed, case.question, lanes_off)
                hits_on, keys_on, _ = recall_keys(adapter, indexed, case.question, lanes_on)
                searches += 2
                top_ids = [h.id for h in hits_on[:5]]
                found = [k for k in keys_on[:5] if k is not None and k in case.forbidden and k not in keys_off[:5]]
                found += [indexed.key_of[i] for i in top_ids if i in indexed.foreign]
                found += [f"duplicate:{i}" for n, i in enumerate(top_ids) if i in top_ids[:n]]
                rows.append(GraphCaseResult(
                    id=case.id, case_class=case.case_class, question=case.question,
                    rank_off=first_rank(keys_off, case.relevant) if case.relevant else None,
                    rank_on=first_rank(keys_on, case.relevant) if case.relevant else None,
                    leaks=tuple(dict.fromkeys(found)),
                    top_on=tuple(RecalledText(key=k, text=h.text) for k, h in zip(keys_on[:5], hits_on[:5])),
                ))
            search_embedding_calls += adapter.accounting().embedding_calls - searching.embedding_calls
        after = adapter.accounting()
    finally:
        adapter.close()
    by_class: dict[str, list[GraphCaseResult]] = defaultdict(list)
    for row in rows:
        by_class[row.case_class].append(row)
    answerable = by_class["direct"] + by_class["multi-hop"]
    off = {
        "direct": _recall_at_5([r.rank_off for r in by_class["direct"]]),
        "multi-hop": _recall_at_5([r.rank_off for r in by_class["multi-hop"]]),
        "overall": _recall_at_5([r.rank_off for r in answerable]),
    }
    on = {
        "direct": _recall_at_5([r.rank_on for r in by_class["direct"]]),
        "multi-hop": _recall_at_5([r.rank_on for r in by_class["multi-hop"]]),
        "overall": _recall_at_5([r.rank_on for r in answerable]),
    }
    leaks = sum(len(r.leaks) for r in rows)
    required_misses = sum(
        1 for r in by_class["direct"] if r.rank_off is not None and r.rank_off <= 5 and not (r.rank_on is not None and r.rank_on <= 5)
    )
    report = GraphCalibration(
        lanes_off=lanes_off, lanes_on=lanes_on,
        counts={c: len(rs) for c, rs in sorted(by_class.items())},
        recall_at_5_off=off, recall_at_5_on=on, leaks=leaks, required_misses=required_misses,
        embedding_calls_per_query=search_embedding_calls / searches if searches else None,
        llm_calls=after.llm_calls - before.llm_calls,
        cases=tuple(rows),
    )
    gain = None if on["multi-hop"] is None or off["multi-hop"] is None else on["multi-hop"] - off["multi-hop"]
    drop_direct = None if on["direct"] is None or off["direct"] is None else off["direct"] - on["direct"]
    drop_overall = None if on["overall"] is None or off["overall"] is None else off["overall"] - on["overall"]
    results = [
        gate("graph_multi_hop_cases_min", float(len(by_class["multi-hop"])), gates.graph_multi_hop_cases_min, ">="),
        gate("graph_direct_cases_min", float(len(by_class["direct"])), gates.graph_direct_cases_min, ">="),
        gate("graph_multi_hop_gain_min", gain, gates.graph_multi_hop_gain_min, ">=",
             f"multi-hop Recall@5 {_pct(off['multi-hop'])} off -> {_pct(on['multi-hop'])} on"),
        gate("graph_direct_recall_min", on["direct"], gates.graph_direct_recall_min, ">=", "direct Recall@5 with graph on"),
        gate("graph_direct_regression_max", drop_direct, gates.graph_regression_max, "<=", f"{required_misses} required misses"),
        gate("graph_overall_regression_max", drop_overall, gates.graph_regression_max, "<="),
        gate("graph_leaks_max", float(leaks) if by_class["adversarial"] else None, gates.graph_leaks_max, "<=",
             f"{len(by_class['adversarial'])} adversarial probes"),
        gate("graph_llm_calls_max", float(report.llm_calls), gates.llm_calls_max, "<="),
    ]
    return report, results


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:.0f}%"
