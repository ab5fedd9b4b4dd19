"""Run the recall suite: plant, bury, probe every case at every length; four metrics and the knee.

How one case is played at length N (a fresh realm per case and length; one store per case, in a
temporary folder that the run creates and deletes):

- `recall`: the planted phrasing, N filler turns, the probe.
- `stale`: the old phrasing, N // 2 filler turns, the correction, N - N // 2 filler turns, the probe.
- `false-memory`: N filler turns, the probe.

The case's distractors go into the same conversation (and so the same store): each one right
before or right after the planted phrasing (seeded), before the filler for a false-memory case.

The offline reader is an agent that keeps its context: it reads its retained window and, with a
memory system, the memories it recalled, and answers with the best match of both
(`reader.read_context`), so a memory-backed session reads everything the session without memory
reads. Every outcome also records where the memory ranked the fact, the superseded value and
its own top score (the retrieval level: the memory alone), and whether the fact was still in the
window (with the memory's top k: availability, what any reader could have answered from).

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
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

from tasks_lib.analysis.stats import wilson
from tasks_lib.memory.adapter import MemoryAdapter
from tasks_lib.memory.embeddings import get_embedder
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
from tasks_lib.suites.recall.llm import ChatModelAsker, guard_model_reader
from tasks_lib.suites.recall.reader import context_ranking, ranked_answer, read_context
from tasks_lib.suites.recall.results import (
    CaseOutcome,
    Knee,
    LengthMetrics,
    Rate,
    SweepConfig,
    SweepResult,
    metric_curve,
)
from tasks_lib.suites.recall.retention import Turn, make_policy
from tasks_lib.suites.recall.scoring import Verdict, score_answer
from tasks_lib.suites.recall.session import RecallSession
from tasks_lib.suites.recall.variants import RECALL_VARIANTS

BUNDLED_CASES = bundled_folder("recall")
"""The authored cases and filler shipped with memtrial (corpora/recall in a checkout)."""

NO_MEMORY = "none"
"""`memory` value that runs the retention policy alone."""

PESSIMISM: tuple[Verdict, ...] = ("stale", "miss", "abstained", "hit")
"""Tie-break order of a majority vote: the worse verdict wins a tie."""

Asker = Callable[[str, tuple[Turn, ...], tuple[Turn, ...]], list[str]]
"""The ask step: (question, retained turns, recalled turns in the memory's order) -> one answer per sample."""

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


def _knee(curve: Mapping[int, float | None], drop_points: float) -> Knee | None:
    measured = {n: r for n, r in curve.items() if r is not None}
    return find_knee(measured, drop_points) if len(measured) > 1 else None


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


def superseded_first(outcome: CaseOutcome) -> bool:
    """A stale case whose memory ranked the superseded value above its correction (or recalled only the old one)."""
    return outcome.stale_rank is not None and (outcome.fact_rank is None or outcome.stale_rank < outcome.fact_rank)


def false_hit(outcome: CaseOutcome, abstain_below: float | None) -> bool:
    """A recalled memory at or above the abstention threshold (any recalled memory when there is none)."""
    return outcome.top_score is not None and (abstain_below is None or outcome.top_score >= abstain_below)


def available(outcome: CaseOutcome) -> bool:
    """The accepted value was still in the window or among the memory's top k (what a reader could answer from)."""
    return bool(outcome.fact_in_window) or outcome.fact_rank is not None


def length_metrics(length: int, outcomes: Sequence[CaseOutcome], abstain_below: float | None = None) -> LengthMetrics:
    """The four metrics, the stale `miss` column and the retrieval-level metrics over one length's outcomes."""
    recall = [o for o in outcomes if o.kind == "recall"]
    stale = [o for o in outcomes if o.kind == "stale"]
    false = [o for o in outcomes if o.kind == "false-memory"]
    answerable = recall + stale
    ranked = all(o.recalled is not None for o in outcomes)
    placed = all(o.fact_in_window is not None for o in recall)
    return LengthMetrics(
        length=length,
        recall=rate(sum(o.verdict == "hit" for o in recall), len(recall)),
        staleness=rate(sum(o.verdict == "stale" for o in stale), len(stale)),
        false_recall=rate(sum(o.verdict != "abstained" for o in false), len(false)),
        abstention=rate(sum(o.verdict == "abstained" for o in answerable), len(answerable)),
        miss=rate(sum(o.verdict == "miss" for o in stale), len(stale)),
        retrieval_recall=rate(sum(o.fact_rank is not None for o in recall), len(recall)) if ranked else None,
        retrieval_staleness=rate(sum(superseded_first(o) for o in stale), len(stale)) if ranked else None,
        retrieval_false_recall=rate(sum(false_hit(o, abstain_below) for o in false), len(false)) if ranked else None,
        availability=rate(sum(available(o) for o in recall), len(recall)) if ranked and placed else None,
    )


@dataclass(frozen=True)
class Script:
    """The turns played before one probe and where the facts sit among them."""

    turns: list[tuple[str, str]]
    """(speaker, text) in order."""
    phrasing: int | None
    """Index of the planted phrasing (None for false-memory)."""
    fact: int | None
    """Turn index holding the accepted value: the planted phrasing, or a stale case's correction."""
    superseded: int | None
    """Turn index of a stale case's old value."""


def script(case: RecallCase, filler: Sequence[tuple[str, str]], seed: int) -> Script:
    """The turns played before the probe: distractors around the planted phrasing, filler, a stale case's correction."""
    rng = random.Random(f"{seed}:{case.id}:phrasing")
    distractors = [("user", text) for text in case.distractors]
    if case.kind == "false-memory":
        return Script(distractors + list(filler), None, None, None)
    phrasing = rng.randrange(len(case.phrasings))
    before = [d for d in distractors if rng.random() < 0.5]
    after = [d for d in distractors if d not in before]
    head = [*before, ("user", case.phrasings[phrasing]), *after]
    planted = len(before)
    if case.kind == "recall":
        return Script(head + list(filler), phrasing, planted, None)
    half = len(filler) // 2
    correction = ("user", case.corrections[rng.randrange(len(case.corrections))])
    turns = head + list(filler[:half]) + [correction] + list(filler[half:])
    return Script(turns, phrasing, len(head) + half, planted)


def _rank(recalled: Sequence[Turn], index: int | None) -> int | None:
    """1-based rank of turn `index` among the recalled turns, or None."""
    return next((r for r, t in enumerate(recalled, start=1) if index is not None and t.index == index), None)


def _digest(payload: object) -> str:
    canonical = json.dumps(payload, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def _check_config(config: SweepConfig) -> None:
    lengths = config.lengths
    if any(n < 0 for n in lengths) or list(lengths) != sorted(set(lengths)):
        raise RecallError(f"lengths: {list(lengths)} must be non-negative and strictly increasing, e.g. 10,40,100,250")


def _check_memory(name: str) -> None:
    if name == NO_MEMORY or name in RECALL_VARIANTS:
        return
    try:
        get_memory_system(name)
    except UnknownMemorySystemError:
        known = ", ".join(sorted([*MEMORY_SYSTEMS, *RECALL_VARIANTS]))
        raise RecallError(f"memory: unknown memory system {name!r}; use {known} or {NO_MEMORY}") from None


def _open_memory(config: SweepConfig, folder: Path) -> MemoryAdapter | None:
    if config.memory == NO_MEMORY:
        return None
    if config.memory in RECALL_VARIANTS:
        return RECALL_VARIANTS[config.memory](folder, config.embedder)
    return open_memory_system(config.memory, folder, embedder=config.embedder, scratch=True)


def _load(config: SweepConfig) -> tuple[tuple[RecallCase, ...], FillerSource]:
    folder = Path(config.cases_dir) if config.cases_dir else BUNDLED_CASES
    cases = load_cases(folder)
    if config.filler_dataset:
        return cases, locomo_filler(Path(config.filler_dataset), cases)
    return cases, authored_filler(load_filler(folder, cases))


def play_case(case: RecallCase, length: int, config: SweepConfig, filler: FillerSource,
              memory: MemoryAdapter | None, ask: Asker | None = None) -> CaseOutcome:
    """Plant, bury and probe one case at one length in `memory` (None: retention alone); score every sample.

    `ask` None: the offline reader, which reads the window and the recalled memories together
    (`reader.read_context`) and asserts the best match. The ranking the outcome's ranks and scores
    read is the memory's recall, or without memory the retained context ranked by the embedder
    (`reader.context_ranking`).
    """
    played = script(case, bury_order(filler, config.seed, case.id, length), config.seed)
    policy = make_policy(config.policy, config.window, config.summary_sentences)
    session = RecallSession(memory, f"recall:{case.id}.n{length}", policy, config.recall_k)
    for speaker, text in played.turns:
        session.add(speaker, text)
    context = session.context(case.probe)
    embedder = get_embedder(config.embedder)
    if memory is not None:
        ranking, scores = context.recalled, context.scores
    else:
        ranking, scores = context_ranking(case.probe, context.retained, embedder, config.recall_k)
    if ask is not None:
        answers = ask(case.probe, context.retained, context.recalled)
    else:
        read, similarity = read_context(case.probe, context.retained, context.recalled, context.scores, embedder,
                                        config.abstain_below)
        answers = [ranked_answer(read, similarity)]
    if not answers or not all(isinstance(a, str) for a in answers):
        raise RecallError(f"case {case.id!r} at length {length}: the ask step must return a non-empty list of texts, got {answers!r}")
    verdicts = tuple(score_answer(a, case.accept, case.reject) for a in answers)
    verdict = majority(verdicts)
    return CaseOutcome(
        case_id=case.id, kind=case.kind, length=length, phrasing=played.phrasing, verdict=verdict,
        passed=verdict == ("abstained" if case.kind == "false-memory" else "hit"),
        answer=answers[0][:500], sample_verdicts=verdicts,
        recalled=len(ranking), fact_rank=_rank(ranking, played.fact), stale_rank=_rank(ranking, played.superseded),
        top_score=scores[0] if scores else None,
        fact_in_window=None if played.fact is None else any(t.index == played.fact for t in context.retained),
    )


def run_sweep(config: SweepConfig, *, workdir: Path | None = None,
              progress: Callable[[CaseOutcome], None] | None = None,
              ask: Asker | None = None, memory_factory: MemoryFactory | None = None) -> SweepResult:
    """Run every case at every length of `config`; return the metrics, the knee and every outcome.

    Each case gets its own fresh store (one realm per length) in a temporary folder (inside
    `workdir` when given), closed after its last length and deleted at the end of the run. Raises
    ContractError for bad case or filler files, RecallError for a bad configuration, the memory
    registry's errors for an unknown or unavailable memory system, RecallModelError when the
    configured model cannot be asked (or a paid endpoint has no budget configuration), and
    BudgetStop when the budget guard refuses the model reader before its first request.

    `ask` replaces the configured ask step (reader or model) with any callable, e.g. an agent;
    `memory_factory` replaces the registry lookup of `config.memory` (which then only names the
    system in the result), for adapters that are not registered.
    """
    _check_config(config)
    if memory_factory is None:
        _check_memory(config.memory)
    cases, filler = _load(config)
    asker = None
    if config.model and ask is None:
        guard_model_reader(config.model.base_url, config.model.budget_config)
        asker = ChatModelAsker(config.model.base_url, config.model.model, samples=config.model.samples,
                               temperature=config.model.temperature)

    answer: Asker | None = ask or (asker.answers if asker is not None else None)

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
    by_length = {n: length_metrics(n, [o for o in outcomes if o.length == n], config.abstain_below) for n in config.lengths}
    knee = _knee(metric_curve(by_length, "recall"), config.knee_drop_points)
    retrieval_knee = _knee(metric_curve(by_length, "retrieval_recall"), config.knee_drop_points)
    return SweepResult(
        config=config, cases_digest=_digest([c.model_dump(mode="json") for c in cases]),
        filler=filler.name, filler_digest=_digest(filler.conversations), filler_dropped=filler.dropped,
        metrics_by_length=by_length, knee=knee, retrieval_knee=retrieval_knee, outcomes=tuple(outcomes),
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

