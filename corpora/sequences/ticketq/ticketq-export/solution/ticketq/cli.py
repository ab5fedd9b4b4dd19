"""The ticketq command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from ticketq import store


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="ticketq")
    sub = parser.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="open a ticket")
    add.add_argument("--db", type=Path, required=True)
    add.add_argument("title")
    count = sub.add_parser("count", help="count tickets")
    count.add_argument("--db", type=Path, required=True)
    count.add_argument("--status", choices=["open", "closed"])
    export = sub.add_parser("export", help="print every ticket as CSV")
    export.add_argument("--db", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None, stdout: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    tickets = store.load(args.db)
    if args.command == "add":
        ticket = store.Ticket(id=store.next_id(tickets), title=args.title)
        store.save(args.db, tickets + [ticket])
        print(ticket.id, file=stdout)
    elif args.command == "count":
        print(sum(1 for t in tickets if args.status in (None, t.status)), file=stdout)
    elif args.command == "export":
        print("id,title,status", file=stdout)
        for ticket in sorted(tickets, key=lambda t: t.id):
            print(f"{store.label(ticket.id)},{ticket.title},{ticket.status}", file=stdout)
    return 0
