"""Every question's ranking as a Parquet table, so anyone can re-score a run with upstream's code.

One row per recalled turn, best first: `rank` from 1, the turn's dataset id (LoCoMo `D<s>:<t>`,
LongMemEval `<session id>_<turn number>` as upstream numbers them), its own session, the session
the official session level reads it under (`noans:<session>` for a non-evidence turn of an
evidence session, `metrics.official_sessions`), whether it is an evidence turn, and the memory
system's score. A question whose recall returned no turn has one row with rank 0 and no turn, so
no scored question is missing from the table. The corpus (every indexed turn of a group) is the
group's turns as the dataset's loader reads them.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from dataclasses import astuple, dataclass

import pyarrow as pa
import pyarrow.parquet as pq

RANKINGS_SCHEMA = pa.schema(
    [
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("group_id", pa.string(), nullable=False),
        pa.field("slice", pa.string(), nullable=False),
        pa.field("rank", pa.int32(), nullable=False),
        pa.field("turn_id", pa.string()),
        pa.field("session_id", pa.string()),
        pa.field("official_session_id", pa.string()),
        pa.field("relevant", pa.bool_()),
        pa.field("score", pa.float64()),
    ]
)
"""Columns of a rankings table, in order (see the module docstring)."""


@dataclass(frozen=True)
class RankingRow:
    """One recalled turn of one question's ranking (rank 0 and None elsewhere: the recall returned nothing)."""

    question_id: str
    group_id: str
    slice: str
    rank: int
    turn_id: str | None
    session_id: str | None
    official_session_id: str | None
    relevant: bool | None
    score: float | None


def ranking_rows(
    group_id: str,
    question_id: str,
    slice_name: str,
    ranked: Sequence[tuple[str, float]],
    relevant: frozenset[str],
    session_of: Mapping[str, str],
    official: Mapping[str, str],
) -> list[RankingRow]:
    """The rows of one question's ranking of (turn id, score), best first."""
    if not ranked:
        return [RankingRow(question_id, group_id, slice_name, 0, None, None, None, None, None)]
    return [
        RankingRow(question_id, group_id, slice_name, rank, turn, session_of[turn], official[turn], turn in relevant, float(score))
        for rank, (turn, score) in enumerate(ranked, start=1)
    ]


def rankings_table(rows: Sequence[RankingRow]) -> pa.Table:
    """`rows` as a table of `RANKINGS_SCHEMA`."""
    columns: list[Sequence[object]] = list(zip(*(astuple(r) for r in rows))) if rows else [[] for _ in RANKINGS_SCHEMA]
    return pa.Table.from_arrays([pa.array(list(c), type=f.type) for c, f in zip(columns, RANKINGS_SCHEMA)], schema=RANKINGS_SCHEMA)


def rankings_parquet(rows: Sequence[RankingRow]) -> bytes:
    """`rows` as the bytes of one Parquet file."""
    buffer = io.BytesIO()
    pq.write_table(rankings_table(rows), buffer)
    return buffer.getvalue()
