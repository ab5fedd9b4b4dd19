"""Contracts of the recall suite: its configuration, per-length metrics, knee and per-case outcomes."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document
from tasks_lib.suites.options import DEFAULT_LENGTHS, ModelConfig, PolicyName
from tasks_lib.suites.recall.cases import CaseKind
from tasks_lib.suites.recall.scoring import Verdict

METRICS = ("recall", "staleness", "false_recall", "abstention")
"""The four published metrics, in table order; never blended into one score."""

RETRIEVAL_METRICS = ("retrieval_recall", "retrieval_staleness", "retrieval_false_recall")
"""The same failures read off the ranking itself (the memory's recall, or the ranked retained context)."""

AVAILABILITY = "availability"
"""Recall cases whose fact a reader could answer from: still in the window, or among the memory's top k."""


class SweepConfig(ContractModel):
    """What one recall run measures and how."""

    lengths: tuple[int, ...] = Field(default=DEFAULT_LENGTHS, min_length=1)
    """Filler turns between the planted fact and the probe, strictly increasing."""
    seed: int = 0
    """Chooses each case's phrasing and filler order; same seed, same numbers."""
    memory: str = "reference"
    """Memory system from the registry, or `none` to measure the retention policy alone."""
    embedder: str = "hashed"
    """Embedder of the memory system and of the offline reader (its cosine ranks what the agent reads).
    The library default `hashed` is offline, deterministic and model-free; `memtrial suite recall`
    passes the nightly's (`minilm`, flows.cli.common.DEFAULT_EMBEDDER) unless told otherwise."""
    policy: PolicyName = "window"
    """Retention policy of the session."""
    window: int = Field(default=20, ge=1)
    """Turns the retention policy keeps verbatim."""
    summary_sentences: int = Field(default=8, ge=1)
    """Sentences the `summary` policy keeps of evicted turns."""
    recall_k: int = Field(default=5, ge=1, le=100)
    """Memories recalled per probe."""
    threshold: float = Field(default=0.6, gt=0.0, le=1.0)
    """Unused: the lexical reader it tuned is gone (kept so results written before still read)."""
    abstain_below: float | None = None
    """The memory system's abstention threshold: its first recalled memory scoring below it is no
    answer, and a false-memory probe's hit counts only at or above it. None: every recalled memory
    counts (the system never abstains)."""
    knee_drop_points: float = Field(default=20.0, gt=0.0, le=100.0)
    """Recall drop, in percentage points below the shortest length, that marks the knee."""
    cases_dir: str | None = None
    """Folder with cases.json and filler.json (default: the bundled corpora/recall)."""
    filler_dataset: str | None = None
    """A LoCoMo JSON file to draw filler from instead of the authored filler."""
    model: ModelConfig | None = None
    """Ask a model instead of the offline reader (the ranking's first memory)."""


class Rate(ContractModel):
    """A proportion with its 95% Wilson interval."""

    k: int = Field(ge=0)
    """Cases counted."""
    n: int = Field(ge=0)
    """Cases in the denominator."""
    rate: float | None
    """k / n, or None when n is 0."""
    lower: float | None
    """Wilson lower bound (95%)."""
    upper: float | None
    """Wilson upper bound (95%)."""


class LengthMetrics(ContractModel):
    """The four metrics at one burial length."""

    length: int
    """Filler turns between the fact and the probe."""
    recall: Rate
    """Recall cases answered with the planted value (answer level: the offline reader reads the
    window and the recalled memories together and asserts the best match; or the model's answer)."""
    staleness: Rate
    """Stale cases answered with the superseded value."""
    false_recall: Rate
    """False-memory cases answered with anything but an abstention."""
    abstention: Rate
    """Answerable (recall and stale) cases where the session abstained."""
    miss: Rate | None = None
    """Stale cases answered with neither the old nor the corrected value (None in results written before it)."""
    retrieval_recall: Rate | None = None
    """Recall cases whose planted fact is among the ranking's top k (the memory's recall; without
    memory the retained context ranked by the embedder). None in results written before it."""
    retrieval_staleness: Rate | None = None
    """Stale cases whose superseded value is ranked above its correction (or the correction is not recalled)."""
    retrieval_false_recall: Rate | None = None
    """False-memory cases with a recalled memory at or above the abstention threshold."""
    availability: Rate | None = None
    """Recall cases whose planted fact was still in the retained window or among the memory's top k
    (without memory: in the window): what a reader that reads all of its context could answer.
    Never below retrieval recall. None in results written before it."""


class Knee(ContractModel):
    """Where recall falls off: the first length more than `threshold_points` below the shortest length."""

    length: int
    """The first length past the drop."""
    previous: int
    """The length before it (the knee lies between the two)."""
    baseline_recall: float
    """Recall at the shortest length."""
    recall: float
    """Recall at `length`."""
    drop_points: float
    """baseline_recall - recall, in percentage points."""
    threshold_points: float
    """The drop that defines the knee."""


class CaseOutcome(ContractModel):
    """One case at one length."""

    case_id: str
    """The case."""
    kind: CaseKind
    """recall, stale or false-memory."""
    length: int
    """Filler turns buried under."""
    phrasing: int | None
    """Index of the planted phrasing used (None for false-memory)."""
    verdict: Verdict
    """Majority verdict over the samples."""
    passed: bool
    """hit for recall and stale cases, abstained for false-memory cases."""
    answer: str
    """The (first sample's) answer, at most 500 characters."""
    sample_verdicts: tuple[Verdict, ...]
    """Each sample's verdict."""
    recalled: int | None = None
    """Turns in the ranking the retrieval level reads (the memory's recall, or the ranked retained context)."""
    fact_rank: int | None = None
    """1-based rank of the turn holding the accepted value (the planted fact, or a stale case's
    correction) among the recalled memories; None when not recalled."""
    stale_rank: int | None = None
    """1-based rank of a stale case's superseded turn among the recalled memories; None when not recalled."""
    top_score: float | None = None
    """The memory's own score of its first recalled memory; None when nothing was recalled."""
    fact_in_window: bool | None = None
    """Whether the turn holding the accepted value was still in the retained context at the probe;
    None for false-memory cases and in results written before it."""


class SweepResult(Document):
    """One recall run: the same cases buried at every length."""

    KIND: ClassVar[str] = "recall sweep result"

    config: SweepConfig
    """What was run."""
    cases_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the cases used (their canonical JSON)."""
    filler: str
    """The filler source: `authored` or the dataset path."""
    filler_digest: str = Field(pattern=r"^[0-9a-f]{64}$")
    """sha256 of the filler conversations used (their canonical JSON)."""
    filler_dropped: dict[str, int]
    """Filler skipped by rule (LoCoMo quirks), counted."""
    metrics_by_length: dict[int, LengthMetrics]
    """The four metrics per length."""
    knee: Knee | None
    """Where recall falls off, or None (flat curve or a single length)."""
    retrieval_knee: Knee | None = None
    """Where retrieval recall (the fact among the top k) falls off, same rule."""
    outcomes: tuple[CaseOutcome, ...]
    """Every case at every length."""
    model_calls: int = Field(ge=0)
    """Requests made to the configured model (0 with the offline reader)."""

    def curve(self, metric: str = "recall") -> dict[int, float | None]:
        """`metric`'s rate per length (None where the metric was not measured)."""
        return metric_curve(self.metrics_by_length, metric)


def metric_curve(metrics_by_length: dict[int, LengthMetrics], metric: str) -> dict[int, float | None]:
    """`metric`'s rate per length, shortest first (None where the metric was not measured)."""
    out: dict[int, float | None] = {}
    for n, m in sorted(metrics_by_length.items()):
        value = getattr(m, metric)
        out[n] = value.rate if value is not None else None
    return out
