"""The ledgerlite command line."""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path
from typing import TextIO

from ledgerlite.books import BooksError, read_invoices, read_ledger
from ledgerlite.export import aging_json, balance_json
from ledgerlite.render import aging_table, balance_table
from ledgerlite.reports import aging, balances


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ledgerlite")
    commands = parser.add_subparsers(dest="command", required=True)
    balance = commands.add_parser("balance", help="balance per account")
    balance.add_argument("--ledger", type=Path, required=True)
    balance.add_argument("--json", action="store_true", help="print JSON for the finance importer")
    ages = commands.add_parser("aging", help="open invoices by days past due")
    ages.add_argument("--invoices", type=Path, required=True)
    ages.add_argument("--as-of", type=date.fromisoformat, default=date.today())
    ages.add_argument("--json", action="store_true", help="print JSON for the finance importer")
    return parser


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    try:
        if args.command == "balance":
            totals = balances(read_ledger(args.ledger))
            print(balance_json(totals) if args.json else balance_table(totals), file=out)
        else:
            report = aging(read_invoices(args.invoices), args.as_of)
            print(aging_json(report, args.as_of) if args.json else aging_table(report), file=out)
    except (OSError, BooksError) as error:
        print(f"ledgerlite: {error}", file=sys.stderr)
        return 1
    return 0
