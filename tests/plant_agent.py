"""A planting agent for tests: copies files into the workspace, swaps paths for symlinks, probes host paths.

Run as a `command` agent (stdlib only, in the sandbox, workspace as cwd); operations run in order:

    python3 plant_agent.py --copy SRC DEST --symlink TARGET DEST --probe PATH

`--copy` copies SRC (a file mounted into the sandbox) to workspace path DEST; `--symlink` replaces
DEST (file or whole folder) by a symlink to TARGET; `--probe` tries to read PATH (a file, or every
file under a folder) and prints what it got. Every step prints one line saying what happened.
"""

from __future__ import annotations

import argparse
import os
import shutil
from pathlib import Path


def read_any(path: Path) -> str:
    """The text of `path`, or of every file under it."""
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
        if not files:
            raise FileNotFoundError(f"nothing readable under {path}")
        return "; ".join(f"{p}: {p.read_text(errors='replace')}" for p in files)
    return path.read_text(errors="replace")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--copy", nargs=2, action="append", default=[], metavar=("SRC", "DEST"))
    parser.add_argument("--symlink", nargs=2, action="append", default=[], metavar=("TARGET", "DEST"))
    parser.add_argument("--probe", action="append", default=[])
    args = parser.parse_args()
    for src, dest in args.copy:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dest)
        print(f"[copy {dest}] ok")
    for target, dest in args.symlink:
        if os.path.isdir(dest) and not os.path.islink(dest):
            shutil.rmtree(dest)
        elif os.path.lexists(dest):
            os.remove(dest)
        os.symlink(target, dest)
        print(f"[symlink {dest} -> {target}] ok")
    for probe in args.probe:
        try:
            print(f"[probe {probe}] read: {read_any(Path(probe))}")
        except OSError as error:
            print(f"[probe {probe}] failed: {type(error).__name__}")


if __name__ == "__main__":
    main()
