"""Run the recall suite: plant, bury, probe every case at every length; four metrics and the knee.

How one case is played at length N (a fresh realm per case and length; one store per case, in a
temporary folder that the run creates and deletes):

- `recall`: the planted phrasing, N filler turns, the probe.
- `stale`: the old phrasing, N // 2 filler turns, the correction, N - N // 2 filler turns, the probe.
- `false-memory`: N filler turns, the probe.

The phrasing (and correction) are chosen by a generator seeded by (seed, case id), and the filler
order by `filler.bury_order`, so the same seed gives the same numbers and every length buries the
same fact under a longer prefix of the same filler.

The knee (`find_knee`): the first length whose recall is more than `drop_points` percentage
points below the recall at the shortest length; None when no length drops that far.
"""

from __future__ import annotations

import hashlib
import json
import random
import tempfile
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from itertools import pairwise
from pathlib import Path

from tasks_lib.analysis.stats import wilson
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.registry import (
    MEMORY_SYSTEMS,
    UnknownMemorySystemError,
    get_memory_system,
    open_memory_system,
)
from tasks_lib.resources import bundled_folder
from tasks_lib.suites.recall.cases import RecallCase, load_cases, load_filler
from tasks_lib.suites.recall.errors import RecallError
from tasks_lib.suites.recall.filler import (
    FillerSource,
    authored_filler,
    bury_order,
    locomo_filler,
)
from tasks_lib.suites.recall.llm import ChatModelAsker
from tasks_lib.suites.recall.reader import extract_answer
from tasks_lib.suites.recall.results import (
    CaseOutcome,
    Knee,
    LengthMetrics,
    Rate,
    SweepConfig,
    SweepResult,
)
from tasks_lib.suites.recall.retention import Turn, make_policy
from tasks_lib.suites.recall.scoring import Verdict, score_answer
from tasks_lib.suites.recall.session import RecallSession

BUNDLED_CASES = bundled_folder("recall")
"""The authored cases and filler shipped with memtrial (corpora/recall in a checkout)."""

NO_MEMORY = "none"
"""`memory` value that runs the retention policy alone."""

PESSIMISM: tuple[Verdict, ...] = ("stale", "miss", "abstained", "hit")
"""Tie-break order of a majority vote: the worse verdict wins a tie."""

Asker = Callable[[str, tuple[Turn, ...], tuple[Turn, ...]], list[str]]
"""The ask step: (question, retained turns, recalled turns) -> one answer per sample."""

MemoryFactory = Callable[[Path], MemoryAdapter]
"""Opens a fresh memory adapter keeping its data in the given folder."""


def find_knee(curve: Mapping[int, float], drop_points: float = 20.0) -> Knee | None:
    """The first length whose recall is more than `drop_points` points below the shortest length's.

    Raises ValueError for an empty curve or a rate outside [0, 1].
    """
    if not curve:
        raise ValueError("curve is empty; give recall per length")
    if any(not 0.0 <= r <= 1.0 for r in curve.values()):
        raise ValueError(f"curve rates must lie in [0, 1], got {dict(curve)}")
    lengths = sorted(curve)
    baseline = curve[lengths[0]]
    for before, length in pairwise(lengths):
        drop = round((baseline - curve[length]) * 100, 6)
        if drop > drop_points:
            return Knee(length=length, previous=before, baseline_recall=baseline, recall=curve[length],
                        drop_points=drop, threshold_points=drop_points)
    return None


def majority(verdicts: Sequence[Verdict]) -> Verdict:
    """The most common verdict; a tie goes to the worse one (PESSIMISM order)."""
    counts = Counter(verdicts)
    top = max(counts.values())
    return next(v for v in PESSIMISM if counts.get(v) == top)


def rate(k: int, n: int) -> Rate:
    """k/n with its 95% Wilson interval (all None when n is 0)."""
    if n == 0:
        return Rate(k=0, n=0, rate=None, lower=None, upper=None)
    interval = wilson(k, n)
    return Rate(k=k, n=n, rate=k / n, lower=interval.lower, upper=interval.upper)


