"""Damage: a condition failing a task that the `off` arm passed, per memory system and condition.

A memory system that plants the wrong state (an old value, a contradiction, a near miss) or merely
injects noise can turn a task the agent solves alone into a failure. That is damage, and it is
counted, never averaged away: per condition, the paired attempts (same task and trial) whose `off`
attempt passed and whose attempt under the condition failed. The unit of inference is the task:
each task's damage share (damaged pairs / gradable pairs) is averaged over tasks, with the
interval `tasks_lib.analysis.headline.task_effect` gives a share in [0, 1] (docs/STATISTICS.md). Ungradable
attempts are in no pair. The system is the record's `build_under_test`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from fractions import Fraction

from pydantic import Field

from tasks_lib.analysis.headline import SHARE, Effect, task_effect
from tasks_lib.contracts import Condition, ContractModel, RunRecord

DAMAGE_UNIT = "share of paired attempts failed where off passed"


class Damage(ContractModel):
    """Damage of one condition against `off`, over the tasks both graded."""

    condition: Condition
    """The condition compared with `off`."""
    system: str
    """The memory-system build(s) measured (`build_under_test`, joined with ', ' when several)."""
    tasks: int = Field(ge=0)
    """Tasks with at least one gradable (condition, off) pair of the same trial."""
    pairs: int = Field(ge=0)
    """Gradable (condition, off) pairs of the same task and trial."""
    off_passed_pairs: int = Field(ge=0)
    """Pairs whose off attempt passed: the ones that can be damaged."""
    damaged_pairs: int = Field(ge=0)
    """Pairs whose off attempt passed and whose attempt under the condition failed."""
    damaged_tasks: tuple[str, ...]
    """Tasks with at least one damaged pair, sorted."""
    share: Effect
    """Mean over tasks of each task's damaged pairs / pairs, with its task-clustered 95% interval."""


def damage_table(records: Sequence[RunRecord], conditions: Sequence[str]) -> list[Damage]:
    """One Damage row per condition of `conditions` but `off` (in that order); none without `off`."""
    if "off" not in conditions:
        return []
    off = {(r.task_id, r.trial): r for r in records if r.condition == "off" and r.outcome != "ungradable"}
    out = []
    for condition in conditions:
        if condition == "off":
            continue
        pairs: dict[str, list[tuple[RunRecord, RunRecord]]] = defaultdict(list)
        for r in records:
            if r.condition == condition and r.outcome != "ungradable" and (r.task_id, r.trial) in off:
                pairs[r.task_id].append((r, off[(r.task_id, r.trial)]))
        damaged = {t: [a for a, b in rows if b.outcome == "pass" and a.outcome == "fail"] for t, rows in pairs.items()}
        shares = [Fraction(len(damaged[t]), len(pairs[t])) for t in sorted(pairs)]
        builds = sorted({a.build_under_test for rows in pairs.values() for a, _ in rows})
        out.append(Damage(
            condition=condition, system=", ".join(builds) or "none", tasks=len(pairs), pairs=sum(map(len, pairs.values())),
            off_passed_pairs=sum(b.outcome == "pass" for rows in pairs.values() for _, b in rows),
            damaged_pairs=sum(map(len, damaged.values())), damaged_tasks=tuple(sorted(t for t, d in damaged.items() if d)),
            share=task_effect(shares, DAMAGE_UNIT, SHARE),
        ))
    return out
