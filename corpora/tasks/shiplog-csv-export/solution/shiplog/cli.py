"""shiplog list|stats EXPORT: print a report as a text table."""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path
from typing import TextIO

from shiplog.reports import LIST_HEADER, STATS_HEADER, list_rows, stats_rows, table
from shiplog.store import load


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="shiplog")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, text in (("list", "every shipment, oldest first"), ("stats", "shipments and weight per carrier")):
        command = commands.add_parser(name, help=text)
        command.add_argument("export", type=Path, help="the warehouse's JSON lines export")
        command.add_argument("--csv", action="store_true", help="print CSV for the ops spreadsheet instead of a table")
    return parser


def main(argv: list[str] | None = None, stdout: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    shipments = load(args.export)
    header, rows = (LIST_HEADER, list_rows(shipments)) if args.command == "list" else (STATS_HEADER, stats_rows(shipments))
    if args.csv:
        writer = csv.writer(stdout, delimiter=";", lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[v.replace(".", ",") if k.endswith("_kg") else v for k, v in zip(header, row)] for row in rows])
    else:
        print(table(header, rows), file=stdout)
    return 0
