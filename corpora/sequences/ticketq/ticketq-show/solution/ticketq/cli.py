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
    show = sub.add_parser("show", help="print one ticket")
    show.add_argument("--db", type=Path, required=True)
    show.add_argument("id", type=int)
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
    elif args.command == "show":
        ticket = store.find(tickets, args.id)
        print(f"{store.label(ticket.id)}  {ticket.title}  {ticket.status}", file=stdout)
    return 0
