"""Every memory system on every suite, one subprocess each, with wall time and peak memory.

`compare_systems` runs `memtrial suite <suite> --memory <system> --json` for each system and
suite in a fresh Python process (so one system's peak memory is its own: `os.wait4` reads the
child's `ru_maxrss`), reads the suite's own JSON result, and keeps one headline per cell:

- retrieval: Recall@5 of the offline suite (`score`);
- recall: recall at the longest burial length of the sweep, with its 95% interval;
- locomo / longmemeval: turn-level recall_any@5, overall.

A cell whose run failed (exit code other than 0 or 1, or no readable JSON) carries the error and
no value; exit 1 is a failed gate and still has its numbers. Nothing is averaged across suites.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

from tasks_lib.contracts import ContractModel

SuiteName = Literal["retrieval", "recall", "locomo", "longmemeval"]
SUITES: tuple[SuiteName, ...] = ("retrieval", "recall", "locomo", "longmemeval")
"""Suites in table order."""

HEADLINES: dict[str, str] = {
    "retrieval": "Recall@5 (offline suite)",
    "recall": "recall at the longest burial length [95% CI]",
    "locomo": "turn recall_any@5",
    "longmemeval": "turn recall_any@5",
}
"""What each suite's cell shows."""


class CompareCell(ContractModel):
    """One system on one suite."""

    system: str
    """Registry name of the memory system."""
    suite: SuiteName
    """Which suite."""
    value: float | None
    """The headline (HEADLINES[suite]); None when the run failed."""
    interval: tuple[float, float] | None = None
    """Its 95% interval when the suite gives one."""
    wall_seconds: float = Field(ge=0)
    """Wall time of the suite's process."""
    peak_rss_mb: float = Field(ge=0)
    """Peak resident memory of the suite's process, MiB."""
    exit_code: int
    """The suite command's exit code (1: a gate failed, numbers still valid)."""
    error: str = ""
    """Why there is no value, when there is none."""
    adapter_config_digest: str
    """The system's frozen adapter config digest (`memory.adapter_config`)."""


class CompareResult(ContractModel):
    """The whole comparison."""

    schema_version: int = 1
    """Version of this result."""
    embedder: str
    """Embedder every system was opened with."""
    load_average: tuple[float, float, float]
    """The machine's load average when the comparison ended."""
    cells: tuple[CompareCell, ...]
    """System x suite, in the order asked."""


def suite_argv(suite: SuiteName, system: str, embedder: str, *, locomo: Path | None, longmemeval: Sequence[Path],
               limit: int | None, lengths: str) -> list[str] | None:
    """The `memtrial suite ...` arguments of one cell; None when its data set was not given."""
    base = ["suite", suite, "--memory", system, "--embedder", embedder, "--json"]
    if suite == "retrieval":
        return base
    if suite == "recall":
        return [*base, "--sweep", "--lengths", lengths]
    if suite == "locomo":
        return None if locomo is None else [*base, "--dataset", str(locomo), *(["--limit", str(limit)] if limit else [])]
    if not longmemeval:
        return None
    return [*base, *[a for path in longmemeval for a in ("--dataset", str(path))], *(["--limit", str(limit)] if limit else [])]


def headline(suite: SuiteName, payload: dict[str, Any]) -> tuple[float, tuple[float, float] | None]:
    """The cell's value (and interval) from the suite's JSON; KeyError/TypeError when it has none."""
    if suite == "retrieval":
        return float(payload["score"]), None
    if suite == "recall":
        longest = max(payload["metrics_by_length"], key=int)
        rate = payload["metrics_by_length"][longest]["recall"]
        return float(rate["rate"]), (float(rate["lower"]), float(rate["upper"]))
    overall = next(s for s in payload["slices"] if s["name"] == "overall")
    return next(float(m["value"]) for m in overall["scores"] if (m["level"], m["metric"], m["k"]) == ("turn", "recall_any", 5)), None


def run_measured(argv: Sequence[str], env: dict[str, str] | None = None) -> tuple[int, str, str, float, float]:
    """Run `argv`; return (exit code, stdout, stderr, wall seconds, peak RSS MiB of that process)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        started = time.perf_counter()
        process = subprocess.Popen(list(argv), stdout=out, stderr=err, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        process.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return process.returncode, out.read().decode(errors="replace"), err.read().decode(errors="replace"), wall, usage.ru_maxrss / 1024


def compare_systems(systems: Sequence[str], embedder: str, *, suites: Sequence[SuiteName] = SUITES, locomo: Path | None = None,
                    longmemeval: Sequence[Path] = (), limit: int | None = None, lengths: str = "10,40,100,250",
                    progress: Callable[[CompareCell], None] | None = None) -> CompareResult:
    """Run every suite of `suites` on every system (validated by the caller) and measure each run."""
    from tasks_lib.memory.adapter_config import adapter_config

    cells = []
    for system in systems:
        digest = adapter_config(system, embedder).digest
        for suite in suites:
            args = suite_argv(suite, system, embedder, locomo=locomo, longmemeval=longmemeval, limit=limit, lengths=lengths)
            if args is None:
                continue
            code, out, err, wall, peak = run_measured([sys.executable, "-c", "from flows.cli.main import entry; entry()", *args])
            value, interval, error = None, None, ""
            if code in (0, 1):
                try:
                    value, interval = headline(suite, json.loads(out))
                except (ValueError, KeyError, TypeError, StopIteration) as problem:
                    error = f"no readable result ({type(problem).__name__}: {problem})"
            else:
                error = (err.strip().splitlines() or [f"exit {code}"])[-1][:300]
            cell = CompareCell(system=system, suite=suite, value=value, interval=interval, wall_seconds=round(wall, 2),
                               peak_rss_mb=round(peak, 1), exit_code=code, error=error, adapter_config_digest=digest)
            cells.append(cell)
            if progress:
                progress(cell)
    return CompareResult(embedder=embedder, load_average=os.getloadavg(), cells=tuple(cells))


FLOOR = "reference"
"""The system whose wall time, measured in the same run, the others' are a ratio of (when it ran)."""


def markdown_table(result: CompareResult) -> str:
    """The comparison as a Markdown table: one row per system, per suite its headline, wall time (and its
    ratio to FLOOR's in the same run) and peak memory."""
    suites = [s for s in SUITES if any(c.suite == s for c in result.cells)]
    systems = list(dict.fromkeys(c.system for c in result.cells))
    floor = {c.suite: c.wall_seconds for c in result.cells if c.system == FLOOR and c.value is not None}
    lines = ["| system | " + " | ".join(f"{s}: {HEADLINES[s]} (wall, peak RSS)" for s in suites) + " |",
             "|---|" + "---|" * len(suites)]
    for system in systems:
        row = []
        for suite in suites:
            cell = next((c for c in result.cells if (c.system, c.suite) == (system, suite)), None)
            if cell is None:
                row.append("not run")
            elif cell.value is None:
                row.append(f"failed: {cell.error}")
            else:
                ci = f" [{cell.interval[0]:.2f}, {cell.interval[1]:.2f}]" if cell.interval else ""
                ratio = f" = {cell.wall_seconds / floor[suite]:.1f}x {FLOOR}" if floor.get(suite) else ""
                row.append(f"{cell.value:.3f}{ci} ({cell.wall_seconds:.1f} s{ratio}, {cell.peak_rss_mb:.0f} MiB)")
        lines.append(f"| `{system}` | " + " | ".join(row) + " |")
    return "\n".join(lines) + "\n"
