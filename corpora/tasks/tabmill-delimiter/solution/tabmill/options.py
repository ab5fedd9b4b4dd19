"""Options that control how a file is read."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ReadOptions:
    """How to read a CSV file."""

    encoding: str = "utf-8-sig"
    delimiter: str = ","
    columns: tuple[str, ...] = ()
    limit: int | None = None
