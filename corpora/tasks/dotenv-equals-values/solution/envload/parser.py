"""Parse KEY=VALUE lines: comments, blank lines, `export ` prefixes and quoted values."""

from __future__ import annotations

import os
import re
from pathlib import Path

KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class EnvFileError(ValueError):
    """A line of an env file cannot be read."""


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        inner = value[1:-1]
        return inner.replace("\\n", "\n") if value[0] == '"' else inner
    return value.split(" #", 1)[0].rstrip()


def parse(text: str, source: str = "<env>") -> dict[str, str]:
    values: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if stripped.startswith("export "):
            stripped = stripped[len("export "):]
        key, sep, value = stripped.partition("=")
        if not sep:
            raise EnvFileError(f"{source}:{number}: expected KEY=VALUE")
        key = key.strip()
        if not KEY.match(key):
            raise EnvFileError(f"{source}:{number}: {key!r} is not a valid variable name")
        values[key] = _unquote(value)
    return values


def load(path: Path, override: bool = False) -> dict[str, str]:
    """Read `path` and set its variables in os.environ (existing ones win unless `override`)."""
    values = parse(path.read_text(encoding="utf-8"), str(path))
    for key, value in values.items():
        if override or key not in os.environ:
            os.environ[key] = value
    return values