def length_metrics(length: int, outcomes: Sequence[CaseOutcome]) -> LengthMetrics:
    """The four metrics over the outcomes of one length."""
    recall = [o for o in outcomes if o.kind == "recall"]
    stale = [o for o in outcomes if o.kind == "stale"]
    false = [o for o in outcomes if o.kind == "false-memory"]
    answerable = recall + stale
    return LengthMetrics(
        length=length,
        recall=rate(sum(o.verdict == "hit" for o in recall), len(recall)),
        staleness=rate(sum(o.verdict == "stale" for o in stale), len(stale)),
        false_recall=rate(sum(o.verdict != "abstained" for o in false), len(false)),
        abstention=rate(sum(o.verdict == "abstained" for o in answerable), len(answerable)),
    )


def script(case: RecallCase, filler: Sequence[tuple[str, str]], seed: int) -> tuple[list[tuple[str, str]], int | None]:
    """The turns played before the probe, and the index of the planted phrasing."""
    rng = random.Random(f"{seed}:{case.id}:phrasing")
    if case.kind == "false-memory":
        return list(filler), None
    phrasing = rng.randrange(len(case.phrasings))
    planted = [("user", case.phrasings[phrasing])]
    if case.kind == "recall":
        return planted + list(filler), phrasing
    half = len(filler) // 2
    correction = ("user", case.corrections[rng.randrange(len(case.corrections))])
    return planted + list(filler[:half]) + [correction] + list(filler[half:]), phrasing


def _digest(payload: object) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_config(config: SweepConfig) -> None:
    lengths = config.lengths
    if any(n < 0 for n in lengths) or list(lengths) != sorted(set(lengths)):
        raise RecallError(f"lengths: {list(lengths)} must be non-negative and strictly increasing, e.g. 10,40,100,250")


def _check_memory(name: str) -> None:
    if name == NO_MEMORY:
        return
    try:
        get_memory_system(name)
    except UnknownMemorySystemError:
        raise RecallError(f"memory: unknown memory system {name!r}; use {', '.join(sorted(MEMORY_SYSTEMS))} or {NO_MEMORY}") from None


def _open_memory(config: SweepConfig, folder: Path) -> MemoryAdapter | None:
    if config.memory == NO_MEMORY:
        return None
    return open_memory_system(config.memory, folder, embedder=config.embedder)


def _load(config: SweepConfig) -> tuple[tuple[RecallCase, ...], FillerSource]:
    folder = Path(config.cases_dir) if config.cases_dir else BUNDLED_CASES
    cases = load_cases(folder)
    if config.filler_dataset:
        return cases, locomo_filler(Path(config.filler_dataset), cases)
    return cases, authored_filler(load_filler(folder, cases))


def play_case(case: RecallCase, length: int, config: SweepConfig, filler: FillerSource,
              memory: MemoryAdapter | None, ask: Asker) -> CaseOutcome:
    """Plant, bury and probe one case at one length in `memory` (None: retention alone); score every sample."""
    turns, phrasing = script(case, bury_order(filler, config.seed, case.id, length), config.seed)
    policy = make_policy(config.policy, config.window, config.summary_sentences)
    session = RecallSession(memory, f"recall:{case.id}.n{length}", policy, config.recall_k)
    for speaker, text in turns:
        session.add(speaker, text)
    context = session.context(case.probe)
    answers = ask(case.probe, context.retained, context.recalled)
    if not answers or not all(isinstance(a, str) for a in answers):
        raise RecallError(f"case {case.id!r} at length {length}: the ask step must return a non-empty list of texts, got {answers!r}")
    verdicts = tuple(score_answer(a, case.accept, case.reject) for a in answers)
    verdict = majority(verdicts)
    return CaseOutcome(
        case_id=case.id, kind=case.kind, length=length, phrasing=phrasing, verdict=verdict,
        passed=verdict == ("abstained" if case.kind == "false-memory" else "hit"),
        answer=answers[0][:500], sample_verdicts=verdicts,
    )


