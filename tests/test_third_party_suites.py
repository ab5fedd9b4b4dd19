"""The faithful third-party systems run in the suites: the recall sweep and LongMemEval, through the registry.

Real systems, hashed embedder (fast, deterministic); data from /work/shared/data (tests only).
A system missing here is skipped (failed under CI), as in tests/test_memory_adapters.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tasks_lib.suites.public import registry_factory, run_longmemeval
from tasks_lib.suites.recall import SweepConfig, run_sweep
from tests.test_memory_adapters import require

LONGMEMEVAL = Path("/work/shared/data/longmemeval/longmemeval_sample.json")  # one scorable record
SYSTEMS = ("chroma", "lancedb", "txtai", "mem0")


@pytest.mark.slow
@pytest.mark.parametrize("system", SYSTEMS)
def test_recall_sweep_answers_from_the_system_when_the_window_has_forgotten(system: str) -> None:
    """With a one-turn window the planted fact is gone from the context at length 40: what is recalled
    comes from the memory system, so it must beat no memory at all."""
    require(system)
    with_memory = run_sweep(SweepConfig(lengths=(40,), memory=system, window=1))
    without = run_sweep(SweepConfig(lengths=(40,), memory="none", window=1))
    got, floor = with_memory.metrics_by_length[40].recall, without.metrics_by_length[40].recall
    assert got.n == floor.n > 0
    assert got.rate is not None and floor.rate is not None and got.rate > floor.rate, (got, floor)


@pytest.mark.slow
@pytest.mark.parametrize("system", SYSTEMS)
def test_longmemeval_scores_the_system_on_real_records(system: str) -> None:
    """LongMemEval's example records through the system: questions are scored and the system finds evidence."""
    require(system)
    if not LONGMEMEVAL.is_file():
        pytest.skip(f"{LONGMEMEVAL} is not here")
    result = run_longmemeval([LONGMEMEVAL], registry_factory(system, "hashed"), memory=system)
    overall = next(s for s in result.slices if s.name == "overall")
    assert result.questions > 0
    assert 0.0 < overall.get("turn", "recall_any", 10) <= 1.0
