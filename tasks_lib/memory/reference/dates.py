"""Calendar dates in memory timestamps and the period a query names, for date-aware ranking.

A memory's timestamp is free text (`1:56 pm on 8 May, 2023`, `2023-05-08T13:56`,
`2023/05/20 (Sat) 02:21`); `parse_date` finds the calendar day in it. A query may name a day
(`on 3 June, 2023`, `May 8, 2023`, `2023-05-08`), a month (`in October 2023`), a season
(`summer 2023`) or a year (`in 2022`); `query_period` turns the most precise of those into a
closed range of days. `in_window` then says whether a memory's day falls in that range widened
by LEAD_DAYS before and LAG_DAYS after: people mention an event on the day, or report it in the
days after ("last Friday", "two weeks ago"), and announce plans shortly before.
"""

from __future__ import annotations

import calendar
import re
from datetime import date, timedelta
from functools import lru_cache
from typing import NamedTuple

LEAD_DAYS = 7
"""Days before a named period whose memories still count as about it (plans announced ahead)."""

LAG_DAYS = 14
"""Days after a named period whose memories still count as about it (events reported later)."""

_MONTHS = {name.casefold(): number for number, name in enumerate(calendar.month_name) if name}
_MONTHS.update({name.casefold(): number for number, name in enumerate(calendar.month_abbr) if name})
_MONTHS["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"

_DAY_PATTERNS = (
    re.compile(rf"(?<!\d){_YEAR}[-/](?P<mon>[01]?\d)[-/]{_DAY.replace('(?:st|nd|rd|th)?', '')}(?!\d)"),
    re.compile(rf"(?<![\w]){_DAY}(?:\s+of)?\s+{_MONTH},?\s+{_YEAR}(?!\d)", re.IGNORECASE),
    re.compile(rf"(?<![\w]){_MONTH}\s+{_DAY},?\s+{_YEAR}(?!\d)", re.IGNORECASE),
)
_MONTH_PATTERN = re.compile(rf"(?<![\w]){_MONTH}(?:\s+of)?,?\s+{_YEAR}(?!\d)", re.IGNORECASE)
_SEASON_PATTERN = re.compile(rf"(?<![\w])(?P<season>spring|summer|autumn|fall|winter)(?:\s+of)?,?\s+{_YEAR}(?!\d)", re.IGNORECASE)
_YEAR_PATTERN = re.compile(rf"(?<![\w/-]){_YEAR}(?![\w/-])")

_SEASONS = {"spring": (3, 5), "summer": (6, 8), "autumn": (9, 11), "fall": (9, 11), "winter": (12, 2)}
"""Northern-hemisphere meteorological seasons: first and last month (winter runs into next year)."""


class Period(NamedTuple):
    """A closed range of days a query names."""

    start: date
    end: date


def _day_match(match: re.Match[str]) -> date | None:
    month = int(match["mon"]) if "mon" in match.groupdict() and match["mon"] else _MONTHS[match["month"].casefold()]
    try:
        return date(int(match["year"]), month, int(match["day"]))
    except ValueError:  # 31 February and the like: not a date
        return None


def _days(text: str) -> list[tuple[int, int, date]]:
    """(start, end, day) of every calendar day written in `text`."""
    found = []
    for pattern in _DAY_PATTERNS:
        for match in pattern.finditer(text):
            day = _day_match(match)
            if day is not None:
                found.append((match.start(), match.end(), day))
    return sorted(found)


@lru_cache(maxsize=65_536)
def parse_date(timestamp: str) -> date | None:
    """The first calendar day written in a timestamp, or None when it names no full date."""
    days = _days(timestamp)
    return days[0][2] if days else None


def _month_end(year: int, month: int) -> date:
    return date(year, month, calendar.monthrange(year, month)[1])


def query_period(query: str) -> Period | None:
    """The period the query names (a day, else a month, else a season, else a year), or None.

    Several mentions of the same precision give their overall span; a less precise mention is
    ignored when a more precise one exists, and a year inside a full date is not a year mention.
    """
    days = _days(query)
    if days:
        return Period(min(d for *_, d in days), max(d for *_, d in days))
    months = [(int(m["year"]), _MONTHS[m["month"].casefold()]) for m in _MONTH_PATTERN.finditer(query)]
    if months:
        return Period(date(*min(months), 1), _month_end(*max(months)))
    seasons = []
    for match in _SEASON_PATTERN.finditer(query):
        first, last = _SEASONS[match["season"].casefold()]
        year = int(match["year"])
        seasons.append((date(year, first, 1), _month_end(year + (last < first), last)))
    if seasons:
        return Period(min(s for s, _ in seasons), max(e for _, e in seasons))
    years = [int(m["year"]) for m in _YEAR_PATTERN.finditer(query)]
    if years:
        return Period(date(min(years), 1, 1), date(max(years), 12, 31))
    return None


def in_window(day: date | None, period: Period) -> bool:
    """Whether `day` lies in `period` widened by LEAD_DAYS before and LAG_DAYS after."""
    return day is not None and period.start - timedelta(days=LEAD_DAYS) <= day <= period.end + timedelta(days=LAG_DAYS)
