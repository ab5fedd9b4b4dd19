"""What one run of the retrieval suite reports: per-case rows, quality metrics, efficiency, gates."""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document
from tasks_lib.suites.retrieval.gates import GateResult


class RecalledText(ContractModel):
    """One recalled memory as the report shows it."""

    key: str | None
    """The case file's key of the memory; None when the adapter returned an id the suite never stored."""
    text: str
    """The recalled text."""


class CaseResult(ContractModel):
    """One question: what came back and how it scored."""

    id: str
    """Case id."""
    group: str
    """Evaluation group."""
    case_class: str
    """Case class."""
    question: str
    """The question asked."""
    rank: int | None
    """1-based rank of the first relevant memory in the recalled list, None when missed or unanswerable."""
    hit_at_5: bool | None
    """Whether a relevant memory was in the top 5 (None for cases without a stored answer)."""
    stale_in_top_5: bool
    """An outdated memory of the case was in the top 5."""
    forbidden_in_top_5: bool
    """A memory the case forbids was in the top 5."""
    automatic: str | None
    """Key of the memory the automatic-injection policy selected, None when it abstained."""
    automatic_expected: str
    """What the case expects of automatic injection: inject, abstain or informational."""
    automatic_ok: bool | None
    """Whether automatic injection met the expectation (None when informational)."""
    top: tuple[RecalledText, ...]
    """The first recalled memories (five), shown for every case."""


class QualityMetrics(ContractModel):
    """Ranking quality and abstention; a rate is None when no case was in its population."""

    recall_at_1: float | None
    """Share of answerable cases with a relevant memory first."""
    recall_at_5: float | None
    """Share of answerable cases with a relevant memory in the top 5."""
    recall_at_8: float | None
    """Share of answerable cases with a relevant memory in the top 8."""
    mrr: float | None
    """Mean reciprocal rank of the first relevant memory (over the recalled depth)."""
    ndcg_at_8: float | None
    """Mean nDCG@8, binary relevance."""
    stale_recall: float | None
    """Share of update cases with an outdated memory in the top 5."""
    false_recall: float | None
    """Share of all cases whose automatic injection selected a memory that does not answer them."""
    abstention: dict[str, float]
    """Per case class: share of cases where automatic injection selected nothing."""
    unanswerable_abstention: float | None
    """Share of out-of-domain and missing-attribute cases that abstained."""
    direct_coverage: float | None
    """Share of canonical direct-fact probes whose automatic injection is relevant."""
    automatic_coverage: float | None
    """Informational: share of all answerable cases whose automatic injection is relevant."""
    recall_at_5_by_class: dict[str, float]
    """Recall@5 per answerable class."""


class Efficiency(ContractModel):
    """What the suite cost, read from the adapter's own accounting and the suite's clock."""

    memories_stored: int
    """Memories written (both realms)."""
    queries: int
    """Recall calls made."""
    context_bytes_top_5: int
    """UTF-8 bytes of the top-5 recalled texts, summed over queries."""
    automatic_context_bytes: int
    """UTF-8 bytes automatic injection would have added, summed over queries."""
    index_ms: float
    """Wall time of every remember call, summed."""
    search_ms_mean: float
    """Mean wall time of one recall."""
    search_ms_p95: float
    """95th percentile wall time of one recall."""
    storage_bytes: int
    """Size of the store after indexing, as the adapter reports it."""
    embedding_calls: int
    """Embedding-model calls (adapter accounting)."""
    embedding_texts: int
    """Texts embedded (adapter accounting)."""
    embedding_tokens: int
    """Tokens embedded (adapter accounting)."""
    embedding_cost_usd: float
    """embedding_tokens times the configured price (0 for local embedders)."""
    llm_calls: int
    """Chat-model calls (adapter accounting)."""
    llm_tokens: int
    """Chat-model tokens (adapter accounting)."""
    llm_cost_usd: float
    """llm_tokens times the configured price."""
    duplicate_ratio: float | None
    """Share of recalled top-5 hits whose text repeats a higher-ranked hit of the same list."""
    vector_coverage: float | None
    """Texts embedded while indexing divided by memories stored (capped at 1; 0 for a text-only adapter)."""


class PolicyProbeResult(ContractModel):
    """One selector-policy probe: a question and candidate memories, no retrieval involved."""

    id: str
    """Probe id."""
    expected: str
    """`inject` or `abstain`."""
    selected: int | None
    """Index of the candidate the policy chose, None when it abstained."""
    passed: bool
    """Whether the policy did what the probe expects."""


class GraphCaseResult(ContractModel):
    """One calibration case, with graph expansion off and on."""

    id: str
    """Case id."""
    case_class: str
    """direct, multi-hop or adversarial."""
    question: str
    """The question."""
    rank_off: int | None
    """Rank of the first relevant memory without the graph lane."""
    rank_on: int | None
    """Rank of the first relevant memory with it."""
    leaks: tuple[str, ...]
    """Forbidden keys (or foreign-realm/duplicate hits) in the top 5 with graph on."""
    top_on: tuple[RecalledText, ...]
    """Top 5 with graph expansion on."""


class GraphCalibration(ContractModel):
    """The one-hop graph calibration: the same retrieval with the graph lane off and on."""

    lanes_off: tuple[str, ...]
    """Lanes used without graph expansion."""
    lanes_on: tuple[str, ...]
    """Lanes used with it."""
    counts: dict[str, int]
    """Cases per class."""
    recall_at_5_off: dict[str, float | None]
    """Recall@5 per class (direct, multi-hop, overall) without graph expansion."""
    recall_at_5_on: dict[str, float | None]
    """Recall@5 per class with graph expansion."""
    leaks: int
    """Adversarial leaks plus duplicate and foreign-realm hits with graph on."""
    required_misses: int
    """Direct cases hit at 5 with graph off but missed with it on."""
    embedding_calls_per_query: float | None
    """Embedding calls per recall call during the calibration's searches."""
    llm_calls: int
    """Chat-model calls during the calibration."""
    cases: tuple[GraphCaseResult, ...]
    """Every case."""


class RetrievalResult(Document):
    """One run of the offline retrieval suite."""

    KIND: ClassVar[str] = "retrieval suite result"

    adapter: str
    """Memory system name."""
    embedder: str
    """Embedder the adapter was opened with."""
    case_set_digest: str
    """sha256 of the case set (the fast suite's cases)."""
    config_digest: str
    """sha256 of what else defines the run: depth, prices, selector version, graph case set."""
    groups: int
    """Evaluation groups (one realm each)."""
    counts: dict[str, int]
    """Cases per class."""
    quality: QualityMetrics
    """Ranking quality and abstention."""
    efficiency: Efficiency
    """Cost and speed."""
    policy: tuple[PolicyProbeResult, ...]
    """Selector-policy probes."""
    graph: GraphCalibration | None
    """The one-hop graph calibration, None when disabled by the gates."""
    gates: tuple[GateResult, ...]
    """Every gate."""
    passed: bool
    """All gates held."""
    score: float = Field(ge=0, le=1)
    """Headline score for `--min-score`: Recall@5 over answerable cases (0 when there are none)."""
    cases: tuple[CaseResult, ...]
    """Every question."""
