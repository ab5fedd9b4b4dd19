"""Where the bundled suite data is: the package `tasks_lib.bundled`, found with importlib.resources.

In a checkout (editable install) that package is the top-level `corpora/` folder; in an installed
wheel it is `tasks_lib/bundled/` in site-packages, holding `recall/` and `retrieval/` only.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from tasks_lib.errors import MemtrialError

BUNDLED_PACKAGE = "tasks_lib.bundled"
"""The package holding the bundled data (pyproject.toml maps it to corpora/)."""

BUNDLED_SETS: tuple[str, ...] = ("recall", "retrieval")
"""The data sets shipped inside the wheel."""


def bundled_folder(name: str) -> Path:
    """The folder of bundled data set `name` (one of BUNDLED_SETS), in a checkout or an installed wheel.

    Raises MemtrialError for another name, and when the package is not on the file system (a zip import).
    """
    if name not in BUNDLED_SETS:
        raise MemtrialError(f"bundled data set {name!r} does not exist; choose one of {', '.join(BUNDLED_SETS)}")
    folder = files(BUNDLED_PACKAGE) / name
    if not isinstance(folder, Path):
        raise MemtrialError(f"{BUNDLED_PACKAGE}: {folder} is not a folder on disk; install memtrial unzipped (pip install memtrial)")
    return folder
