"""The tabmill command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from tabmill.options import ReadOptions
from tabmill.reader import ReadError, read_table
from tabmill.render import render, stats


def one_char(text: str) -> str:
    if text == "\\t":
        return "\t"
    if len(text) != 1:
        raise argparse.ArgumentTypeError(f"the delimiter must be one character, not {text!r}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="tabmill")
    commands = parser.add_subparsers(dest="command", required=True)
    show = commands.add_parser("show", help="print the file as an aligned table")
    show.add_argument("file", type=Path)
    show.add_argument("--columns", help="comma-separated column names to show")
    show.add_argument("--limit", type=int, help="show at most this many rows")
    show.add_argument("--delimiter", type=one_char, default=",", help="field separator (default ,)")
    summary = commands.add_parser("stats", help="summarise a numeric column")
    summary.add_argument("file", type=Path)
    summary.add_argument("--column", required=True)
    summary.add_argument("--delimiter", type=one_char, default=",", help="field separator (default ,)")
    return parser


def options_from(args: argparse.Namespace) -> ReadOptions:
    columns = getattr(args, "columns", None)
    return ReadOptions(
        columns=tuple(c.strip() for c in columns.split(",")) if columns else (),
        limit=getattr(args, "limit", None),
        delimiter=args.delimiter,
    )


def main(argv: list[str] | None = None, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "show":
            header, rows = read_table(args.file, options_from(args))
            print(render(header, rows), file=out)
            return 0
        header, rows = read_table(args.file, ReadOptions(columns=(args.column,), delimiter=args.delimiter))
    except ReadError as error:
        print(f"tabmill: {error}", file=err)
        return 1
    try:
        values = [float(row[0]) for row in rows if row[0].strip()]
    except ValueError as error:
        print(f"tabmill: column {args.column} is not numeric ({error})", file=err)
        return 1
    for key, value in stats(values).items():
        print(f"{key}: {value:g}", file=out)
    return 0
