"""The status marker a run leaves: `runs/<run_id>/status.json` (a `RunStatus`).

A run that the nightly flow or `memtrial paired` starts writes it (`flows.runtime.status.run_marker`):
`running` when it starts (with the host and process running it), `complete` or `failed` (with the
stage and a one-line error) when it ends, `interrupted` (with the stage and the signal) when a SIGINT
or SIGTERM stopped it; a run whose process on this host is gone while its marker still says `running`
is `stopped_outright`. The marker is not evidence: it lives beside the sealed `attempts/` folder, never
in it, and `tasks_lib.run.seal` seals only the records table and `attempts/`, so a marker written after
the seal (every `complete`) never breaks `verify_run`. `tasks_lib.run.index` lists runs by it.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import AwareDatetime, model_validator

from tasks_lib.artifacts import ArtifactStore, run_key
from tasks_lib.contracts import Document, Identifier, NonEmptyText
from tasks_lib.errors import ArtifactError, ArtifactNotFound, ContractError
from tasks_lib.run.layout import STATUS_JSON as RUN_STATUS_JSON

ERROR_WIDTH = 300
"""Longest error line a marker keeps."""

RunState = Literal["running", "complete", "failed", "interrupted"]


class RunStatus(Document):
    """`runs/<run_id>/status.json`: whether a run is going, finished or failed, and where it failed."""

    KIND: ClassVar[str] = "run status"

    run_id: Identifier
    """The run."""
    state: RunState
    """`running` from its start, then `complete`, `failed`, or `interrupted` (SIGINT or SIGTERM: its
    stages cut short stored nothing, a rerun computes them); a run killed outright stays `running`."""
    stage: str | None = None
    """The stage that was running when the run failed or was interrupted (a progress stage: `prepare`, `arms: <agent>`,
    `grade + aggregate`, ...); None when it did not fail or the stage is not known."""
    error: str | None = None
    """The failure in one line (first line of the error, at most 300 characters), or the signal that
    interrupted the run (`SIGINT`); None unless failed or interrupted."""
    agents: tuple[str, ...] = ()
    """Agents the run was configured with (a nightly run's agents run as `<run_id>-<agent>`)."""
    memory_system: str | None = None
    """The configured memory system (`reference`, `provisioner`); the build measured is in the records."""
    started_at: AwareDatetime
    """When the run first started (UTC); a rerun of the same run id keeps it."""
    resumed_at: AwareDatetime | None = None
    """When the latest rerun of the same run id started; None for a run started once."""
    ended_at: AwareDatetime | None = None
    """When it completed or failed; None while running."""
    memtrial_version: NonEmptyText
    """The memtrial build that ran it (`memtrial <version>+<commit>`)."""
    host: str | None = None
    """The host name of the process running it (None in markers written before hosts were recorded)."""
    pid: int | None = None
    """That process's id."""
    pid_started: int | None = None
    """That process's start time (Linux: clock ticks after boot, `/proc/<pid>/stat` field 22), so a
    reused PID is not taken for the run; None where the system does not say."""

    @model_validator(mode="after")
    def _state_matches(self) -> RunStatus:
        if (self.state == "running") != (self.ended_at is None):
            raise ValueError(f"state {self.state!r} {'has' if self.ended_at else 'lacks'} ended_at; only a running run has none")
        if (self.state in ("failed", "interrupted")) != (self.error is not None):
            raise ValueError(f"state {self.state!r} {'lacks' if self.error is None else 'has'} an error; exactly a failed or interrupted run has one")
        return self


def status_key(run_id: str) -> str:
    """Where a run's status marker goes."""
    return run_key(run_id, RUN_STATUS_JSON)


def one_line(error: BaseException) -> str:
    """The first line of `error` (its type when it says nothing), at most ERROR_WIDTH characters."""
    text = str(error).strip()
    line = text.splitlines()[0] if text else type(error).__name__
    return line if len(line) <= ERROR_WIDTH else line[: ERROR_WIDTH - 3] + "..."


def _now() -> datetime:
    return datetime.now(UTC)


def process_started(pid: int) -> int | None:
    """When process `pid` started (clock ticks after boot, from `/proc`); None when it is gone or
    the system has no `/proc`."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: fields after it follow the last ')'.
    return int(stat[stat.rindex(")") + 2:].split()[19])


def stopped_outright(status: RunStatus) -> bool:
    """Whether a `running` marker belongs to a process of this host that no longer runs (a run
    killed outright, which could not write `failed`). A marker of another host, or one without a
    process, cannot be checked from here and is not called stopped."""
    if status.state != "running" or status.host != socket.gethostname() or status.pid is None:
        return False
    if status.pid_started is not None:
        return process_started(status.pid) != status.pid_started
    try:
        os.kill(status.pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


def mark_running(store: ArtifactStore, run_id: str, *, version: str, agents: Sequence[str] = (),
                 memory_system: str | None = None) -> RunStatus:
    """Write the `running` marker of a run that starts now; return it. A rerun of a run id that has
    a marker keeps its first `started_at` and records `resumed_at` (an unreadable old marker is
    replaced: the marker is not evidence)."""
    now = _now()
    try:
        before = read_status(store, run_id)
    except (ArtifactError, ContractError):
        before = None
    status = RunStatus(run_id=run_id, state="running", agents=tuple(agents), memory_system=memory_system,
                       started_at=before.started_at if before else now, resumed_at=now if before else None,
                       memtrial_version=version, host=socket.gethostname(), pid=os.getpid(),
                       pid_started=process_started(os.getpid()))
    store.put_json(status_key(run_id), status)
    return status


def mark_ended(store: ArtifactStore, started: RunStatus, error: BaseException | None = None, stage: str | None = None,
               interrupted_by: str | None = None) -> RunStatus:
    """Write the marker of a run that ended now: `complete`, `failed` with `error` in one line and its stage,
    or `interrupted` by the signal `interrupted_by` (`SIGINT`) in its stage."""
    update: dict[str, object] = {"state": "complete", "ended_at": _now()}
    if interrupted_by is not None:
        update.update(state="interrupted", error=interrupted_by, stage=stage)
    elif error is not None:
        update.update(state="failed", error=one_line(error), stage=stage)
    status = RunStatus.model_validate({**started.model_dump(), **update})
    store.put_json(status_key(started.run_id), status)
    return status


def read_status(store: ArtifactStore, run_id: str) -> RunStatus | None:
    """The run's marker, or None when it has none. Raises ContractError/ArtifactError for a bad one."""
    try:
        return store.get_json(status_key(run_id), RunStatus)
    except ArtifactNotFound:
        return None
