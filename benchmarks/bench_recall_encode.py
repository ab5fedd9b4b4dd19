"""The recall sweep with MiniLM: every realm re-encoding its turns vs each distinct text encoded once.

The sweep plants every case in a fresh realm per length, so the same filler turns (and the same
"previous turn" contexts the reference store embeds with them) are planted again and again. Each
`remember` is already one batch; `MiniLMEmbedder.embed` now also keeps the vectors of texts it has
encoded (`ENCODE_CACHE_TEXTS`) and encodes only unseen ones. This runs, in one process:

- floor: the same sweep with the `hashed` embedder (no model), the fixed cost of stores and reader;
- before: MiniLM with the cache off (`ENCODE_CACHE_TEXTS = 0`), every planted turn encoded;
- after: MiniLM with the cache on (emptied first), each distinct text encoded once.

Prints wall seconds, texts sent to the model, each run's ratio to the floor and after/before, the
load average before and after, and checks that before and after give the same verdicts and ranks (scores may differ in the
last float digits: a text's vector depends slightly on the batch it was padded in).

    .venv/bin/python benchmarks/bench_recall_encode.py [--cases 8] [--lengths 10,40,100]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", type=int, default=8, help="first N bundled cases (all kinds appear in order, so keep N >= 1)")
    parser.add_argument("--lengths", default="10,40,100", help="burial lengths of the sweep")
    args = parser.parse_args()

    from tasks_lib.memory import embeddings
    from tasks_lib.suites.recall import SweepConfig, run_sweep
    from tasks_lib.suites.recall.cases import CASES_FILE, FILLER_FILE
    from tasks_lib.suites.recall.sweep import BUNDLED_CASES

    lengths = tuple(int(n) for n in args.lengths.split(","))
    model = embeddings.get_embedder("minilm")._model  # type: ignore[attr-defined]
    model.encode(["warm up"])
    encode = model.encode
    sent = {"texts": 0}

    def counting(texts: list[str], **kwargs: object) -> object:
        sent["texts"] += len(texts)
        return encode(texts, **kwargs)

    model.encode = counting
    with tempfile.TemporaryDirectory() as folder:
        corpus = Path(folder)
        cases = json.loads((BUNDLED_CASES / CASES_FILE).read_text(encoding="utf-8"))
        picked = [c for c in cases["cases"] if c["kind"] == "recall"][: args.cases // 2] + \
                 [c for c in cases["cases"] if c["kind"] != "recall"][: args.cases - args.cases // 2]
        (corpus / CASES_FILE).write_text(json.dumps({**cases, "cases": picked}), encoding="utf-8")
        (corpus / FILLER_FILE).write_bytes((BUNDLED_CASES / FILLER_FILE).read_bytes())
        load_before = os.getloadavg()
        rows = {}
        for label, embedder, cache in (("floor (hashed)", "hashed", None), ("before: MiniLM, no cache", "minilm", 0),
                                       ("after: MiniLM, each text once", "minilm", embeddings.ENCODE_CACHE_TEXTS)):
            if cache is not None:
                embeddings.ENCODE_CACHE_TEXTS = cache
                embeddings._VECTORS.clear()
            sent["texts"] = 0
            started = time.perf_counter()
            result = run_sweep(SweepConfig(lengths=lengths, embedder=embedder, cases_dir=str(corpus)))
            rows[label] = (time.perf_counter() - started, sent["texts"], result)
        load_after = os.getloadavg()
    floor = rows["floor (hashed)"][0]
    before, after = rows["before: MiniLM, no cache"], rows["after: MiniLM, each text once"]
    def decided(result: object) -> list[tuple[object, ...]]:
        return [(o.case_id, o.length, o.verdict, o.fact_rank, o.stale_rank) for o in result.outcomes]  # type: ignore[attr-defined]

    same = decided(before[2]) == decided(after[2])
    drift = max((abs(a.top_score - b.top_score) for a, b in zip(before[2].outcomes, after[2].outcomes)
                 if a.top_score is not None and b.top_score is not None), default=0.0)
    print(f"recall sweep, {len(picked)} cases, lengths {args.lengths}, reference store; cores {os.cpu_count()}")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print("| run | wall (s) | texts encoded | / floor |")
    print("|---|---|---|---|")
    for label, (seconds, texts, _) in rows.items():
        print(f"| {label} | {seconds:.1f} | {texts} | {seconds / floor:.1f}x |")
    print(f"after / before: {after[0] / before[0]:.2f}x wall, {after[1]} / {before[1]} texts; "
          f"same verdicts and ranks: {same}; largest top-score difference {drift:.2e} (batch composition)")


if __name__ == "__main__":
    main()
