"""The logship command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, TextIO

from logship import status
from logship.shipper import ship
from logship.spool import read_records, spool_files
from logship.transport import OutboxTransport, Transport


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="logship")
    commands = parser.add_subparsers(dest="command", required=True)
    send = commands.add_parser("send", help="ship spooled records to the collector")
    send.add_argument("--spool", type=Path, required=True, help="spool directory")
    send.add_argument("--collector", type=Path, required=True, help="collector outbox file")
    send.add_argument("--batch-size", type=int, default=500, help="records per batch")
    return parser


def main(
    argv: list[str] | None = None,
    *,
    transport_factory: Callable[[Path], Transport] = OutboxTransport,
    stderr: TextIO = sys.stderr,
) -> int:
    """Run the command line and return the process exit status."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        return status.EXIT_USAGE if exit_.code else status.EXIT_OK
    return send(args.spool, transport_factory(args.collector), args.batch_size, stderr)


def send(spool: Path, transport: Transport, batch_size: int, stderr: TextIO) -> int:
    """Ship every closed spool file and delete the ones fully accepted."""
    if not spool.is_dir():
        print(f"logship: spool directory {spool} does not exist", file=stderr)
        return status.EXIT_USAGE
    files = spool_files(spool)
    records = [record for path in files for record in read_records(path)]
    report = ship(records, transport, batch_size)
    for error in report.errors:
        print(f"logship: {error}", file=stderr)
    for path in files:
        if path not in report.incomplete_sources:
            path.unlink()
    if report.nothing_delivered:
        return status.EXIT_FAILED
    if report.rejected or report.errors:
        undelivered = report.sent - report.accepted
        print(f"logship: {undelivered} of {report.sent} records were not accepted", file=stderr)
        return status.EXIT_PARTIAL
    return status.EXIT_OK
