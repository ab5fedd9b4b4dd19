"""Retrieval recall of the reference memory store on LoCoMo (and the LongMemEval sample), no LLM.

    .venv/bin/python benchmarks/bench_locomo.py [--embedder hashed|minilm] [--json] [--data DIR]
    .venv/bin/python benchmarks/bench_locomo.py --full   # all 1,986 questions, wall time and peak RSS only

One store file per LoCoMo conversation; questions of categories 1-4 with parseable evidence
(1,536). Scores, over the top-k recalled turns (k = 1, 3, 5, 10):
- turn recall_any@k: any recalled turn is an evidence `dia_id`;
- session recall_any@k: any recalled turn belongs to a session that holds an evidence turn;
- distinct-session recall_any@k: the turn ranking read as a session ranking (a session at its
  best turn's rank), any of the first k sessions holds evidence (LongMemEval's reading).
Conversations at even positions of the file (conv-26, -41, -43, -47, -49) were used while
developing; the odd ones (conv-30, -42, -44, -48, -50) are held out. Evidence cleaning rules
and their counts: see tasks_lib.suites.public.locomo. A plain FTS5 BM25 baseline runs in the
same process. Index time covers remember calls only (the MiniLM model load is timed apart);
latency is per recall call; peak RSS is the process's maximum resident set. The reference
store's wall time is printed beside the FTS5 baseline's, measured in the same process, because
this shared machine's load moves absolute seconds.

`--full` does nothing else in its process: one store per conversation, every turn indexed and
all 1,986 questions recalled (category 5 and questions without usable evidence included; the
1,536 scorable ones are scored), and reports the wall time, the process's CPU time (the work
is single-threaded, so on an idle machine wall is about CPU; on a loaded one CPU time is the
steadier figure) and its peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

from tasks_lib.memory.adapter import MemoryItem
from tasks_lib.memory.embeddings import get_embedder
from tasks_lib.memory.reference.store import SqliteMemoryStore
from tasks_lib.suites.public.bench import (
    KS,
    SystemRun,
    load_locomo,
    load_longmemeval,
    run_fts_baseline,
    run_store,
)
from tasks_lib.suites.public.locomo import CATEGORY_NAMES, DEFAULT_CATEGORIES

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
LONGMEMEVAL_FILES = (
    "longmemeval_oracle_sample_seed_42.json",
    "longmemeval_example.json",
    "longmemeval_example2.json",
    "longmemeval_sample.json",
)


def _summary(run: SystemRun, halves: dict[str, set[str]], categories: list[str]) -> dict[str, object]:
    def block(keep) -> dict[str, object]:  # type: ignore[no-untyped-def]
        rows = [r for r in run.results if keep(r)]
        return {
            "questions": len(rows),
            **{f"{kind}@{k}": round(run.recall(kind, k, keep), 4) for kind in ("turn", "session", "distinct_session") for k in KS},
        }

    return {
        "system": run.name,
        "overall": block(lambda r: True),
        **{half: block(lambda r, ids=ids: r.conv_id in ids) for half, ids in halves.items()},
        "categories": {c: block(lambda r, c=c: r.category == c) for c in categories},
        "index_seconds": round(run.index_seconds, 2),
        "query_p50_ms": round(run.latency_ms(0.5), 2),
        "query_p95_ms": round(run.latency_ms(0.95), 2),
        "storage_bytes": run.storage_bytes,
    }


def _table(title: str, summaries: list[dict[str, object]], rows: list[str]) -> str:
    lines = [f"## {title}", "", "| system | slice | n | turn@1 | turn@3 | turn@5 | turn@10 | session@5 | distinct-session@5 |", "|---|---|---|---|---|---|---|---|---|"]
    for s in summaries:
        for row in rows:
            b = s[row] if row in s else s["categories"][row]  # type: ignore[index]
            lines.append(
                f"| {s['system']} | {row} | {b['questions']} | {b['turn@1']:.3f} | {b['turn@3']:.3f} | {b['turn@5']:.3f} | {b['turn@10']:.3f} "
                f"| {b['session@5']:.3f} | {b['distinct_session@5']:.3f} |"
            )
    lines += ["", "| system | index s | p50 ms | p95 ms | storage bytes |", "|---|---|---|---|---|"]
    lines += [f"| {s['system']} | {s['index_seconds']} | {s['query_p50_ms']} | {s['query_p95_ms']} | {s['storage_bytes']:,} |" for s in summaries]
    return "\n".join(lines)


def full_evaluation(path: Path, embedder: str) -> dict[str, object]:
    """Index every LoCoMo conversation in its own store and recall all of its questions; time and memory."""
    from tasks_lib.suites.public.locomo import load_locomo as load_groups
    from tasks_lib.suites.public.metrics import session_of_top_turns

    wall, cpu = time.perf_counter(), time.process_time()
    raw = {r["sample_id"]: r["qa"] for r in json.loads(path.read_text(encoding="utf-8"))}
    groups, _ = load_groups(path)
    index_s, latencies, turn5, session5, storage, asked = 0.0, [], [], [], 0, 0
    with tempfile.TemporaryDirectory(prefix="bench-locomo-full-") as tmp:
        for group in groups:
            store = SqliteMemoryStore(Path(tmp) / f"{group.group_id}.sqlite", embedder)
            realm = "bench:" + group.group_id.lower()
            store.create_realm(realm)
            turn_of: dict[str, str] = {}
            started = time.perf_counter()
            for session in dict.fromkeys(t.session for t in group.turns):
                batch = [t for t in group.turns if t.session == session]
                ids = store.remember(realm, [MemoryItem(text=t.text, speaker=t.speaker, timestamp=t.timestamp, session=t.session) for t in batch])
                turn_of.update(zip(ids, (t.turn_id for t in batch)))
            index_s += time.perf_counter() - started
            scored = {q.question_id: q for q in group.questions}
            session_of = {t.turn_id: t.session for t in group.turns}
            for index, qa in enumerate(raw[group.group_id]):
                started = time.perf_counter()
                hits = store.recall(realm, qa["question"], max(KS))
                latencies.append(time.perf_counter() - started)
                asked += 1
                question = scored.get(f"{group.group_id}/q{index}")
                if question is not None:
                    ranked = [turn_of[h.id] for h in hits]
                    turn5.append(any(t in question.relevant_turns for t in ranked[:5]))
                    session5.append(session_of_top_turns(ranked, question.relevant_turns, session_of, 5)[0])
            storage += store.accounting().storage_bytes
            store.close()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    return {
        "questions_recalled": asked,
        "questions_scored": len(turn5),
        "turn_recall_any@5": round(sum(turn5) / len(turn5), 4),
        "session_of_top_turns_recall_any@5": round(sum(session5) / len(session5), 4),
        "index_seconds": round(index_s, 2),
        "query_p50_ms": round(1000 * cuts[49], 2),
        "query_p95_ms": round(1000 * cuts[94], 2),
        "storage_bytes": storage,
        "wall_seconds": round(time.perf_counter() - wall, 2),
        "cpu_seconds": round(time.process_time() - cpu, 2),
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "load_average_1min": round(os.getloadavg()[0], 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--embedder", default="hashed", choices=["hashed", "minilm"], help="semantic lane embedder")
    parser.add_argument("--json", action="store_true", help="print one JSON report instead of tables")
    parser.add_argument("--data", type=Path, default=DATA, help="folder holding locomo/ and longmemeval/")
    parser.add_argument("--skip-longmemeval", action="store_true", help="LoCoMo only")
    parser.add_argument("--full", action="store_true", help="only the full evaluation: every conversation, all 1,986 questions")
    args = parser.parse_args(argv)
    if args.full:
        print(json.dumps({"embedder": args.embedder, **full_evaluation(args.data / "locomo" / "locomo10.json", args.embedder)}, indent=2))
        return 0
    wall = time.perf_counter()
    started = time.perf_counter()
    embedder = get_embedder(args.embedder)
    load_seconds = time.perf_counter() - started

    convs, counts = load_locomo(args.data / "locomo" / "locomo10.json")
    halves = {"dev": {c.conv_id for c in convs if c.position % 2 == 0}, "held-out": {c.conv_id for c in convs if c.position % 2 == 1}}
    report: dict[str, object] = {"embedder": args.embedder, "embedder_load_seconds": round(load_seconds, 2), "evidence": asdict(counts)}
    with tempfile.TemporaryDirectory(prefix="bench-locomo-") as tmp:
        started = time.perf_counter()
        ours = run_store(convs, Path(tmp), embedder)  # type: ignore[arg-type]
        report["memtrial_locomo_wall_seconds"] = round(time.perf_counter() - started, 2)
        started = time.perf_counter()
        base = run_fts_baseline(convs)
        report["fts5_locomo_wall_seconds"] = round(time.perf_counter() - started, 2)
        cats = [CATEGORY_NAMES[c] for c in DEFAULT_CATEGORIES]
        report["locomo"] = [_summary(r, halves, cats) for r in (ours, base)]
        if not args.skip_longmemeval:
            files = [args.data / "longmemeval" / f for f in LONGMEMEVAL_FILES if (args.data / "longmemeval" / f).is_file()]
            records = load_longmemeval(files)
            lme = run_store(records, Path(tmp), embedder, name="memtrial-lme")  # type: ignore[arg-type]
            lme_base = run_fts_baseline(records)
            types = sorted({q.category for c in records for q in c.questions})
            report["longmemeval"] = [_summary(r, {}, types) for r in (lme, lme_base)]
    report["wall_seconds"] = round(time.perf_counter() - wall, 2)
    report["peak_rss_mib"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"embedder={args.embedder} (load {load_seconds:.1f} s)  wall {report['wall_seconds']} s  peak RSS {report['peak_rss_mib']} MiB  load average {os.getloadavg()[0]:.1f}")
    print(f"LoCoMo wall: memtrial {report['memtrial_locomo_wall_seconds']} s, FTS5 baseline {report['fts5_locomo_wall_seconds']} s (same process)")
    print("evidence cleaning:", ", ".join(f"{k}={v}" for k, v in asdict(counts).items()))
    print()
    print(_table("LoCoMo (categories 1-4)", report["locomo"], ["overall", "dev", "held-out", *cats]))  # type: ignore[arg-type]
    if "longmemeval" in report:
        print()
        print(_table("LongMemEval oracle sample (non-abstention)", report["longmemeval"], ["overall", *types]))  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
