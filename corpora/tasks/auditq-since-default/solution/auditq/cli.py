"""The auditq command line."""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import TextIO

from auditq.events import read_events
from auditq.query import Query, actor_counts, search
from auditq.window import DEFAULT_WINDOW, parse_window


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="auditq")
    commands = parser.add_subparsers(dest="command", required=True)
    find = commands.add_parser("search", help="print matching events, newest first")
    find.add_argument("--log", type=Path, required=True)
    find.add_argument("--actor")
    find.add_argument("--action", help="action prefix, e.g. 'user.'")
    find.add_argument("--limit", type=int)
    find.add_argument("--since", type=parse_window, default=parse_window(DEFAULT_WINDOW),
                      help=f"only events newer than this window (default {DEFAULT_WINDOW})")
    actors = commands.add_parser("actors", help="count events per actor")
    actors.add_argument("--log", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None, *, now: datetime | None = None, out: TextIO = sys.stdout) -> int:
    """Run the command line; `now` is the reference time (the current UTC time by default)."""
    args = build_parser().parse_args(argv)
    now = now or datetime.now(timezone.utc)
    if not args.log.is_file():
        print(f"auditq: no such log: {args.log}", file=sys.stderr)
        return 2
    events = read_events(args.log)
    if args.command == "actors":
        for actor, count in actor_counts(events):
            print(f"{count:6d}  {actor}", file=out)
        return 0
    query = Query(actor=args.actor, action_prefix=args.action, not_before=now - args.since, limit=args.limit)
    for event in search(events, query):
        print(event.to_json(), file=out)
    return 0
