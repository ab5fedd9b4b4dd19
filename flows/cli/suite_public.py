"""`memtrial suite longmemeval` and `memtrial suite locomo`: retrieval on public conversational data.

A thin edge over `tasks_lib.suites.public`: each command builds a memory-system factory from the
registry, runs the library entry point (one disposable store per evaluation group) and prints
per-metric tables, each titled with whether its level is official, or the same numbers as JSON
with `--json`; `--rankings FILE` also writes every question's ranking as Parquet.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from flows.cli.common import DEFAULT_EMBEDDER, JsonFlag, emit_json, out
from flows.cli.options import EmbedderOpt, LimitOpt, MemoryOpt
from tasks_lib.errors import MemtrialError

if TYPE_CHECKING:
    from tasks_lib.suites.public.rankings import RankingRow
    from tasks_lib.suites.public.result import PublicResult

KOpt = Annotated[list[int] | None, typer.Option("--k", help="Cut-off k (repeatable; default 1, 3, 5, 10).")]
RankingsOpt = Annotated[
    Path | None, typer.Option("--rankings", help="Also write every question's ranking (question id, rank, turn, session, score) to this Parquet file.")
]
DepthOpt = Annotated[int, typer.Option("--depth", min=1, max=100, help="Hits asked of each recall (>= max k; more lets session-level k grow as upstream's does).")]


def _ks(values: list[int] | None) -> tuple[int, ...]:
    ks = tuple(sorted(set(values or (1, 3, 5, 10))))
    if ks[0] < 1 or ks[-1] > 100:
        raise MemtrialError(f"--k: {', '.join(map(str, ks))} given; give cut-offs between 1 and 100")
    return ks


def _check_file(path: Path) -> None:
    if not path.is_file():
        raise MemtrialError(f"--dataset: {path} is not a file; give the dataset's JSON file")


def _tables(result: PublicResult) -> None:
    for level in result.levels:
        metrics = [m for m in ("recall_any", "recall_all", "ndcg") if any(v.level == level.level and v.metric == m for v in result.overall().scores)]
        if not metrics:
            continue
        kind = "official" if level.official else "not official"
        table = Table(title=f"{result.dataset} / {result.memory} (embedder {result.embedder}): {level.level} level ({kind})", caption=level.definition)
        for column in ("slice", "n", "metric", *(f"@{k}" for k in result.ks)):
            table.add_column(column, justify="left" if column in ("slice", "metric") else "right")
        for s in result.slices:
            for m in metrics:
                table.add_row(s.name, str(s.questions), m, *(f"{s.get(level.level, m, k):.3f}" for k in result.ks))
        out.print(table)
    for note in result.notes:
        out.print(f"note: {note}")
    fired = [q for q in result.quirks if q.count]
    out.print("quirk rules: " + (", ".join(f"{q.rule}={q.count}" for q in fired) if fired else "none fired"))
    out.print(
        f"groups {result.groups}, questions {result.questions}, index {result.index_seconds:.2f} s, "
        f"recall p50 {result.query_p50_ms:.1f} ms / p95 {result.query_p95_ms:.1f} ms, storage {result.storage_bytes:,} bytes, "
        f"embedding calls {result.embedding_calls}, LLM calls {result.llm_calls}, short rankings {result.short_rankings}, "
        f"wall {result.wall_seconds:.1f} s (CPU {result.cpu_seconds:.1f} s), peak RSS {result.peak_rss_mib} MiB"
    )


def _check_rankings(path: Path | None) -> None:
    if path is not None and not path.parent.is_dir():
        raise MemtrialError(f"--rankings: {path.parent} is not a folder; give a file path in an existing folder")


def _write_rankings(path: Path | None, rows: list[RankingRow]) -> None:
    if path is not None:
        from tasks_lib.suites.public.rankings import rankings_parquet

        try:
            path.write_bytes(rankings_parquet(rows))
        except OSError as error:
            raise MemtrialError(f"--rankings: cannot write {path} ({error.strerror}); give a writable file path") from None


def _emit(result: PublicResult, as_json: bool, embedder: str) -> None:
    result = result.model_copy(update={"embedder": embedder})
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        _tables(result)
    if result.questions == 0:
        why = result.notes[0] if result.notes else "no question could be scored"
        raise MemtrialError(f"{', '.join(result.dataset_files)}: {why}; see the quirk counts (--json)")


def locomo(
    dataset: Annotated[Path, typer.Option("--dataset", help="LoCoMo's locomo10.json.")],
    memory: MemoryOpt = "reference",
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    k: KOpt = None,
    limit: LimitOpt = None,
    depth: DepthOpt = 50,
    rankings: RankingsOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """LoCoMo retrieval: one store per conversation, categories 1-4, turn- and session-level recall and nDCG.
    Embeds with the nightly default's embedder unless --embedder says otherwise."""
    from tasks_lib.suites.public.runner import registry_factory, run_locomo

    _check_file(dataset)
    _check_rankings(rankings)
    rows: list[RankingRow] = []
    result = run_locomo(dataset, registry_factory(memory, embedder), _ks(k), memory=memory, limit=limit, depth=depth, rankings=rows)
    _write_rankings(rankings, rows)
    _emit(result, as_json, embedder)


def longmemeval(
    dataset: Annotated[list[Path], typer.Option("--dataset", help="A LongMemEval JSON file (repeatable; a repeated question_id is counted and skipped).")],
    memory: MemoryOpt = "reference",
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    k: KOpt = None,
    limit: LimitOpt = None,
    depth: DepthOpt = 50,
    roles: Annotated[str, typer.Option("--roles", help="Turn roles to index: user (upstream's setting) or user,assistant.")] = "user",
    rankings: RankingsOpt = None,
    as_json: JsonFlag = False,
) -> None:
    """LongMemEval retrieval: one store per record, abstention skipped, turn- and session-level recall and nDCG.
    Embeds with the nightly default's embedder unless --embedder says otherwise."""
    from tasks_lib.suites.public.runner import registry_factory, run_longmemeval

    for path in dataset:
        _check_file(path)
    _check_rankings(rankings)
    chosen = tuple(r.strip() for r in roles.split(",") if r.strip())
    rows: list[RankingRow] = []
    result = run_longmemeval(dataset, registry_factory(memory, embedder), _ks(k), memory=memory, limit=limit, roles=chosen, depth=depth, rankings=rows)
    _write_rankings(rankings, rows)
    _emit(result, as_json, embedder)
