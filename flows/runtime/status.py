"""What a flow run leaves behind about itself: the status marker (`runs/<run_id>/status.json`, see
`tasks_lib.run.status`) and, in Prefect, the flow run's name and tags.

`run_marker` wraps the body of the nightly and paired flows: `running` when it starts, `complete`
when it returns, `failed` with the stage and the error in one line when it raises (the error is
raised on unchanged), `interrupted` with the stage when a SIGINT or SIGTERM stopped it (`flows.runtime.interrupt`). A flow run by a worker gets the same marker as one run by the CLI.
"""

from __future__ import annotations

import signal
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager

from flows.runtime.interrupt import tripped
from flows.runtime.progress import tracking_stages
from flows.runtime.settings import build_under_test
from tasks_lib.artifacts import ArtifactStore, open_store
from tasks_lib.errors import ArtifactError
from tasks_lib.run.status import RunStatus, mark_ended, mark_running


@contextmanager
def run_marker(artifact_root: str, run_id: str, *, agents: Sequence[str] = (), memory_system: str | None = None) -> Iterator[RunStatus]:
    """Mark `run_id` running for the duration, then complete, failed with the stage it failed in, or
    interrupted with the stage it was in."""
    store = open_store(artifact_root)
    started = mark_running(store, run_id, version=build_under_test(), agents=agents, memory_system=memory_system)
    with tracking_stages() as tracker:
        try:
            yield started
        except BaseException as error:
            try:
                _mark_failed(store, started, error, tracker.current())
            except ArtifactError as marker_error:  # the run's own error is what the caller must see
                error.add_note(f"memtrial: the failed status marker of run {run_id} could not be written: {marker_error}")
            raise
    mark_ended(store, started)


def _mark_failed(store: ArtifactStore, started: RunStatus, error: BaseException, stage: str | None) -> None:
    """Write the marker of a run that raised: interrupted (`flows.runtime.interrupt.tripped`) or failed. The
    interrupt's one KeyboardInterrupt may land while the marker is written (the run was already
    unwinding from a stage the interrupt stopped): then it is written again, and the interrupt goes on."""
    def write() -> None:
        signum = tripped()
        mark_ended(store, started, error, stage, interrupted_by=signal.Signals(signum).name if signum is not None else None)

    try:
        write()
    except KeyboardInterrupt:
        write()
        raise


def label_flow_run(name: str, tags: Iterable[str]) -> None:
    """Rename the current Prefect flow run to `name` and add `tags` to it; nothing outside a flow run."""
    from prefect.client.orchestration import get_client
    from prefect.context import FlowRunContext

    context = FlowRunContext.get()
    if context is None or context.flow_run is None:
        return
    with get_client(sync_client=True) as client:
        current = client.read_flow_run(context.flow_run.id)
        client.update_flow_run(context.flow_run.id, name=name, tags=sorted({*current.tags, *tags}))


def run_tags(agents: Iterable[str], memory: Iterable[str]) -> list[str]:
    """Prefect tags of a run: `agent:<name>` per agent, `memory:<system>` per memory system or build."""
    return [*(f"agent:{a}" for a in agents), *(f"memory:{m}" for m in memory)]
