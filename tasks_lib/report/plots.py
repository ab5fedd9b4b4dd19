"""The report's plots: matplotlib figures (Agg backend) as base64 PNG `data:` URIs.

Nothing here reaches the network or the screen; every figure is drawn off-screen and embedded,
so the report is one self-contained file. matplotlib is imported only when a figure is drawn
(about a second), and `stored_plotter` keeps each drawn plot in the artifact store under the
digest of its inputs and of this module: a report rendered again from unchanged inputs (a rerun,
`memtrial report` again, the local copy) draws nothing.

A figure is never wider than `FIGURE_WIDTH` inches: per-task plots wrap their tasks onto panels
stacked downwards (`panels`), so a 44-task run draws a tall figure the page shows at its own size,
not a 6683-pixel strip scaled down to 85 pixels.
"""

from __future__ import annotations

import base64
import hashlib
import io
import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pydantic_core

from tasks_lib.analysis.grading import AttemptGrade, MuiTally, PassRate

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from tasks_lib.artifacts import ArtifactStore

PLOTS_CACHE = "cache/plots"
"""Artifact-store folder of drawn plots, one `<sha256>.uri` per plot (its `data:` URI)."""
PNG_URI = re.compile(r"data:image/png;base64,[A-Za-z0-9+/]+={0,2}")
"""What a stored plot must be to be used (anything else in the cache is drawn again, never embedded)."""
Plotter = Callable[[Callable[..., str], tuple[Any, ...]], str]
"""Draws plot function `fn` on `args` (or finds it drawn): `plotter(fn, args)` is `fn(*args)`."""


def _pyplot() -> Any:
    """matplotlib.pyplot on the off-screen Agg backend (imported on first use)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw(fn: Callable[..., str], args: tuple[Any, ...]) -> str:
    """The Plotter that always draws."""
    return fn(*args)


def plot_digest(fn: Callable[..., str], args: tuple[Any, ...]) -> str:
    """SHA-256 of what defines a plot: this module's source, the matplotlib release, the function and its inputs."""
    from importlib.metadata import version

    digest = hashlib.sha256(Path(__file__).read_bytes())
    digest.update(version("matplotlib").encode())
    digest.update(fn.__name__.encode())
    digest.update(pydantic_core.to_json(list(args)))
    return digest.hexdigest()


def stored_plotter(store: ArtifactStore) -> Plotter:
    """A Plotter that reads a plot drawn before from `store` (PLOTS_CACHE) and stores what it draws; a
    stored entry that is not a PNG `data:` URI (tampered, truncated) is drawn again and replaced."""
    def plot(fn: Callable[..., str], args: tuple[Any, ...]) -> str:
        key = f"{PLOTS_CACHE}/{plot_digest(fn, args)}.uri"
        if store.exists(key):
            stored = store.get_bytes(key).decode("ascii", errors="replace")
            if PNG_URI.fullmatch(stored):
                return stored
        uri = fn(*args)
        store.put_bytes(key, uri.encode("ascii"))
        return uri

    return plot

COLOURS = {"off": "#7f7f7f", "on": "#1f77b4", "ablate:all": "#d62728"}
HARM_COLOUR = "#a93226"
"""The harm bars of the MUI plot."""
LANE_COLOURS = ("#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf")
FIGURE_WIDTH = 10.0
"""Width of every figure in inches (1000 px at the 100 dpi drawn): within the page's column, so shown unscaled."""
BARS_PER_PANEL = 36
"""At most this many bars side by side in one panel of a per-task plot (tasks x conditions)."""
PANEL_HEIGHT = 3.4
"""Height of one panel in inches (the x labels included)."""


