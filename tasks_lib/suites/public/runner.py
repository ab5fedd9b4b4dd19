"""Run a memory system over evaluation groups: one disposable store per group, every question scored.

`run_locomo` and `run_longmemeval` are the library entry points (the CLI and Prefect flows call
them). `adapter_factory(folder)` must return a new, empty `MemoryAdapter` keeping its data under
`folder`; the folder is a temporary directory deleted after the group, whatever happens. Given a
`rankings` list, each question's ranking is appended to it (`rankings.RankingRow`), to be stored as
Parquet beside the result (`rankings.rankings_parquet`).
"""

from __future__ import annotations

import hashlib
import re
import resource
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MAX_BATCH, MAX_K, MemoryAdapter, MemoryItem
from tasks_lib.memory.registry import open_memory_system
from tasks_lib.suites.public.groups import EvalGroup, QuirkLog
from tasks_lib.suites.public.locomo import DEFAULT_CATEGORIES, load_locomo
from tasks_lib.suites.public.longmemeval import load_longmemeval
from tasks_lib.suites.public.metrics import (
    KS,
    LEVEL_DEFINITIONS,
    LEVELS,
    METRICS,
    OFFICIAL_SESSION_LEVEL,
    QuestionScores,
    mean_scores,
    official_sessions,
    score_question,
    short_ranking,
)
from tasks_lib.suites.public.rankings import RankingRow, ranking_rows
from tasks_lib.suites.public.result import (
    LevelDefinition,
    MetricValue,
    PublicResult,
    QuirkCount,
    SliceScores,
)

AdapterFactory = Callable[[Path], MemoryAdapter]
"""Makes a new, empty memory adapter keeping its data under the given folder."""

DEFAULT_DEPTH = 50
"""Hits asked of each recall by default."""


def registry_factory(name: str, embedder: str = "hashed") -> AdapterFactory:
    """A factory opening registered memory system `name` (see `tasks_lib.memory.registry`)."""
    return lambda folder: open_memory_system(name, folder, embedder=embedder, scratch=True)


def _realm(group_id: str) -> str:
    return "public:" + (re.sub(r"[^a-z0-9._-]", "-", group_id.lower()).lstrip("._-") or "group")


class _Costs:
    """Running totals over groups."""

    def __init__(self) -> None:
        self.index_seconds = 0.0
        self.latencies: list[float] = []
        self.storage_bytes = 0
        self.embedding_calls = 0
        self.llm_calls = 0
        self.short_rankings = 0


def _run_group(
    group: EvalGroup, factory: AdapterFactory, ks: Sequence[int], depth: int, costs: _Costs, rankings: list[RankingRow] | None
) -> list[QuestionScores]:
    corpus = [t.turn_id for t in group.turns]
    session_of = {t.turn_id: t.session for t in group.turns}
    rows = []
    with tempfile.TemporaryDirectory(prefix="memtrial-public-") as tmp:
        adapter = factory(Path(tmp))
        try:
            realm = _realm(group.group_id)
            adapter.create_realm(realm)
            turn_of: dict[str, str] = {}
            started = time.perf_counter()
            for session in dict.fromkeys(t.session for t in group.turns):
                batch = [t for t in group.turns if t.session == session]
                for at in range(0, len(batch), MAX_BATCH):
                    part = batch[at : at + MAX_BATCH]
                    items = [MemoryItem(text=t.text, speaker=t.speaker, timestamp=t.timestamp, session=t.session) for t in part]
                    turn_of.update(zip(adapter.remember(realm, items), (t.turn_id for t in part)))
            costs.index_seconds += time.perf_counter() - started
            for q in group.questions:
                started = time.perf_counter()
                hits = adapter.recall(realm, q.text, depth)
                costs.latencies.append(time.perf_counter() - started)
                scored = [(turn_of[h.id], h.score) for h in hits if h.id in turn_of]
                ranked = [t for t, _ in scored]
                official = official_sessions(session_of, q.relevant_turns)
                if short_ranking(ranked, corpus, official, max(ks)):
                    costs.short_rankings += 1
                if rankings is not None:
                    rankings.extend(ranking_rows(group.group_id, q.question_id, q.slice, scored, q.relevant_turns, session_of, official))
                rows.append(score_question(group.group_id, q.question_id, q.slice, ranked, q.relevant_turns, corpus, session_of, ks))
            spent = adapter.accounting()
            costs.storage_bytes += spent.storage_bytes
            costs.embedding_calls += spent.embedding_calls
            costs.llm_calls += spent.llm_calls
        finally:
            adapter.close()
    return rows


def _slice(name: str, rows: Sequence[QuestionScores], ks: Sequence[int]) -> SliceScores:
    means = mean_scores(rows)
    values = tuple(
        MetricValue(level=level, metric=metric, k=k, value=min(1.0, max(0.0, means[(level, metric, k)])))  # type: ignore[arg-type]
        for level in LEVELS
        for metric in METRICS
        for k in ks
        if (level, metric, k) in means
    )
    return SliceScores(name=name, questions=len(rows), scores=values)


def _levels(rows: Sequence[QuestionScores]) -> tuple[LevelDefinition, ...]:
    computed = {level for r in rows[:1] for level, _, _ in r.values} or set(LEVELS)
    return tuple(
        LevelDefinition(level=level, official=level in ("turn", OFFICIAL_SESSION_LEVEL), definition=LEVEL_DEFINITIONS[level])  # type: ignore[arg-type]
        for level in LEVELS
        if level in computed
    )


