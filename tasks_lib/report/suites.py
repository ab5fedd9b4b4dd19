"""The suite results a run's report shows: read back from `runs/<run>/suites/<name>.json`.

A nightly run stores its suites under its own id and each agent's matrix under `<run>-<agent>`;
the agent run's provenance names that parent run, so its report finds them. A run without
provenance is never matched to a parent by its name: only its own `suites/` folder is read.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from pydantic import ValidationError

from tasks_lib.artifacts import ArtifactStore, suite_key
from tasks_lib.contracts import violations_of
from tasks_lib.errors import MemtrialError
from tasks_lib.run.provenance import RunProvenance
from tasks_lib.suites.public.result import PublicResult
from tasks_lib.suites.recall.results import SweepResult
from tasks_lib.suites.retrieval.result import RetrievalResult
from tasks_lib.suites.writepath import WritePathResult


class SuiteResultError(MemtrialError):
    """A stored suite result cannot be read as its suite's result."""


@dataclass(frozen=True)
class SuiteResults:
    """The suite results stored for a run (any of them may be absent)."""

    run_id: str
    """The run whose `suites/` folder was read."""
    keys: dict[str, str] = field(default_factory=dict)
    """Suite name -> artifact key of each result found."""
    retrieval: RetrievalResult | None = None
    recall: SweepResult | None = None
    external: dict[str, PublicResult] = field(default_factory=dict)
    """Dataset (locomo, longmemeval) -> its result."""
    write_path: tuple[WritePathResult, ...] = ()
    """The write-path suite: one result (learning curve) per sequence."""

    @property
    def empty(self) -> bool:
        """True when no suite result was found."""
        return not self.keys


def _read(store: ArtifactStore, key: str) -> object:
    try:
        return json.loads(store.get_bytes(key))
    except ValueError as error:
        raise SuiteResultError(f"{store.uri.rstrip('/')}/{key}: not valid JSON ({error})") from None


def load_suites(store: ArtifactStore, run_id: str, provenance: RunProvenance | None) -> SuiteResults:
    """The suite results of `run_id`'s nightly run (its provenance's parent), or of the run itself.
    Raises SuiteResultError naming a stored result that is not its suite's."""
    owner = provenance.parent_run_id if provenance is not None and provenance.parent_run_id else run_id
    keys = {name: suite_key(owner, name) for name in ("retrieval", "recall", "external", "write-path")}
    found = {name: key for name, key in keys.items() if store.exists(key)}
    parsed: dict[str, object] = {}
    for name, key in found.items():
        data = _read(store, key)
        try:
            if name == "retrieval":
                parsed[name] = RetrievalResult.model_validate(data)
            elif name == "recall":
                parsed[name] = SweepResult.model_validate(data)
            elif name == "write-path":
                if not isinstance(data, list):
                    raise SuiteResultError(f"{store.uri.rstrip('/')}/{key}: a list of sequence results was expected")
                parsed[name] = tuple(WritePathResult.model_validate(item) for item in data)
            else:
                if not isinstance(data, dict):
                    raise SuiteResultError(f"{store.uri.rstrip('/')}/{key}: an object of dataset -> result was expected")
                parsed[name] = {dataset: PublicResult.model_validate(value) for dataset, value in sorted(data.items())}
        except ValidationError as error:
            problems = "; ".join(str(v) for v in violations_of(error, f"{store.uri.rstrip('/')}/{key}"))
            raise SuiteResultError(f"not a {name} suite result: {problems}") from None
    return SuiteResults(run_id=owner, keys=found, retrieval=parsed.get("retrieval"),  # type: ignore[arg-type]
                        recall=parsed.get("recall"), external=parsed.get("external", {}),  # type: ignore[arg-type]
                        write_path=parsed.get("write-path", ()))  # type: ignore[arg-type]
