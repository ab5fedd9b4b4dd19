"""Every `MEMTRIAL_*` environment variable memtrial reads, each documented once, and the checkout root.

Each variable is a `Setting`: its name and one sentence on what it sets and its default. Code reads a
variable only through its `Setting` (`HOME.text()`, `ALLOW_UNSANDBOXED_CHECK.flag()`, ...), at call
time, never cached at import, so a test or a command that sets it after import is obeyed. A module
may keep a short alias of a name (`UNCHECKED_OPT_OUT = ALLOW_UNCHECKED_CORPUS.name`) to put it in a
message; tests/test_settings.py fails when code in `tasks_lib` or `flows` spells a `MEMTRIAL_` name
itself. Parsing a value (a number, a URL) stays with its reader, whose error names the variable.

The agent side's variables (the realm, the store's socket, the switches) are `tasks_lib.memory.env`:
their names say nothing of memtrial on purpose. Importing this module costs nothing (the standard
library only): provisioner verbs and sandboxed checks read it in processes kept light.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CHECKOUT_ROOT = Path(__file__).resolve().parents[1]
"""The memtrial checkout this code runs from (holds corpora/, configs/, deployments/, node_modules/)."""

PREFIX = "MEMTRIAL_"
"""What every name here starts with."""


@dataclass(frozen=True)
class Setting:
    """One `MEMTRIAL_*` environment variable: its name and what it sets."""

    name: str
    """The variable's name."""
    doc: str
    """What it sets, and what holds when it is unset."""

    def text(self, env: Mapping[str, str] | None = None, default: str = "") -> str:
        """Its value in `env` (default: the process environment, read now); `default` when unset or empty."""
        return (os.environ if env is None else env).get(self.name, "") or default

    def flag(self, env: Mapping[str, str] | None = None) -> bool:
        """True only when it is exactly `1` (an opt-out is never switched on by a stray value)."""
        return self.text(env) == "1"


def _setting(name: str, doc: str) -> Setting:
    setting = Setting(PREFIX + name, doc)
    SETTINGS.append(setting)
    return setting


SETTINGS: list[Setting] = []
"""Every variable below, in this file's order."""

# --------------------------------------------------------------------------- where things go

HOME = _setting("HOME", "Local state folder (Prefect's home, local run-config copies, the default artifact "
                "root); default `.memtrial/` in the checkout, never the current directory.")
ARTIFACT_ROOT = _setting("ARTIFACT_ROOT", "Artifact root, a folder or s3://bucket/prefix, when neither "
                         "--artifacts nor the run config names one; default `$MEMTRIAL_HOME/artifacts`.")
S3_ENDPOINT_URL = _setting("S3_ENDPOINT_URL", "Endpoint of an s3:// artifact root (an S3-compatible server); "
                           "default boto3's AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else AWS.")
PACK_CACHE = _setting("PACK_CACHE", "Folder where a worker unpacks corpus packs; default "
                      "`memtrial-packs-<uid>` in the temp folder.")
UPSTREAM_CACHE = _setting("UPSTREAM_CACHE", "This machine's cache of pinned upstream releases; default "
                          "$XDG_CACHE_HOME/memtrial/upstream, else ~/.cache/memtrial/upstream.")
BUDGET_CONFIG = _setting("BUDGET_CONFIG", "Budget config `memtrial budget check` reads when --config is not given.")

# --------------------------------------------------------------------------- upstream downloads (`memtrial corpus fetch`)

PYPI_INDEX = _setting("PYPI_INDEX", "PEP 503 simple index the pinned sdists come from; default PyPI's.")
NPM_REGISTRY = _setting("NPM_REGISTRY", "npm registry the pinned tarballs come from; default npm's.")
FETCH_TIMEOUT = _setting("FETCH_TIMEOUT", "Seconds one download or git fetch may take; default 30.")

# --------------------------------------------------------------------------- opt-outs, each named in every record it affects

ALLOW_UNCHECKED_CORPUS = _setting("ALLOW_UNCHECKED_CORPUS", "`1`: a surface certification cannot find is "
                                  "recorded as unchecked instead of failing it.")
ALLOW_UNSANDBOXED_CHECK = _setting("ALLOW_UNSANDBOXED_CHECK", "`1`: a hidden check whose sandbox cannot run "
                                   "here runs unsandboxed, said in every record it affects.")

# --------------------------------------------------------------------------- programs and endpoints

CLAUDE_BINARY = _setting("CLAUDE_BINARY", "The `claude` CLI to run; default the project-local install, else PATH.")
OPENAI_BASE_URL = _setting("OPENAI_BASE_URL", "Endpoint of the openai-chat agent (ending before "
                           "/chat/completions) when its config names none.")
MCP_MEMORY_SERVER = _setting("MCP_MEMORY_SERVER", "Entry script of the MCP memory server; default the "
                             "project-local install under node_modules/.")
DASK_WORKER_TIMEOUT = _setting("DASK_WORKER_TIMEOUT", "Seconds a Dask cluster has to show a worker; default 60.")

# --------------------------------------------------------------------------- a provisioner's own environment (set by the runner)

PROVISIONER_STATE = _setting("PROVISIONER_STATE", "A provisioner's state folder (per-run projects, anything "
                             "shared between them): the config's, else a `provisioner-state` folder beside the fixture.")
PROVISIONER_SERVE = _setting("PROVISIONER_SERVE", "`1`: restore also serves the project on a private socket "
                             "(destroy stops it); `ro`: the same, read-only (remember and forget refused); `0`: not "
                             "served; default the provisioner's own (`ProvisionerBackend.default_serve`).")
PROVISIONER_SYSTEM = _setting("PROVISIONER_SYSTEM", "The memory system `memtrial-system-provisioner` serves "
                              "(a registry name; required).")
PROVISIONER_EMBEDDER = _setting("PROVISIONER_EMBEDDER", "Embedder a provisioner stores memories with, for "
                                "systems that use memtrial's embedders; default the provisioner's own (hashed).")

# --------------------------------------------------------------------------- test switches of the flows (`flows.stages`)

STAGE_TRACE = _setting("STAGE_TRACE", "File each stage that runs (not from cache) appends its name to.")
FAIL_STAGE = _setting("FAIL_STAGE", "A stage name: that stage raises InjectedFailure (proves reruns recompute "
                      "only what failed).")
FAIL_ONCE = _setting("FAIL_ONCE", "With FAIL_STAGE: a file the first failure creates, so the stage fails once.")

SECRET_REFERENCE_PREFIX = PREFIX + "SECRET_"
"""`MEMTRIAL_SECRET_<VAR>=<block>`: a flow run sets `<VAR>` from that Prefect Secret block (`flows.runtime.secrets`)."""

RUNNER_STATE = (HOME, ARTIFACT_ROOT)
"""The variables naming where the runner keeps its state: a folder they name is hidden from every agent."""


def memtrial_home() -> Path:
    """Local state folder: $MEMTRIAL_HOME, else `.memtrial/` in the checkout (never the cwd)."""
    return Path(HOME.text() or CHECKOUT_ROOT / ".memtrial").resolve()


def default_artifact_root() -> str:
    """$MEMTRIAL_ARTIFACT_ROOT (a folder or s3://bucket/prefix), else `<home>/artifacts`."""
    return ARTIFACT_ROOT.text() or str(memtrial_home() / "artifacts")
