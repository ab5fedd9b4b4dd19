"""The run config's typed suite options: one model per suite, checked when the config loads.

`suite_options` of a run config (`tasks_lib.run.config.RunConfig`) is a `SuiteOptions`: a misspelt
suite or option is refused with the known names before anything runs, never inside the suite's
stage after the paid matrix. Each suite's stage takes its own model (`flows/suites.py`,
`flows/writepath.py`). Every default is the suite's default. What only this machine can answer (a
named file exists, a sequence is bundled) is checked in preflight (`tasks_lib.run.preflight`).

This module imports nothing heavy: the config loads before any suite code does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator

from tasks_lib.contracts import ContractModel, Identifier

DEFAULT_LENGTHS = (10, 40, 100, 250)
"""Burial lengths of a sweep, in filler turns."""
PolicyName = Literal["window", "summary"]
"""Retention policies of the recall suite's session."""
SEQUENCES_ROOT = "corpora/sequences"
"""Where the write-path suite's sequences live in the checkout (`<name>/sequence.json`)."""


class ModelConfig(ContractModel):
    """An OpenAI-compatible model used as the ask step instead of the offline reader."""

    base_url: str = Field(pattern=r"^https?://")
    """Endpoint base, ending before `/chat/completions`."""
    model: str = Field(min_length=1)
    """Model name sent in each request."""
    samples: int = Field(default=1, ge=1, le=9)
    """Answers per question; the majority verdict counts (ties: the worse verdict)."""
    temperature: float = Field(default=0.0, ge=0.0, le=2.0)
    """Sampling temperature (0 for a deterministic single answer; above 0 needs at least 3 samples)."""
    budget_config: str | None = None
    """Budget guard configuration file; required unless `base_url` is on loopback (a local model)."""

    @model_validator(mode="after")
    def _sampling_is_not_a_coin_flip(self) -> ModelConfig:
        if self.temperature > 0 and self.samples < 3:
            raise ValueError(
                f"temperature {self.temperature:g} with {self.samples} sample(s) makes the same run pass or fail by chance; "
                "use temperature 0, or 3 or more samples (the majority verdict counts)"
            )
        return self


class RecallOptions(ContractModel):
    """`suite_options.recall`: how the nightly recall sweep runs (the memory system is the reference
    store and the embedder the run's `embedder`)."""

    lengths: tuple[int, ...] = Field(default=DEFAULT_LENGTHS, min_length=1)
    """Filler turns between the planted fact and the probe, non-negative and strictly increasing."""
    seed: int = 0
    """Chooses each case's phrasing and filler order; same seed, same numbers."""
    policy: PolicyName = "window"
    """Retention policy of the session: `window` or `summary`."""
    window: int = Field(default=20, ge=1)
    """Turns the retention policy keeps verbatim."""
    summary_sentences: int = Field(default=8, ge=1)
    """Sentences the `summary` policy keeps of evicted turns."""
    recall_k: int = Field(default=5, ge=1, le=100)
    """Memories recalled per probe."""
    abstain_below: float | None = None
    """The memory system's abstention threshold (None: every recalled memory counts)."""
    knee_drop_points: float = Field(default=20.0, gt=0.0, le=100.0)
    """Recall drop, in percentage points below the shortest length, that marks the knee."""
    cases_dir: str | None = None
    """Folder with cases.json and filler.json (default: the bundled corpora/recall)."""
    filler_dataset: str | None = None
    """A LoCoMo JSON file to draw filler from instead of the authored filler."""
    model: ModelConfig | None = None
    """Ask a model instead of the offline reader (the ranking's first memory)."""

    @field_validator("lengths")
    @classmethod
    def _increasing(cls, lengths: tuple[int, ...]) -> tuple[int, ...]:
        if any(n < 0 for n in lengths) or list(lengths) != sorted(set(lengths)):
            raise ValueError(f"{list(lengths)} must be non-negative and strictly increasing, e.g. [10, 40, 100, 250]")
        return lengths


