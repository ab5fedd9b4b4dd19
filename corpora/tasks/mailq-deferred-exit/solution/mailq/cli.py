"""The mailq command line."""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from pathlib import Path
from typing import Callable, TextIO

from mailq.queue import load_queue, move_to_failed, remove
from mailq.relay import Relay, SpoolRelay

EXIT_OK = 0
EXIT_REJECTED = 1
EXIT_USAGE = 2
EXIT_DEFERRED = 13


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mailq")
    commands = parser.add_subparsers(dest="command", required=True)
    flush = commands.add_parser("flush", help="hand every queued message to the relay")
    flush.add_argument("--queue", type=Path, required=True, help="queue directory")
    flush.add_argument("--pickup", type=Path, required=True, help="the MTA's pickup directory")
    commands.add_parser("version", help="print the version")
    return parser


def flush(queue: Path, relay: Relay, stderr: TextIO) -> int:
    tally: Counter[str] = Counter()
    for message in load_queue(queue):
        verdict = relay.send(message)
        tally[verdict] += 1
        if verdict == "sent":
            remove(message)
        elif verdict == "rejected":
            target = move_to_failed(message)
            print(f"mailq: {message.id} to {message.recipient} rejected, kept in {target}", file=stderr)
    if tally["rejected"]:
        return EXIT_REJECTED
    if tally["deferred"]:
        print(f"mailq: {tally['deferred']} message(s) deferred by the relay, left in the queue", file=stderr)
        return EXIT_DEFERRED
    return EXIT_OK


def main(argv: list[str] | None = None, *, relay_factory: Callable[[Path], Relay] = SpoolRelay, stderr: TextIO = sys.stderr) -> int:
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return EXIT_USAGE if exit_.code else EXIT_OK
    if args.command == "version":
        from mailq import __version__

        print(__version__)
        return EXIT_OK
    if not args.queue.is_dir():
        print(f"mailq: {args.queue}: no such queue directory", file=stderr)
        return EXIT_USAGE
    return flush(args.queue, relay_factory(args.pickup), stderr)
