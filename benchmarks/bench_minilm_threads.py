"""MiniLM single-query encode latency on 1 vs 2 torch threads, idle and beside one busy loop.

A recall encodes one query. torch's intra-op pool defaults to one thread per core; when other jobs
hold the cores, a two-thread encode waits for the slower of its two threads. This measures, in one
run and interleaved round by round so machine noise hits every cell alike:

- threads 1 and 2 (`torch.set_num_threads`, under the embedder's `_ENCODE_LOCK` as `embed` does);
- idle, then with one busy loop (a child process spinning, pinned to the last core when the
  machine allows) on the other core;
- `embed` as shipped (`MiniLMEmbedder.encode_threads`: one thread for a small encode), as a check.

Prints each cell's median, p95 and mean in milliseconds, the ratio of each cell to its row's
one-thread median, and the load average before and after.

    .venv/bin/python benchmarks/bench_minilm_threads.py [--rounds 20] [--queries 10]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time

QUERIES = [
    "What did Caroline research after the support group meeting?",
    "When did Melanie paint the sunrise over the lake?",
    "Which city does Jon want to open his dance studio in?",
    "What is my current commute time to work?",
    "How many bikes do I own now?",
    "What breed is the dog I adopted last spring?",
    "Who recommended the book about negotiation?",
    "What did I say about the Tokyo trip budget?",
    "When is the next dentist appointment?",
    "Which programming language did the team pick for the new service?",
]


def _spin() -> None:
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if len(cpus) > 1:
        os.sched_setaffinity(0, {cpus[-1]})
    while True:
        pass


def _percentile(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="rounds; each times every cell on every query once")
    parser.add_argument("--queries", type=int, default=len(QUERIES), help="queries per cell per round")
    args = parser.parse_args()

    import torch

    from tasks_lib.memory.embeddings import _ENCODE_LOCK, SMALL_ENCODE_TEXTS, MiniLMEmbedder

    load_before = os.getloadavg()
    embedder = MiniLMEmbedder()
    model = embedder._model
    queries = QUERIES[: args.queries]

    def encode_on(threads: int, query: str) -> None:
        with _ENCODE_LOCK:
            torch.set_num_threads(threads)
            model.encode([query], normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)

    cells = {"1 thread": lambda q: encode_on(1, q), "2 threads": lambda q: encode_on(2, q), "embed (shipped)": lambda q: embedder.embed([q])}
    times: dict[tuple[str, str], list[float]] = {(load, cell): [] for load in ("idle", "one busy loop") for cell in cells}
    for call in cells.values():  # warm-up
        for query in queries:
            call(query)
    for _ in range(args.rounds):
        for load in ("idle", "one busy loop"):
            busy = mp.get_context("fork").Process(target=_spin, daemon=True) if load != "idle" else None
            if busy is not None:
                busy.start()
                time.sleep(0.2)
            try:
                for cell, call in cells.items():
                    for query in queries:
                        started = time.perf_counter()
                        call(query)
                        times[(load, cell)].append(1000 * (time.perf_counter() - started))
            finally:
                if busy is not None:
                    busy.terminate()
                    busy.join()
    load_after = os.getloadavg()
    print(f"MiniLM single-query encode, {args.rounds} rounds x {len(queries)} queries per cell; cores {os.cpu_count()}, "
          f"batches use {MiniLMEmbedder.encode_threads(SMALL_ENCODE_TEXTS + 1)} thread(s), "
          f"embed uses {MiniLMEmbedder.encode_threads(1)} thread(s) for one query")
    print(f"load average before {load_before[0]:.2f} {load_before[1]:.2f} {load_before[2]:.2f}, "
          f"after {load_after[0]:.2f} {load_after[1]:.2f} {load_after[2]:.2f}")
    print(f"| load | {' | '.join(f'{c} median / p95 / mean (ms)' for c in cells)} | 2 threads / 1 thread (median) |")
    print(f"|---|{'---|' * len(cells)}---|")
    for load in ("idle", "one busy loop"):
        row = []
        for cell in cells:
            values = times[(load, cell)]
            row.append(f"{statistics.median(values):.1f} / {_percentile(values, 0.95):.1f} / {statistics.fmean(values):.1f}")
        ratio = statistics.median(times[(load, "2 threads")]) / statistics.median(times[(load, "1 thread")])
        print(f"| {load} | {' | '.join(row)} | {ratio:.2f}x |")


if __name__ == "__main__":
    main()
