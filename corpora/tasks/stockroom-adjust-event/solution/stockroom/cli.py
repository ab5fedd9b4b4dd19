"""The stockroom command line."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from stockroom import journal
from stockroom.events import ItemReceived, ItemShipped, StockAdjusted
from stockroom.projector import project


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="stockroom")
    commands = parser.add_subparsers(dest="command", required=True)
    for name in ("receive", "ship"):
        cmd = commands.add_parser(name)
        cmd.add_argument("--journal", type=Path, required=True)
        cmd.add_argument("sku")
        cmd.add_argument("qty", type=int)
        if name == "ship":
            cmd.add_argument("--order", default="")
    adjust = commands.add_parser("adjust")
    adjust.add_argument("--journal", type=Path, required=True)
    adjust.add_argument("sku")
    adjust.add_argument("delta", type=int)
    adjust.add_argument("--reason", default="")
    levels = commands.add_parser("levels")
    levels.add_argument("--journal", type=Path, required=True)
    return parser


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = build_parser().parse_args(argv)
    if args.command in ("receive", "ship") and args.qty <= 0:
        print("stockroom: qty must be positive", file=sys.stderr)
        return 2
    if args.command == "receive":
        journal.append(args.journal, ItemReceived(args.sku, args.qty))
    elif args.command == "ship":
        journal.append(args.journal, ItemShipped(args.sku, args.qty, args.order))
    elif args.command == "adjust":
        journal.append(args.journal, StockAdjusted(args.sku, args.delta, args.reason))
    else:
        for sku, qty in sorted(project(journal.replay(args.journal)).items()):
            print(f"{sku}\t{qty}", file=out)
    return 0
