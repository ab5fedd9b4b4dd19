"""The run config's typed suite options: their defaults are the suites' own, and a config's options
reach the suite's stage as the typed model (never an untyped dict read after the paid matrix)."""

from __future__ import annotations

from tasks_lib.run.config import RunConfig
from tasks_lib.suites.options import SUITE_OPTION_MODELS, RecallOptions, SuiteOptions
from tasks_lib.suites.recall import SweepConfig


def test_the_recall_options_default_to_the_sweeps_own_defaults() -> None:
    """Regression guard: typing the options must not move a published recall figure by changing a default."""
    sweep = SweepConfig().model_dump()
    options = RecallOptions().model_dump()
    assert options == {name: sweep[name] for name in options}
    assert SweepConfig(memory="reference", embedder="hashed", **options) == SweepConfig()


def test_every_suite_a_config_can_list_has_an_option_model() -> None:
    """A suite without an option model would take its options untyped again."""
    listable = set(RunConfig.model_fields["suites"].annotation.__args__[0].__args__)  # type: ignore[union-attr]
    assert listable == set(SUITE_OPTION_MODELS)
    assert all(isinstance(SuiteOptions().of(name), model) for name, model in SUITE_OPTION_MODELS.items())
