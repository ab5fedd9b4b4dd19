"""Dates in timestamps and queries, and the store's date focus."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import pytest

from tasks_lib.memory.adapter import MemoryItem
from tasks_lib.memory.reference.dates import (
    LAG_DAYS,
    LEAD_DAYS,
    Period,
    in_window,
    parse_date,
    query_period,
)
from tasks_lib.memory.reference.store import SqliteMemoryStore


@pytest.mark.parametrize(
    ("timestamp", "expected"),
    [
        ("1:56 pm on 8 May, 2023", date(2023, 5, 8)),  # LoCoMo
        ("2023/05/20 (Sat) 02:21", date(2023, 5, 20)),  # LongMemEval
        ("2023-05-08T13:56:00Z", date(2023, 5, 8)),
        ("May 8th, 2023", date(2023, 5, 8)),
        ("8 of May 2023", date(2023, 5, 8)),
        ("Sept. 3, 2021", date(2021, 9, 3)),
        ("31 February 2023", None),
        ("May 2023", None),
        ("yesterday", None),
    ],
)
def test_parse_date(timestamp: str, expected: date | None) -> None:
    assert parse_date(timestamp) == expected


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What movie did Joanna watch on 1 May, 2022?", Period(date(2022, 5, 1), date(2022, 5, 1))),
        ("Which city was Calvin at on October 3, 2023?", Period(date(2023, 10, 3), date(2023, 10, 3))),
        ("Which book did Jolene read in January 2023?", Period(date(2023, 1, 1), date(2023, 1, 31))),
        ("What happened in February 2024?", Period(date(2024, 2, 1), date(2024, 2, 29))),
        ("What did Sam do towards the end of summer 2023?", Period(date(2023, 6, 1), date(2023, 8, 31))),
        ("Where was she in winter 2022?", Period(date(2022, 12, 1), date(2023, 2, 28))),
        ("Which cities did Dave travel to in 2023?", Period(date(2023, 1, 1), date(2023, 12, 31))),
        ("Between 2 May, 2023 and 9 June, 2023?", Period(date(2023, 5, 2), date(2023, 6, 9))),
        ("in 2021, on 4 July 2023", Period(date(2023, 7, 4), date(2023, 7, 4))),  # the day wins over the year
        ("What may Caroline do next?", None),
        ("Which port did build 2023-x use?", None),
    ],
)
def test_query_period(query: str, expected: Period | None) -> None:
    assert query_period(query) == expected


def test_window_edges() -> None:
    period = Period(date(2023, 5, 10), date(2023, 5, 12))
    assert in_window(date(2023, 5, 10 - LEAD_DAYS), period) and not in_window(date(2023, 5, 9 - LEAD_DAYS), period)
    assert in_window(date(2023, 5, 12 + LAG_DAYS), period) and not in_window(date(2023, 5, 13 + LAG_DAYS), period)
    assert not in_window(None, period)


def test_a_named_date_raises_the_memory_from_that_day(tmp_path: Path) -> None:
    store = SqliteMemoryStore(tmp_path / "m.sqlite")
    store.create_realm("test:dates")
    ids = store.remember(
        "test:dates",
        [
            MemoryItem(text="We watched a movie about sharks.", speaker="Joanna", timestamp="7:00 pm on 1 May, 2022", session="s1"),
            MemoryItem(text="We watched a movie about space.", speaker="Joanna", timestamp="7:00 pm on 1 September, 2022", session="s2"),
        ],
    )
    undated = store.recall("test:dates", "Which movie did Joanna watch?", 2)
    assert [h.id for h in undated] == [ids[1], ids[0]]  # equal scores: newest first
    dated = store.recall("test:dates", "Which movie did Joanna watch on 1 May, 2022?", 2)
    assert [h.id for h in dated] == [ids[0], ids[1]]
    assert dated[0].score > dated[1].score
    store.close()
