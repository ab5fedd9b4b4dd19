"""Ranking metrics over one recalled list, with binary relevance (any relevant key counts)."""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence


def first_rank(ranked: Sequence[str | None], relevant: Collection[str]) -> int | None:
    """1-based rank of the first relevant key in `ranked`, or None."""
    for rank, key in enumerate(ranked, start=1):
        if key is not None and key in relevant:
            return rank
    return None


def hit_at(ranked: Sequence[str | None], relevant: Collection[str], k: int) -> bool:
    """True when a relevant key is among the first `k`."""
    rank = first_rank(ranked, relevant)
    return rank is not None and rank <= k


def reciprocal_rank(ranked: Sequence[str | None], relevant: Collection[str]) -> float:
    """1 / rank of the first relevant key, 0 when none was recalled."""
    rank = first_rank(ranked, relevant)
    return 0.0 if rank is None else 1.0 / rank


def ndcg_at(ranked: Sequence[str | None], relevant: Collection[str], k: int) -> float:
    """nDCG@k with gain 1 per distinct relevant key (a repeated key gains nothing), log2 discount."""
    seen: set[str] = set()
    dcg = 0.0
    for rank, key in enumerate(ranked[:k], start=1):
        if key is not None and key in relevant and key not in seen:
            seen.add(key)
            dcg += 1.0 / math.log2(rank + 1)
    ideal = sum(1.0 / math.log2(rank + 1) for rank in range(1, min(len(relevant), k) + 1))
    return dcg / ideal if ideal else 0.0


def mean(values: Sequence[float]) -> float | None:
    """Arithmetic mean, None for no values (a rate over nothing is not zero)."""
    return sum(values) / len(values) if values else None
