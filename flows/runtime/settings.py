"""Where memtrial keeps its local state, which build is under test, and Prefect's offline local mode.

Prefect reads its settings from the environment, so `configure_prefect()` must run before the
first `import prefect`. Values the user already set win.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

# The checkout root and the local state folder are defined once, in tasks_lib.settings.
from tasks_lib.settings import CHECKOUT_ROOT as PROJECT_ROOT
from tasks_lib.settings import default_artifact_root as default_artifact_root
from tasks_lib.settings import memtrial_home


def config_file(config_path: str) -> Path:
    """A run config's path: absolute as given, relative from the project root (never the cwd)."""
    path = Path(config_path)
    return path if path.is_absolute() else PROJECT_ROOT / path


def local_config_copy(run_id: str) -> Path:
    """Where the resolved config of `run_id` is kept locally, for `memtrial rerun`."""
    from tasks_lib.run.config import RUN_CONFIG_JSON

    return memtrial_home() / "runs" / run_id / RUN_CONFIG_JSON


def build_under_test(project_root: Path = PROJECT_ROOT) -> str:
    """`memtrial <version>+<commit>` of this checkout (`.dirty` when it has changes), or `+unknown` outside git."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("memtrial")
    except PackageNotFoundError:
        release = "0"
    try:
        commit = subprocess.run(["git", "-C", str(project_root), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(project_root), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return f"memtrial {release}+unknown"
    return f"memtrial {release}+{commit[:12]}{'.dirty' if dirty else ''}"


def configure_prefect() -> None:
    """Offline local mode: a project-local PREFECT_HOME, analytics off, a patient ephemeral server start."""
    os.environ.setdefault("PREFECT_HOME", str(memtrial_home() / "prefect"))
    Path(os.environ["PREFECT_HOME"]).mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")  # the client's usage telemetry (and its notice)
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_RESULTS_PERSIST_BY_DEFAULT", "true")
