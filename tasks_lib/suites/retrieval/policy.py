"""Selector-policy probes: fixed (question, candidate memories) pairs scored without any retrieval.

They pin the automatic-injection policy itself; their results are never mixed into the
retrieval metrics, latency or false-recall figures.
"""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from tasks_lib.contracts import (
    ContractModel,
    Document,
    Identifier,
    NonEmptyText,
    parse_document,
)
from tasks_lib.errors import ContractError, Violation
from tasks_lib.suites.retrieval.cases import read_json_file
from tasks_lib.suites.retrieval.result import PolicyProbeResult
from tasks_lib.suites.retrieval.selector import select_automatic

POLICY_FILE = "policy.json"


class PolicyProbe(ContractModel):
    """One probe: what the policy must do with these ranked candidates."""

    id: Identifier
    """Probe id."""
    question: NonEmptyText
    """The question."""
    candidates: tuple[NonEmptyText, ...] = Field(min_length=1)
    """Recalled memory texts, best first."""
    expect: Literal["inject", "abstain"]
    """Whether the policy must inject or abstain."""
    choose: int | None = None
    """For `inject`: index of the candidate that must be chosen."""
    note: str = ""
    """What the probe covers (positive kind or adversarial pattern)."""

    @model_validator(mode="after")
    def _choice_matches(self) -> PolicyProbe:
        if self.expect == "inject" and (self.choose is None or not 0 <= self.choose < len(self.candidates)):
            raise ValueError("an inject probe must give choose: the index of one of its candidates")
        if self.expect == "abstain" and self.choose is not None:
            raise ValueError("an abstain probe chooses nothing; remove choose")
        return self


class PolicyProbes(Document):
    """The probe file."""

    KIND: ClassVar[str] = "selector policy probe file"

    probes: tuple[PolicyProbe, ...] = Field(min_length=1)
    """Every probe."""


def load_policy_probes(path: Path) -> PolicyProbes:
    """Read and validate the probe file; ContractError names the file and field."""
    data = read_json_file(path)
    probes = parse_document(PolicyProbes, data, str(path))
    ids = [p.id for p in probes.probes]
    dupes = sorted({i for i in ids if ids.count(i) > 1})
    if dupes:
        raise ContractError([Violation(str(path), "probes", f"ids used twice: {', '.join(dupes)}")])
    return probes


def run_policy_probes(probes: PolicyProbes) -> tuple[PolicyProbeResult, ...]:
    """Apply the automatic-injection policy to every probe."""
    out = []
    for probe in probes.probes:
        selected = select_automatic(probe.question, probe.candidates)
        ok = selected is None if probe.expect == "abstain" else selected == probe.choose
        out.append(PolicyProbeResult(id=probe.id, expected=probe.expect, selected=selected, passed=ok))
    return tuple(out)