def panels(tasks: Sequence[str], bars_per_task: int) -> list[list[str]]:
    """`tasks` cut into rows of at most BARS_PER_PANEL bars (at least one task per row), as evenly as possible."""
    per_row = max(1, BARS_PER_PANEL // max(bars_per_task, 1))
    rows = max(1, -(-len(tasks) // per_row))
    size = -(-len(tasks) // rows) if tasks else 0
    return [list(tasks[i:i + size]) for i in range(0, len(tasks), size)] if tasks else [[]]


def colour_of(condition: str, conditions: Sequence[str]) -> str:
    """A stable colour per condition: off grey, on blue, ablate:all red, lanes from a palette."""
    if condition in COLOURS:
        return COLOURS[condition]
    lanes = [c for c in conditions if c not in COLOURS]
    return LANE_COLOURS[lanes.index(condition) % len(LANE_COLOURS)]


def png_data_uri(figure: Figure) -> str:
    """Render `figure` to PNG (no metadata) and return it as a `data:image/png;base64,` URI."""
    sink = io.BytesIO()
    figure.savefig(sink, format="png", dpi=100, bbox_inches="tight", metadata={"Software": None})
    _pyplot().close(figure)
    return "data:image/png;base64," + base64.b64encode(sink.getvalue()).decode("ascii")


def _task_label(task_id: str) -> str:
    return "all tasks" if task_id == "*" else task_id


def pass_rate_plot(rates: Sequence[PassRate], conditions: Sequence[str]) -> str:
    """Grouped bars of the pass rate per task and condition, Wilson 95% intervals as error bars."""
    from matplotlib.ticker import PercentFormatter

    plt = _pyplot()
    tasks = list(dict.fromkeys(r.task_id for r in rates))
    width = 0.8 / max(len(conditions), 1)
    rows = panels(tasks, len(conditions))
    figure, grid = plt.subplots(len(rows), 1, figsize=(FIGURE_WIDTH, PANEL_HEIGHT * len(rows)), squeeze=False)
    cells = {(r.task_id, r.condition): r for r in rates if r.gradable}
    for row, axes in zip(rows, grid[:, 0], strict=True):
        for index, condition in enumerate(conditions):
            xs, ys, lows, highs = [], [], [], []
            for position, task in enumerate(row):
                cell = cells.get((task, condition))
                if cell is None:
                    continue
                rate = float(Fraction(cell.rate))
                xs.append(position + (index - (len(conditions) - 1) / 2) * width)
                ys.append(rate)
                lows.append(rate - cell.wilson_low)
                highs.append(cell.wilson_high - rate)
            axes.bar(xs, ys, width=width * 0.95, color=colour_of(condition, conditions), label=condition,
                     yerr=[lows, highs], capsize=3, error_kw={"elinewidth": 1})
        axes.set_xticks(range(len(row)), [_task_label(t) for t in row], rotation=30, ha="right", fontsize=9)
        axes.set_xlim(-0.6, max(len(row), 4) - 0.4)
        axes.set_ylim(0, 1.05)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        axes.set_ylabel("pass rate (%)")
    grid[0, 0].set_title("Pass rate per task and condition (error bars: Wilson 95% interval)")
    if rates:
        grid[0, 0].legend(fontsize=9, title="condition", title_fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    return png_data_uri(figure)


def mui_plot(tallies: Sequence[MuiTally]) -> str:
    """Bars per task: success-lift and cost-saving shares stacked up (they sum to MUI), the harm share down."""
    from matplotlib.ticker import PercentFormatter

    plt = _pyplot()
    rows = panels([t.task_id for t in tallies], 2)
    by_task = {t.task_id: t for t in tallies}
    figure, grid = plt.subplots(len(rows), 1, figsize=(FIGURE_WIDTH, PANEL_HEIGHT * len(rows)), squeeze=False)
    for row, axes in zip(rows, grid[:, 0], strict=True):
        positions = list(range(len(row)))
        lift = [float(Fraction(by_task[t].success_lift_share)) for t in row]
        saving = [float(Fraction(by_task[t].cost_saving_share)) for t in row]
        harm = [-float(Fraction(by_task[t].harm_share or 0)) for t in row]
        axes.bar(positions, lift, color="#2ca02c", label="success lift")
        axes.bar(positions, saving, bottom=lift, color="#1f77b4", label="cost saving")
        axes.bar(positions, harm, color=HARM_COLOUR, label="harm (drawn below 0)")
        axes.axhline(0, color="#444", linewidth=0.8)
        axes.set_xticks(positions, [_task_label(t) for t in row], rotation=30, ha="right", fontsize=9)
        axes.set_xlim(-0.6, max(len(row), 4) - 0.4)
        axes.set_ylim(-1.05, 1.05)
        axes.yaxis.set_major_formatter(PercentFormatter(1.0, decimals=0))
        axes.set_ylabel("share of on attempts (%)")
    grid[0, 0].set_title("MUI v2: success lift + cost saving - harm = net")
    grid[0, 0].legend(fontsize=9, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    figure.tight_layout()
    return png_data_uri(figure)


def token_plot(grades: Sequence[AttemptGrade], conditions: Sequence[str]) -> str:
    """Token distribution per condition: a box plot with every attempt drawn as a point."""
    from matplotlib.ticker import FuncFormatter

    plt = _pyplot()
    present = [c for c in conditions if any(g.condition == c for g in grades)]
    data = [[g.tokens for g in grades if g.condition == c] for c in present]
    figure, axes = plt.subplots(figsize=(min(FIGURE_WIDTH, max(6.0, 1.3 * len(present) + 2)), 3.6))
    if data:
        boxes = axes.boxplot(data, patch_artist=True, widths=0.5)
        for patch, condition in zip(boxes["boxes"], present, strict=True):
            patch.set_facecolor(colour_of(condition, conditions))
            patch.set_alpha(0.45)
        for index, (condition, values) in enumerate(zip(present, data, strict=True), start=1):
            spread = [index + 0.12 * ((i % 5) - 2) / 2 for i in range(len(values))]
            axes.scatter(spread, values, s=14, color=colour_of(condition, conditions), zorder=3)
        axes.set_xticks(range(1, len(present) + 1), present, fontsize=8)
    axes.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:,.0f}"))
    axes.set_ylabel("tokens per attempt (input + output)")
    axes.set_xlabel("condition")
    axes.set_title("Token distribution per condition")
    return png_data_uri(figure)
