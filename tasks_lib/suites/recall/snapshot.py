"""A recall-sweep result as a trend snapshot: every metric per length (answer and retrieval level), six gated, and the knee."""

from __future__ import annotations

import hashlib
import json
from datetime import datetime

from tasks_lib.analysis.trend import Direction, Snapshot
from tasks_lib.suites.recall.results import SweepResult

SUITE = "recall"

GATED: dict[str, Direction] = {"recall": "higher", "staleness": "lower", "false_recall": "lower",
                               "retrieval_recall": "higher", "retrieval_staleness": "lower", "retrieval_false_recall": "lower"}
"""Metrics (at every length) a nightly run may not let fall (or rise, for `lower`); abstention and miss are kept, not gated."""

SCORED = ("recall", "staleness", "false_recall", "abstention", "miss", "retrieval_recall", "retrieval_staleness",
          "retrieval_false_recall")
"""Metrics a snapshot records per length (those a result does not hold are left out)."""


def recall_scores(result: SweepResult) -> dict[str, float]:
    """`<metric>_at_<length>` for every measured metric and length."""
    scores = {}
    for length, metrics in sorted(result.metrics_by_length.items()):
        for name in SCORED:
            value = getattr(metrics, name)
            if value is not None and value.rate is not None:
                scores[f"{name}_at_{length}"] = float(value.rate)
    return scores


def config_digest(result: SweepResult) -> str:
    """sha256 of what defines the numbers besides the cases and the memory system: every setting,
    the filler's content (not its path) and the model's name (not its URL)."""
    config = result.config.model_dump(mode="json", exclude={"cases_dir", "filler_dataset", "memory"})
    if config.get("model"):
        config["model"].pop("base_url", None)
        config["model"].pop("budget_config", None)
    payload = json.dumps({"config": config, "filler": result.filler_digest}, sort_keys=True)
    return hashlib.sha256(payload.encode()).hexdigest()


def recall_snapshot(result: SweepResult, build: str, time: datetime) -> Snapshot:
    """The trend snapshot of one recall run; its knee is the knee's length (None when there is none)."""
    scores = recall_scores(result)
    first = next(iter(result.metrics_by_length.values()))
    counts = {"recall_cases": first.recall.n, "stale_cases": first.staleness.n,
              "false_memory_cases": first.false_recall.n, "lengths": len(result.metrics_by_length)}
    gated = {key: GATED[key.rsplit("_at_", 1)[0]] for key in scores if key.rsplit("_at_", 1)[0] in GATED}
    return Snapshot(
        suite=SUITE, case_set_digest=result.cases_digest, adapter=f"{result.config.memory}/{result.config.embedder}",
        config_digest=config_digest(result), build=build, time=time, scores=scores, counts=counts, gated=gated,
        knee=float(result.knee.length) if result.knee else None,
    )
