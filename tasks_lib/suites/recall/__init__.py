"""The recall sweep: plant a fact, bury it under real dialogue, probe; four metrics per length and the knee.

`score_answer` scores one answer (hit / miss / stale / abstained) on normalised tokens with
boundaries; `run_sweep(SweepConfig(...))` returns a `SweepResult` with `metrics_by_length` and
`knee`; `find_knee` and `gate_failures` work on any curve or result. See docs/RECALL.md.
"""

from tasks_lib.suites.recall.results import (
    DEFAULT_LENGTHS,
    METRICS,
    LengthMetrics,
    ModelConfig,
    SweepConfig,
    SweepResult,
)
from tasks_lib.suites.recall.scoring import VERDICTS, Verdict, score_answer
from tasks_lib.suites.recall.sweep import find_knee, gate_failures, run_sweep

__all__ = [
    "DEFAULT_LENGTHS",
    "METRICS",
    "VERDICTS",
    "LengthMetrics",
    "ModelConfig",
    "SweepConfig",
    "SweepResult",
    "Verdict",
    "find_knee",
    "gate_failures",
    "run_sweep",
    "score_answer",
]
