"""Gate thresholds of the retrieval suite (seed 002's by default, overridable from a JSON file) and their evaluation.

A gate whose population is empty fails: a gate that checked nothing is not a pass.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document, parse_document
from tasks_lib.suites.retrieval.cases import read_json_file


class RetrievalGates(Document):
    """Thresholds the fast suite and the graph calibration must meet; every field has seed 002's default."""

    KIND: ClassVar[str] = "retrieval gates file"

    recall_at_5_min: float = Field(default=0.90, ge=0, le=1)
    """Recall@5 over answerable cases, at least."""
    mrr_min: float = Field(default=0.80, ge=0, le=1)
    """MRR over answerable cases, at least."""
    direct_probes_min: int = Field(default=6, ge=1)
    """Canonical direct-fact probes (automatic: inject) that must be present."""
    direct_coverage_min: float = Field(default=0.90, ge=0, le=1)
    """Share of canonical direct-fact probes whose automatic injection is a relevant memory, at least."""
    ambiguous_probes_min: int = Field(default=6, ge=1)
    """Ambiguous-binding probes that must be present."""
    ambiguous_abstention_min: float = Field(default=1.0, ge=0, le=1)
    """Share of ambiguous-binding probes that abstain from automatic injection, at least."""
    unanswerable_abstention_min: float = Field(default=0.90, ge=0, le=1)
    """Share of unanswerable cases (both classes) that abstain, at least."""
    missing_attribute_abstention_min: float = Field(default=1.0, ge=0, le=1)
    """Share of missing-attribute cases that abstain, at least."""
    out_of_domain_abstention_min: float = Field(default=1.0, ge=0, le=1)
    """Share of out-of-domain cases that abstain, at least."""
    stale_recall_max: float = Field(default=0.05, ge=0, le=1)
    """Share of update cases with an outdated memory in the top 5, at most."""
    false_recall_max: float = Field(default=0.05, ge=0, le=1)
    """Share of cases whose automatic injection is not a relevant memory, at most."""
    llm_calls_max: int = Field(default=0, ge=0)
    """Chat-model calls the adapter reports for the whole suite, at most (the fast suite makes none)."""
    policy_pass_min: float = Field(default=1.0, ge=0, le=1)
    """Share of selector-policy probes that pass, at least."""
    graph_calibration: bool = True
    """Run and gate the one-hop graph calibration."""
    graph_multi_hop_cases_min: int = Field(default=10, ge=1)
    """Multi-hop cases the calibration must hold."""
    graph_direct_cases_min: int = Field(default=10, ge=1)
    """Direct cases the calibration must hold."""
    graph_multi_hop_gain_min: float = Field(default=0.10, ge=0, le=1)
    """Multi-hop Recall@5 gain from graph expansion, at least (0.10 = 10 points)."""
    graph_direct_recall_min: float = Field(default=0.90, ge=0, le=1)
    """Direct Recall@5 with graph expansion on, at least."""
    graph_regression_max: float = Field(default=0.02, ge=0, le=1)
    """Direct and overall Recall@5 drop from graph expansion, at most."""
    graph_leaks_max: int = Field(default=0, ge=0)
    """Adversarial leaks, duplicate additions and foreign-realm hits with graph expansion on, at most."""


def load_gates(path: Path) -> RetrievalGates:
    """Read a gates file (JSON with `schema_version: 1` and any fields to override)."""
    data = read_json_file(path)
    return parse_document(RetrievalGates, data, str(path))


class GateResult(ContractModel):
    """One gate: what was measured, against what, and whether it held."""

    name: str
    """Gate name (the threshold field it reads)."""
    value: float | None
    """Measured value; None when nothing was measured (the gate then fails)."""
    threshold: float
    """The bar."""
    op: Literal[">=", "<="]
    """How value must compare to threshold."""
    passed: bool
    """Whether the gate held."""
    detail: str = ""
    """What was counted."""


def gate(name: str, value: float | None, threshold: float, op: Literal[">=", "<="], detail: str = "") -> GateResult:
    """Evaluate one gate; an unmeasured value fails."""
    if value is None:
        return GateResult(name=name, value=None, threshold=threshold, op=op, passed=False, detail=(detail + "; nothing was measured").lstrip("; "))
    ok = value >= threshold - 1e-12 if op == ">=" else value <= threshold + 1e-12
    return GateResult(name=name, value=value, threshold=threshold, op=op, passed=ok, detail=detail)
