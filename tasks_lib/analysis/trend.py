"""Trend and regression gate: one snapshot per suite run, kept as a curve in the artifact store.

A curve is a folder of one-row Parquet tables, `trend/<curve>/<time>-<digest>.parquet`, one per
snapshot (the curve is named after the suite unless told otherwise; read it whole with e.g.
DuckDB's `read_parquet('trend/<curve>/*.parquet')`). An append writes a new object and never
rewrites another, so concurrent appends (two nightly workers) both land. A curve's snapshots
share one comparability key: sha256 of the suite name, the case-set digest, the adapter and the
config digest. Snapshots with different keys measure different things, so `append_snapshot`
refuses to put them on one curve and `regressions` refuses to compare them (two first snapshots
of different keys appended at the same instant can both land; the comparison then names them).
A curve written by an earlier memtrial as one table, `trend/<curve>.parquet`, is still read.

`regressions(previous, current, gated_metrics)` returns one message per failure, naming the
metric and both values: a gated metric that moved the wrong way, went missing, or a knee (the
recall sweep's length where recall falls off) that moved.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

import pyarrow as pa
from pydantic import Field, field_validator, model_validator

from tasks_lib.artifacts import ArtifactStore, check_key
from tasks_lib.contracts import ContractModel, Identifier
from tasks_lib.errors import ArtifactNotFound, MemtrialError

TREND_PREFIX = "trend"

Direction = Literal["higher", "lower"]
"""Which way a gated metric is better."""


class TrendError(MemtrialError):
    """A snapshot cannot join a curve, or two snapshots cannot be compared."""


def comparability_key(suite: str, case_set_digest: str, adapter: str, config_digest: str) -> str:
    """sha256 of what makes two runs comparable."""
    payload = json.dumps([suite, case_set_digest, adapter, config_digest])
    return hashlib.sha256(payload.encode()).hexdigest()


class Snapshot(ContractModel):
    """One run of one suite, as the trend keeps it."""

    suite: Identifier
    """Suite name (retrieval, recall, longmemeval, locomo, ...)."""
    case_set_digest: str = Field(min_length=1)
    """Digest of the cases the suite ran."""
    adapter: str = Field(min_length=1)
    """Memory system under test."""
    config_digest: str = Field(min_length=1)
    """Digest of everything else that defines the numbers (embedder, depth, prices, ...)."""
    comparability_key: str = ""
    """sha256 of suite, case-set digest, adapter and config digest; filled in when left empty, checked when given."""
    build: str = Field(min_length=1)
    """Build under test (e.g. the memtrial commit, plus the adapter's version)."""
    time: datetime
    """When the run finished (timezone-aware)."""
    scores: dict[str, float]
    """Metric name -> value (NaN is not allowed: leave a metric out instead)."""
    counts: dict[str, int] = Field(default_factory=dict)
    """Population sizes (cases, groups, ...)."""
    gated: dict[str, Direction] = Field(default_factory=dict)
    """Metrics the regression gate compares, and which way is better."""
    knee: float | None = None
    """Length where recall falls off (recall sweep), None when the suite has none or none was found."""

    @field_validator("time")
    @classmethod
    def _aware(cls, value: datetime) -> datetime:
        if value.tzinfo is None:
            raise ValueError("time must carry a timezone (use UTC)")
        return value.astimezone(UTC)

    @field_validator("scores")
    @classmethod
    def _finite(cls, value: dict[str, float]) -> dict[str, float]:
        bad = sorted(k for k, v in value.items() if not math.isfinite(v))
        if bad:
            raise ValueError(f"scores {', '.join(bad)} are not finite numbers; leave unmeasured metrics out")
        return value

    @model_validator(mode="after")
    def _key_matches(self) -> Snapshot:
        expected = comparability_key(self.suite, self.case_set_digest, self.adapter, self.config_digest)
        if not self.comparability_key:
            object.__setattr__(self, "comparability_key", expected)
        elif self.comparability_key != expected:
            raise ValueError("comparability_key does not match suite, case_set_digest, adapter and config_digest")
        missing = sorted(set(self.gated) - set(self.scores))
        if missing:
            raise ValueError(f"gated metrics {', '.join(missing)} have no score")
        return self


def curve_key(curve: str) -> str:
    """Artifact key of a curve kept as one table (how earlier memtrial versions wrote it)."""
    return check_key(f"{TREND_PREFIX}/{curve}.parquet")


def curve_folder(curve: str) -> str:
    """The folder holding a curve's snapshots: `trend/<curve>/`.

    Raises TrendError for a name that is not letters, digits, `.`, `_` and `-` (a `/` would nest
    one curve inside another's folder).
    """
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", curve):
        raise TrendError(f"curve name {curve!r}: use letters, digits, '.', '_' and '-' only (e.g. retrieval-chroma)")
    return f"{TREND_PREFIX}/{curve}/"


def snapshot_key(curve: str, snapshot: Snapshot) -> str:
    """Key of one snapshot of a curve: its UTC time (sortable) and a digest of its content."""
    digest = hashlib.sha256(json.dumps(_row(snapshot), sort_keys=True).encode()).hexdigest()[:12]
    return check_key(f"{curve_folder(curve)}{snapshot.time.astimezone(UTC):%Y%m%dT%H%M%S%fZ}-{digest}.parquet")


def _row(snapshot: Snapshot) -> dict[str, object]:
    data = snapshot.model_dump(mode="json")
    for field in ("scores", "counts", "gated"):
        data[field] = json.dumps(data[field], sort_keys=True)
    return data


def _snapshot(row: Mapping[str, object], source: str, index: int) -> Snapshot:
    try:
        data = dict(row)
        for field in ("scores", "counts", "gated"):
            data[field] = json.loads(str(data[field]))
        return Snapshot.model_validate(data)
    except (ValueError, KeyError, TypeError) as error:
        raise TrendError(f"{source}: row {index} is not a valid snapshot ({error}); the curve was written by another tool or damaged") from None


def load_trend(store: ArtifactStore, curve: str) -> list[Snapshot]:
    """Every snapshot of a curve, oldest first; [] when the curve does not exist yet."""
    keys = [k for k in store.list_keys(curve_folder(curve)) if k.endswith(".parquet")]
    if store.exists(curve_key(curve)):
        keys.insert(0, curve_key(curve))
    rows: list[tuple[Snapshot, str]] = []
    for key in keys:
        try:
            table = store.get_table(key)
        except ArtifactNotFound:  # deleted between the listing and the read
            continue
        source = f"{store.uri.rstrip('/')}/{key}"
        rows += [(_snapshot(row, source, i), key) for i, row in enumerate(table.to_pylist())]
    return [snapshot for snapshot, _ in sorted(rows, key=lambda r: (r[0].time, r[1]))]


def curve_names(store: ArtifactStore) -> list[str]:
    """The curves an artifact store holds (folders under `trend/` and one-table curves), sorted."""
    names: set[str] = set()
    for key in store.list_keys(f"{TREND_PREFIX}/"):
        rest = key.removeprefix(f"{TREND_PREFIX}/")
        if "/" in rest:
            names.add(rest.split("/", 1)[0])
        elif rest.endswith(".parquet"):
            names.add(rest.removesuffix(".parquet"))
    return sorted(names)


def resolve_curve(store: ArtifactStore, curve: str) -> str:
    """The curve `curve` names: itself when it has snapshots, else its only `<curve>-...` variant.

    A suite stores its curve under a name that adds the system and embedder (`recall-reference-
    minilm`), so `recall` finds that curve when it is the only one of the suite. Raises TrendError
    listing the curves the store holds when the name matches none or several.
    """
    names = curve_names(store)
    if curve in names:
        return curve
    variants = [name for name in names if name.startswith(f"{curve}-")]
    if len(variants) == 1:
        return variants[0]
    held = ", ".join(variants or names) or "none"
    which = f"{len(variants)} curves start with {curve!r}" if variants else f"no curve {curve!r}"
    raise TrendError(f"trend: {which} at {store.uri.rstrip('/')}/{TREND_PREFIX}/; curves held: {held}; "
                     "name one with --suite (run a suite with --artifacts to add one)")


def metric_order(metric: str) -> tuple[object, ...]:
    """Sort key reading the numbers in a metric's name as numbers (`_at_10` before `_at_40` before `_at_100`)."""
    return tuple((0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", metric) if part)


def _difference(a: Snapshot, b: Snapshot) -> str:
    parts = [
        f"{name} {getattr(a, name)!r} vs {getattr(b, name)!r}"
        for name in ("suite", "adapter", "case_set_digest", "config_digest")
        if getattr(a, name) != getattr(b, name)
    ]
    return "; ".join(parts)


def append_snapshot(store: ArtifactStore, snapshot: Snapshot, curve: str | None = None) -> str:
    """Add `snapshot` to its curve (default: named after its suite) and return the snapshot's key.

    Writes one new object; nothing already on the curve is rewritten. Raises TrendError when the
    curve holds snapshots with another comparability key.
    """
    name = curve or snapshot.suite
    existing = load_trend(store, name)
    if existing and existing[-1].comparability_key != snapshot.comparability_key:
        raise TrendError(
            f"{store.uri.rstrip('/')}/{curve_folder(name)}: this snapshot is not comparable with the curve "
            f"({_difference(existing[-1], snapshot)}); start a new curve (--curve NAME) instead of mixing them"
        )
    key = snapshot_key(name, snapshot)
    store.put_table(key, pa.Table.from_pylist([_row(snapshot)]))
    return key


def regressions(
    previous: Snapshot,
    current: Snapshot,
    gated_metrics: Mapping[str, Direction] | Sequence[str],
    knee: bool | None = None,
    tolerance: float = 0.0,
) -> list[str]:
    """One message per regression of `current` against `previous`; [] when nothing regressed.

    `gated_metrics` maps metric -> better direction (a plain list means higher is better); a
    metric fails when it moved the wrong way by more than `tolerance`, or is missing from
    `current` while `previous` had it. `knee`: compare the knees (True), skip (False), or
    compare when either snapshot has one (None); any move of the knee fails.
    Raises TrendError when the snapshots have different comparability keys.
    """
    if previous.comparability_key != current.comparability_key:
        raise TrendError(f"cannot compare snapshots of different runs: {_difference(previous, current)}")
    directions = dict(gated_metrics) if isinstance(gated_metrics, Mapping) else {m: "higher" for m in gated_metrics}
    messages = []
    for metric, direction in sorted(directions.items()):
        before, after = previous.scores.get(metric), current.scores.get(metric)
        if before is None:
            continue
        if after is None:
            messages.append(f"{current.suite}: {metric} was {before:g}, now not measured")
            continue
        drop = before - after if direction == "higher" else after - before
        if drop > tolerance + 1e-12:
            word = "fell" if direction == "higher" else "rose"
            messages.append(f"{current.suite}: {metric} {word} from {before:g} to {after:g} ({direction} is better)")
    check_knee = knee if knee is not None else (previous.knee is not None or current.knee is not None)
    if check_knee and previous.knee != current.knee:
        messages.append(f"{current.suite}: knee moved from {_length(previous.knee)} to {_length(current.knee)}")
    return messages


def _length(value: float | None) -> str:
    return "none" if value is None else f"{value:g}"


def now() -> datetime:
    """The current time in UTC."""
    return datetime.now(UTC)


def render_trend_png(snapshots: Sequence[Snapshot], title: str) -> bytes:
    """A PNG of every gated metric (and the knee, if any) over time, one line each (matplotlib Agg)."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    if not snapshots:
        raise TrendError(f"{title}: no snapshots to plot")
    metrics = sorted({m for s in snapshots for m in s.gated})
    has_knee = any(s.knee is not None for s in snapshots)
    rows = 2 if has_knee else 1
    figure, axes = plt.subplots(rows, 1, figsize=(9, 3.5 * rows), squeeze=False)
    times = [s.time for s in snapshots]
    axis = axes[0][0]
    for metric in metrics:
        values = [s.scores.get(metric, math.nan) for s in snapshots]
        axis.plot(times, values, marker="o", label=metric)
    axis.set_title(title)
    axis.set_ylabel("score")
    if metrics:
        axis.legend(fontsize="small", loc="best")
    axis.grid(True, alpha=0.3)
    if has_knee:
        knee_axis = axes[1][0]
        knee_axis.plot(times, [math.nan if s.knee is None else s.knee for s in snapshots], marker="s", color="black")
        knee_axis.set_ylabel("knee (length)")
        knee_axis.grid(True, alpha=0.3)
    figure.autofmt_xdate()
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=100)
    plt.close(figure)
    return buffer.getvalue()
