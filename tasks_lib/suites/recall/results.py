"""Contracts of the recall suite: its configuration, per-length metrics, knee and per-case outcomes."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document
from tasks_lib.suites.recall.cases import CaseKind
from tasks_lib.suites.recall.retention import PolicyName
from tasks_lib.suites.recall.scoring import Verdict

DEFAULT_LENGTHS = (10, 40, 100, 250)
"""Burial lengths of a sweep, in filler turns."""

METRICS = ("recall", "staleness", "false_recall", "abstention")
"""The four published metrics, in table order; never blended into one score."""


class ModelConfig(ContractModel):
    """An OpenAI-compatible model used as the ask step instead of the extractive reader."""

    base_url: str = Field(pattern=r"^https?://")
    """Endpoint base, ending before `/chat/completions`."""
    model: str = Field(min_length=1)
    """Model name sent in each request."""
    samples: int = Field(default=1, ge=1, le=9)
    """Answers per question; the majority verdict counts (ties: the worse verdict)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature (0 for a deterministic single answer)."""


class SweepConfig(ContractModel):
    """What one recall run measures and how."""

    lengths: tuple[int, ...] = Field(default=DEFAULT_LENGTHS, min_length=1)
    """Filler turns between the planted fact and the probe, strictly increasing."""
    seed: int = 0
    """Chooses each case's phrasing and filler order; same seed, same numbers."""
    memory: str = "reference"
    """Memory system from the registry, or `none` to measure the retention policy alone."""
    embedder: str = "hashed"
    """Embedder for memory systems that take one (`hashed` is offline and deterministic)."""
    policy: PolicyName = "window"
    """Retention policy of the session."""
    window: int = Field(default=20, ge=1)
    """Turns the retention policy keeps verbatim."""
    summary_sentences: int = Field(default=8, ge=1)
    """Sentences the `summary` policy keeps of evicted turns."""
    recall_k: int = Field(default=5, ge=1, le=100)
    """Memories recalled per probe."""
    threshold: float = Field(default=0.6, gt=0.0, le=1.0)
    """The extractive reader's least probe-term coverage for an answer."""
    knee_drop_points: float = Field(default=20.0, gt=0.0, le=100.0)
    """Recall drop, in percentage points below the shortest length, that marks the knee."""
    cases_dir: str | None = None
    """Folder with cases.json and filler.json (default: the bundled corpora/recall)."""
    filler_dataset: str | None = None
    """A LoCoMo JSON file to draw filler from instead of the authored filler."""
    model: ModelConfig | None = None
    """Ask a model instead of the offline extractive reader."""


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
    """Recall cases answered with the planted value."""
    staleness: Rate
    """Stale cases answered with the superseded value."""
    false_recall: Rate
    """False-memory cases answered with anything but an abstention."""
    abstention: Rate
    """Answerable (recall and stale) cases where the session abstained."""


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
    outcomes: tuple[CaseOutcome, ...]
    """Every case at every length."""
    model_calls: int = Field(ge=0)
    """Requests made to the configured model (0 with the extractive reader)."""

    def curve(self, metric: str = "recall") -> dict[int, float | None]:
        """`metric`'s rate per length."""
        return {n: getattr(m, metric).rate for n, m in sorted(self.metrics_by_length.items())}