def run_sweep(config: SweepConfig, *, workdir: Path | None = None,
              progress: Callable[[CaseOutcome], None] | None = None,
              ask: Asker | None = None, memory_factory: MemoryFactory | None = None) -> SweepResult:
    """Run every case at every length of `config`; return the metrics, the knee and every outcome.

    Each case gets its own fresh store (one realm per length) in a temporary folder (inside
    `workdir` when given), closed after its last length and deleted at the end of the run. Raises
    ContractError for bad case or filler files, RecallError for a bad configuration, the memory
    registry's errors for an unknown or unavailable memory system, and RecallModelError when the
    configured model cannot be asked.

    `ask` replaces the configured ask step (reader or model) with any callable, e.g. an agent;
    `memory_factory` replaces the registry lookup of `config.memory` (which then only names the
    system in the result), for adapters that are not registered.
    """
    _check_config(config)
    if memory_factory is None:
        _check_memory(config.memory)
    cases, filler = _load(config)
    asker = ChatModelAsker(config.model.base_url, config.model.model, samples=config.model.samples,
                           temperature=config.model.temperature) if config.model and ask is None else None

    def default_ask(question: str, retained: tuple[Turn, ...], recalled: tuple[Turn, ...]) -> list[str]:
        if asker is not None:
            return asker.answers(question, retained, recalled)
        return [extract_answer(question, [*recalled, *retained], config.threshold)]

    answer = ask or default_ask

    outcomes: list[CaseOutcome] = []
    with tempfile.TemporaryDirectory(prefix="memtrial-recall-", dir=workdir) as folder:
        for case in cases:
            place = Path(folder) / case.id
            memory = memory_factory(place) if memory_factory else _open_memory(config, place)
            try:
                for length in config.lengths:
                    outcomes.append(play_case(case, length, config, filler, memory, answer))
                    if progress is not None:
                        progress(outcomes[-1])
            finally:
                if memory is not None:
                    memory.close()
    order = {n: i for i, n in enumerate(config.lengths)}
    outcomes.sort(key=lambda o: order[o.length])  # stable: cases keep their file order within a length
    by_length = {n: length_metrics(n, [o for o in outcomes if o.length == n]) for n in config.lengths}
    recall_curve = {n: m.recall.rate for n, m in by_length.items() if m.recall.rate is not None}
    knee = find_knee(recall_curve, config.knee_drop_points) if len(recall_curve) > 1 else None
    return SweepResult(
        config=config, cases_digest=_digest([c.model_dump(mode="json") for c in cases]),
        filler=filler.name, filler_digest=_digest(filler.conversations), filler_dropped=filler.dropped,
        metrics_by_length=by_length, knee=knee, outcomes=tuple(outcomes),
        model_calls=asker.calls if asker else 0,
    )


def gate_failures(result: SweepResult, *, min_recall: float | None = None, max_staleness: float | None = None,
                  max_false_recall: float | None = None) -> list[str]:
    """One message per length and metric past its bar, naming the metric, length, value and bar."""
    bars = [("recall", min_recall, True), ("staleness", max_staleness, False), ("false_recall", max_false_recall, False)]
    failures = []
    for length, metrics in sorted(result.metrics_by_length.items()):
        for name, bar, floor in bars:
            if bar is None:
                continue
            value = getattr(metrics, name)
            if value.rate is None:
                failures.append(f"{name} at length {length}: no cases to measure it; the gate cannot pass on nothing")
            elif (value.rate < bar) if floor else (value.rate > bar):
                sign = "below the minimum" if floor else "above the maximum"
                failures.append(f"{name} at length {length} is {value.rate:.3f} ({value.k}/{value.n}), {sign} {bar:.3f}")
    return failures

