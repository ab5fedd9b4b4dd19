"""Helpers for building real git repositories in tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable
from pathlib import Path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "Test Author",
    "GIT_AUTHOR_EMAIL": "author@example.org",
    "GIT_COMMITTER_NAME": "Test Author",
    "GIT_COMMITTER_EMAIL": "author@example.org",
    "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
    "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
}


def git(repo: Path, *args: str) -> str:
    """Run git in `repo` with a fixed identity; return stdout."""
    result = subprocess.run(
        ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV}
    )
    return result.stdout.strip()


def write_files(root: Path, files: dict[str, str | bytes]) -> None:
    """Write `files` (relative path -> content) under `root`."""
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


MakeRepo = Callable[[dict[str, str | bytes]], tuple[Path, str]]
