"""`memtrial suite recall`: plant, bury, probe; recall, staleness, false recall and abstention per length."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from flows.cli.common import DEFAULT_EMBEDDER, JsonFlag, emit_json, err, out
from flows.cli.options import BudgetOpt, CurveOpt, EmbedderOpt, LengthsOpt, MemoryOpt, TrendRootOpt
from tasks_lib.errors import MemtrialError


def _lengths(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise MemtrialError(f"--lengths {text!r}: give comma-separated whole numbers of turns, e.g. 10,40,100,250") from None
    if not values:
        raise MemtrialError("--lengths is empty; give comma-separated whole numbers of turns, e.g. 10,40,100,250")
    return values


TABLE_METRICS = ("recall", "retrieval_recall", "availability", "staleness", "retrieval_staleness", "miss", "false_recall",
                 "retrieval_false_recall", "abstention")
"""Columns of the table: each metric at the answer level, then at the retrieval level (recall also its availability)."""


def _cell(rate: object) -> str:
    if rate is None:
        return "-"
    k, n, value, lower, upper = (getattr(rate, f) for f in ("k", "n", "rate", "lower", "upper"))
    if value is None:
        return "n/a (0 cases)"
    return f"{value:.2f} ({k}/{n}) [{lower:.2f}, {upper:.2f}]"


def recall(
    sweep: Annotated[bool, typer.Option("--sweep", help="Run every length of --lengths and report the curve and its knee.")] = False,
    lengths: LengthsOpt = "10,40,100,250",
    length: Annotated[int, typer.Option(help="The single burial length when --sweep is not given.")] = 40,
    seed: Annotated[int, typer.Option(help="Chooses phrasings and filler order; same seed, same numbers.")] = 0,
    memory: MemoryOpt = "reference",
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    policy: Annotated[str, typer.Option(help="Retention policy: window (last --window turns) or summary (window + rolling extractive summary).")] = "window",
    window: Annotated[int, typer.Option(help="Turns the retention policy keeps verbatim.")] = 20,
    summary_sentences: Annotated[int, typer.Option(help="Sentences the summary policy keeps of older turns.")] = 8,
    recall_k: Annotated[int, typer.Option(help="Memories recalled per probe.")] = 5,
    abstain_below: Annotated[float | None, typer.Option(help="The memory's abstention threshold: a first recalled memory scoring below it is no answer (default: the system never abstains).")] = None,
    cases: Annotated[Path | None, typer.Option(help="Folder with cases.json and filler.json (default: the bundled corpora/recall).")] = None,
    filler_dataset: Annotated[Path | None, typer.Option(help="A LoCoMo JSON file (locomo10.json) to draw filler turns from.")] = None,
    base_url: Annotated[str | None, typer.Option(help="OpenAI-compatible endpoint (ending before /chat/completions) to answer with a model.")] = None,
    model: Annotated[str | None, typer.Option(help="Model name for --base-url; without both, the offline reader answers with the memory's first recalled memory.")] = None,
    samples: Annotated[int, typer.Option(help="Model answers per question; the majority verdict counts.")] = 1,
    temperature: Annotated[float, typer.Option(help="Model sampling temperature (0 for one deterministic answer; above 0 needs --samples 3 or more).")] = 0.0,
    budget: BudgetOpt = None,
    knee_drop: Annotated[float, typer.Option(help="Recall drop in points below the shortest length that marks the knee.")] = 20.0,
    min_score: Annotated[float | None, typer.Option(help="Gate: exit 1 if recall at any length is below this (0..1).")] = None,
    max_staleness: Annotated[float | None, typer.Option(help="Gate: exit 1 if staleness at any length is above this (0..1).")] = None,
    max_false_recall: Annotated[float | None, typer.Option(help="Gate: exit 1 if false recall at any length is above this (0..1).")] = None,
    artifacts: TrendRootOpt = None,
    curve: CurveOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """Plant facts, bury them under real dialogue, probe; print recall, staleness, false recall and
    abstention per length (never one blended score), each also read off the memory's ranking, with
    95% Wilson intervals and the knee. The offline reader reads its window and its recalled memories.
    Embeds with the nightly default's embedder unless --embedder says otherwise.
    A memory-backed --sweep stores about 10,000 turns: with minilm 5 to 12 minutes on a loaded 2-core machine
    (every distinct text encoded once), with --embedder hashed half a minute to two minutes."""
    from pydantic import ValidationError

    from tasks_lib.suites.recall import ModelConfig, SweepConfig, gate_failures, run_sweep

    if (base_url is None) != (model is None):
        raise MemtrialError("--base-url and --model go together; give both to ask a model, or neither for the offline reader")
    try:
        config = SweepConfig(
            lengths=_lengths(lengths) if sweep else (length,), seed=seed, memory=memory, embedder=embedder,
            policy=policy, window=window, summary_sentences=summary_sentences, recall_k=recall_k,  # type: ignore[arg-type]
            abstain_below=abstain_below,
            knee_drop_points=knee_drop, cases_dir=str(cases) if cases else None,
            filler_dataset=str(filler_dataset) if filler_dataset else None,
            model=ModelConfig(base_url=base_url, model=model, samples=samples, temperature=temperature,
                              budget_config=str(budget) if budget else None) if base_url and model else None,
        )
    except ValidationError as error:
        first = error.errors()[0]
        field = ".".join(str(p) for p in first["loc"])
        option = {"knee_drop_points": "knee_drop", "": "temperature", "model": "temperature", "budget_config": "budget"}.get(field.split(".")[-1], field.split(".")[-1])
        raise MemtrialError(f"--{option.replace('_', '-')}: {first['msg'].removeprefix('Value error, ')}") from None
    for name, bar in (("--min-score", min_score), ("--max-staleness", max_staleness), ("--max-false-recall", max_false_recall)):
        if bar is not None and not 0.0 <= bar <= 1.0:
            raise MemtrialError(f"{name} {bar}: give a rate between 0 and 1")
    try:
        result = run_sweep(config)
    except ValueError as error:
        raise MemtrialError(str(error)) from None
    failures = gate_failures(result, min_recall=min_score, max_staleness=max_staleness, max_false_recall=max_false_recall)
    trend = None
    if artifacts:
        from flows.runtime.settings import build_under_test
        from tasks_lib.analysis.trend import append_snapshot, now
        from tasks_lib.artifacts import open_store
        from tasks_lib.suites.recall.snapshot import recall_snapshot

        key = append_snapshot(open_store(artifacts), recall_snapshot(result, build_under_test(), now()), curve)
        trend = f"{artifacts.rstrip('/')}/{key}"
    if as_json:
        emit_json({**result.model_dump(mode="json"), "gate_failures": failures, "trend": trend})
    else:
        table = Table(title=f"recall suite: memory {memory}, embedder {config.embedder}, policy {policy}, seed {seed} ({result.filler} filler)")
        for column in ("length", *(name.replace("_", " ") for name in TABLE_METRICS)):
            table.add_column(column)
        for n, metrics in sorted(result.metrics_by_length.items()):
            table.add_row(str(n), *(_cell(getattr(metrics, m)) for m in TABLE_METRICS))
        out.print(table)
        out.print("answer level: what the reader asserted, reading its window and its recalled memories; retrieval level: the "
                  f"memory's ranking alone (recall = the fact in the top {config.recall_k}, staleness = the old value above its "
                  "correction, false recall = a hit at or above the abstention threshold); availability: the fact still in the "
                  f"window or in the memory's top {config.recall_k}")
        for label, knee in (("knee", result.knee), ("retrieval knee", result.retrieval_knee)):
            if knee is not None:
                out.print(f"{label}: between {knee.previous} and {knee.length} turns (recall {knee.baseline_recall:.2f} -> {knee.recall:.2f}, "
                          f"a drop of {knee.drop_points:.1f} points > {knee.threshold_points:g})")
            elif len(result.metrics_by_length) > 1:
                out.print(f"{label}: none (recall never drops more than {config.knee_drop_points:g} points below the shortest length)")
        for key, count in sorted(result.filler_dropped.items()):
            out.print(f"filler skipped: {count} ({key})")
        if trend:
            out.print(f"trend snapshot: {trend}")
        for failure in failures:
            err.print(f"gate: {failure}")
    if failures:
        raise typer.Exit(1)