_QUESTION_RULES = frozenset({
    "duplicate_question_id", "abstention_skipped", "haystack_lists_unequal", "answer_session_not_in_haystack", "no_relevant_turn_skipped",
    "category_not_scored", "category_unknown", "question_without_evidence_skipped",
})
"""Quirk rules (of either dataset) that leave a question or record unscored."""


def _notes(rows: Sequence[QuestionScores], log: QuirkLog) -> tuple[str, ...]:
    if rows:
        return ()
    skipped = [f"{rule} {log[rule]}" for rule in log.rules if log[rule] and rule in _QUESTION_RULES]
    why = f" (skipped by rule: {', '.join(skipped)})" if skipped else ""
    abstentions = log["abstention_skipped"] if "abstention_skipped" in log.rules else 0
    tail = (
        f"; the file's {abstentions} abstention record(s) have nothing to retrieve, and upstream leaves them out of its averages too"
        if abstentions
        else ""
    )
    return (f"no question was scored{why}{tail}: no score is reported",)


def _quantile_ms(values: Sequence[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return 1000 * values[0]
    return 1000 * statistics.quantiles(values, n=100, method="inclusive")[round(q * 100) - 1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def run_groups(
    dataset: str,
    files: Sequence[Path],
    groups: Sequence[EvalGroup],
    log: QuirkLog,
    factory: AdapterFactory,
    memory: str,
    ks: Sequence[int] = KS,
    depth: int = DEFAULT_DEPTH,
    started: tuple[float, float] | None = None,
    rankings: list[RankingRow] | None = None,
) -> PublicResult:
    """Index and question every group in its own store; the scores by slice, the quirks and the costs.

    `started` is (perf_counter, process_time) when the run began (default: now), so loading counts.
    Each question's ranking is appended to `rankings` when given. With no question scored (e.g. a
    file of abstention records only) the result has zero questions, no scores and a note saying why.
    """
    ks = tuple(sorted(set(ks)))
    if not ks or ks[0] < 1 or ks[-1] > MAX_K:
        raise MemtrialError(f"ks: {ks} given; give cut-offs between 1 and {MAX_K}")
    depth = min(MAX_K, max(depth, ks[-1]))
    wall, cpu = (time.perf_counter(), time.process_time()) if started is None else started
    costs = _Costs()
    rows: list[QuestionScores] = []
    for group in groups:
        rows += _run_group(group, factory, ks, depth, costs, rankings)
    names = list(dict.fromkeys(sorted(r.slice for r in rows)))
    slices = (_slice("overall", rows, ks), *(_slice(n, [r for r in rows if r.slice == n], ks) for n in names))
    return PublicResult(
        dataset=dataset,  # type: ignore[arg-type]
        dataset_files=tuple(str(f) for f in files),
        dataset_sha256=tuple(_sha256(f) for f in files),
        memory=memory,
        ks=ks,
        recall_depth=depth,
        groups=len(groups),
        questions=len(rows),
        levels=_levels(rows),
        slices=slices,
        quirks=tuple(QuirkCount(rule=r, count=log[r], description=d) for r, d in log.rules.items()),
        short_rankings=costs.short_rankings,
        notes=_notes(rows, log),
        index_seconds=round(costs.index_seconds, 3),
        query_p50_ms=round(_quantile_ms(costs.latencies, 0.5), 3),
        query_p95_ms=round(_quantile_ms(costs.latencies, 0.95), 3),
        storage_bytes=costs.storage_bytes,
        embedding_calls=costs.embedding_calls,
        llm_calls=costs.llm_calls,
        wall_seconds=round(time.perf_counter() - wall, 3),
        cpu_seconds=round(time.process_time() - cpu, 3),
        peak_rss_mib=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    )


def run_locomo(
    path: Path,
    adapter_factory: AdapterFactory,
    ks: Sequence[int] = KS,
    *,
    memory: str = "custom",
    limit: int | None = None,
    categories: Sequence[int] = DEFAULT_CATEGORIES,
    depth: int = DEFAULT_DEPTH,
    rankings: list[RankingRow] | None = None,
) -> PublicResult:
    """LoCoMo: one store per conversation (the first `limit`), questions of `categories` scored; rankings appended to `rankings`."""
    started = (time.perf_counter(), time.process_time())
    groups, log = load_locomo(Path(path), categories, limit)
    return run_groups("locomo", [Path(path)], groups, log, adapter_factory, memory, ks, depth, started, rankings)


def run_longmemeval(
    paths: Sequence[Path],
    adapter_factory: AdapterFactory,
    ks: Sequence[int] = KS,
    *,
    memory: str = "custom",
    limit: int | None = None,
    roles: Sequence[str] = ("user",),
    depth: int = DEFAULT_DEPTH,
    rankings: list[RankingRow] | None = None,
) -> PublicResult:
    """LongMemEval: one store per scored record (the first `limit`), turns of `roles` indexed; rankings appended to `rankings`."""
    started = (time.perf_counter(), time.process_time())
    files = [Path(p) for p in paths]
    groups, log = load_longmemeval(files, roles, limit)
    return run_groups("longmemeval", files, groups, log, adapter_factory, memory, ks, depth, started, rankings)
