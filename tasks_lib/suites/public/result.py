"""The typed result of a public-data retrieval suite run (LongMemEval or LoCoMo)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from tasks_lib.contracts import ContractModel


class MetricValue(ContractModel):
    """One mean score."""

    level: Literal["turn", "session", "session_any_turn", "session_of_top_turns"]
    """Turn ids; sessions by upstream's official reading (relabelled); the same without the relabelling; or the sessions of
    the top k turns (issue #4's target). `PublicResult.levels` says which is which."""
    metric: Literal["recall_any", "recall_all", "ndcg"]
    """Which metric (definitions in `tasks_lib.suites.public.metrics`)."""
    k: int = Field(ge=1)
    """Cut-off."""
    value: float = Field(ge=0.0, le=1.0)
    """Mean over the slice's scored questions."""


class SliceScores(ContractModel):
    """The mean scores of one slice: all questions, or one category / question type."""

    name: str
    """`overall`, or the category / question type."""
    questions: int = Field(ge=0)
    """Questions scored in the slice."""
    scores: tuple[MetricValue, ...]
    """Every level x metric x k."""

    def get(self, level: str, metric: str, k: int) -> float:
        """The value of (level, metric, k); KeyError when it was not computed."""
        for m in self.scores:
            if (m.level, m.metric, m.k) == (level, metric, k):
                return m.value
        raise KeyError(f"{self.name}: no {level} {metric}@{k}")


class LevelDefinition(ContractModel):
    """What one score level reads, and whether it is the dataset's official metric."""

    level: Literal["turn", "session", "session_any_turn", "session_of_top_turns"]
    """The level, as in `MetricValue.level`."""
    official: bool
    """True for LongMemEval's own turn and session metrics (`session` after its relabelling)."""
    definition: str
    """One line on what the level reads (`tasks_lib.suites.public.metrics.LEVEL_DEFINITIONS`)."""


class QuirkCount(ContractModel):
    """How often one named dataset quirk rule fired."""

    rule: str
    """Rule name."""
    count: int = Field(ge=0)
    """Times it fired."""
    description: str
    """What the rule does."""


class PublicResult(ContractModel):
    """One run of a public retrieval suite over a dataset, with one disposable store per group."""

    dataset: Literal["locomo", "longmemeval"]
    """Which adapter read the data."""
    dataset_files: tuple[str, ...]
    """The files read, as given."""
    dataset_sha256: tuple[str, ...]
    """SHA-256 of each file, in the same order."""
    memory: str
    """The memory system measured (registry name, or the caller's label)."""
    embedder: str | None = None
    """The embedder the memory system was opened with, as `memtrial suite locomo|longmemeval` records
    it; None when the caller's adapter factory did not say (and in results written before it)."""
    ks: tuple[int, ...]
    """Cut-offs."""
    recall_depth: int = Field(ge=1)
    """Hits asked of each recall (at least max(ks); more lets session-level k grow as upstream's does)."""
    groups: int = Field(ge=0)
    """Evaluation groups (conversations / records), each with its own store."""
    questions: int = Field(ge=0)
    """Questions scored."""
    levels: tuple[LevelDefinition, ...]
    """Every level in the slices' scores, in report order, with which is official (a result without it predates
    issue 17, when LoCoMo's `session` was today's `session_any_turn`)."""
    slices: tuple[SliceScores, ...]
    """`overall` first, then each category / question type (`overall` has no scores when no question was scored)."""
    quirks: tuple[QuirkCount, ...]
    """Every quirk rule of the adapter with its count (zero counts included)."""
    short_rankings: int = Field(ge=0)
    """Questions whose ranking was shorter than the corpus and held fewer than max(ks) distinct sessions (official
    reading), even when it covered every session: there upstream's grown k reads turns past the ranking's end, so the
    session level may differ from upstream's on a full ranking (`metrics.short_ranking`)."""
    notes: tuple[str, ...] = ()
    """What a reader must know to read the numbers (e.g. why no question was scored)."""
    index_seconds: float = Field(ge=0)
    """Wall time of all remember calls."""
    query_p50_ms: float = Field(ge=0)
    """Median recall latency."""
    query_p95_ms: float = Field(ge=0)
    """95th-percentile recall latency."""
    storage_bytes: int = Field(ge=0)
    """Sum of the groups' storage, as their adapters account it, just before deletion."""
    embedding_calls: int = Field(ge=0)
    """Embedding calls made, over all groups."""
    llm_calls: int = Field(ge=0)
    """Chat-model calls made, over all groups (zero for the reference store)."""
    wall_seconds: float = Field(ge=0)
    """Wall time of the whole run, loading included."""
    cpu_seconds: float = Field(ge=0)
    """CPU time of this process over the run (steadier than wall time on a shared machine)."""
    peak_rss_mib: float = Field(ge=0)
    """The process's peak resident memory when the run ended (process-wide, so it includes earlier work)."""

    def overall(self) -> SliceScores:
        """The `overall` slice."""
        return self.slices[0]
