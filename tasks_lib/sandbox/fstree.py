"""Removing a tree the sandboxed command made, whatever its shape.

`shutil.rmtree` recurses in Python (Python 3.11), so a tree a few thousand folders deep raises
RecursionError, which `ignore_errors=True` does not catch; a runner that tears down such a workspace
crashes with it. `remove_tree` walks by folder descriptor with an explicit stack: no host path is
built (so nothing is past PATH_MAX), no symlink is followed, and the depth only costs one open
descriptor per level.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
"""How a folder is opened: never through a symlink, never inherited."""


def remove_tree(root: Path) -> None:
    """Remove `root` and everything under it (nothing when it is gone already).

    Raises:
        OSError: an entry could not be removed (the caller decides whether a leftover matters).
    """
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        return
    if not stat.S_ISDIR(info.st_mode):
        os.unlink(root)
        return
    stack: list[tuple[int, list[str] | None, str]] = [(os.open(root, DIR_FLAGS), None, "")]
    try:
        while stack:
            fd, pending, name = stack[-1]
            if pending is None:
                pending = []
                with os.scandir(fd) as entries:
                    for entry in entries:
                        if entry.is_dir(follow_symlinks=False):
                            pending.append(entry.name)
                        else:
                            os.unlink(entry.name, dir_fd=fd)
                stack[-1] = (fd, pending, name)
            if pending:
                child = pending.pop()
                stack.append((os.open(child, DIR_FLAGS, dir_fd=fd), None, child))
                continue
            os.close(fd)
            stack.pop()
            if stack:
                os.rmdir(name, dir_fd=stack[-1][0])
    finally:
        for fd, _, _ in stack:
            os.close(fd)
    os.rmdir(root)
