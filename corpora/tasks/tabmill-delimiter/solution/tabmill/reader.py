"""Reading CSV files into a header and rows."""

from __future__ import annotations

import csv
from pathlib import Path

from tabmill.options import ReadOptions


class ReadError(Exception):
    """The file cannot be read as a table."""


def read_table(path: Path, options: ReadOptions) -> tuple[list[str], list[list[str]]]:
    """Return the (selected) header and rows of `path`."""
    try:
        with path.open(newline="", encoding=options.encoding) as handle:
            rows = list(csv.reader(handle, delimiter=options.delimiter))
    except (OSError, UnicodeDecodeError) as error:
        raise ReadError(f"{path}: {error}") from None
    if not rows:
        raise ReadError(f"{path}: file is empty")
    header, body = rows[0], rows[1:]
    if options.columns:
        missing = [c for c in options.columns if c not in header]
        if missing:
            raise ReadError(f"{path}: no column named {', '.join(missing)}")
        picks = [header.index(c) for c in options.columns]
        header = [header[i] for i in picks]
        body = [[row[i] if i < len(row) else "" for i in picks] for row in body]
    if options.limit is not None:
        body = body[: options.limit]
    return header, body