class RetrievalOptions(ContractModel):
    """`suite_options.retrieval`: the offline retrieval suite's gates."""

    gates: str | None = None
    """A gates JSON file (relative to the checkout) overriding seed 002's thresholds (default: none)."""


class ExternalOptions(ContractModel):
    """`suite_options.external`: the public datasets (not bundled) and how much of them to run."""

    locomo: str | None = None
    """The LoCoMo JSON file (absolute, or relative to the checkout)."""
    longmemeval: list[str] | None = None
    """LongMemEval JSON file(s) (absolute, or relative to the checkout); one file may be given as a string."""
    limit: int | None = Field(default=None, ge=1)
    """Questions per dataset, at most (default: all)."""

    @field_validator("longmemeval", mode="before")
    @classmethod
    def _one_file_or_many(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    def files(self) -> dict[str, list[str]]:
        """The named dataset files by dataset, as written."""
        named = {"locomo": [self.locomo] if self.locomo else [], "longmemeval": list(self.longmemeval or [])}
        return {name: paths for name, paths in named.items() if paths}

    def paths(self, project_root: Path) -> dict[str, list[Path]]:
        """The named dataset files by dataset, a relative one read from `project_root`."""
        return {name: [project_root / p for p in named] for name, named in self.files().items()}


class WritePathOptions(ContractModel):
    """`suite_options.write-path`: which bundled sequences run and with which agent."""

    sequences: list[Identifier] | None = None
    """Folder names under `corpora/sequences`, each once (default: every bundled sequence)."""
    agent: Identifier = "calibration"
    """The agent whose sessions the memory system learns from (offline calibration by default)."""

    @field_validator("sequences")
    @classmethod
    def _each_once(cls, sequences: list[str] | None) -> list[str] | None:
        if sequences == []:
            raise ValueError("an empty list names no sequence; name the sequences, or leave sequences out to run every one")
        twice = sorted({s for s in sequences or [] if (sequences or []).count(s) > 1})
        if twice:
            raise ValueError(f"{', '.join(twice)} named more than once; name each sequence once")
        return sequences


class SuiteOptions(ContractModel):
    """`suite_options` of a run config: each suite's options under its name."""

    model_config = ContractModel.model_config | {"populate_by_name": True}

    recall: RecallOptions = Field(default_factory=RecallOptions)
    """Options of the recall sweep."""
    retrieval: RetrievalOptions = Field(default_factory=RetrievalOptions)
    """Options of the offline retrieval suite."""
    external: ExternalOptions = Field(default_factory=ExternalOptions)
    """Options of the public-data suite (names its dataset files)."""
    write_path: WritePathOptions = Field(default_factory=WritePathOptions, alias="write-path")
    """Options of the write-path suite."""

    def of(self, suite: str) -> ContractModel:
        """The options of `suite` (its name in `suites`)."""
        return getattr(self, suite.replace("-", "_"))

    def named(self) -> list[str]:
        """The suites whose options differ from their defaults, by their names in the config."""
        fields = type(self).model_fields
        return [field.alias or name for name, field in fields.items()
                if getattr(self, name) != field.default_factory()]  # type: ignore[call-arg,misc]


SUITE_OPTION_MODELS: dict[str, type[ContractModel]] = {
    "recall": RecallOptions, "retrieval": RetrievalOptions, "external": ExternalOptions, "write-path": WritePathOptions,
}
"""Each suite's option model, by the suite's name in `suites` and `suite_options`."""


def bundled_sequences(project_root: Path) -> list[str]:
    """The write-path sequences of the checkout at `project_root` (folders holding a sequence.json), sorted."""
    root = project_root / SEQUENCES_ROOT
    return sorted(p.name for p in root.iterdir() if (p / "sequence.json").is_file()) if root.is_dir() else []
