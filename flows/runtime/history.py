"""Keeping Prefect's database in bounds: delete flow runs that ended before a cutoff.

Prefect keeps every flow and task run (about 24 KB per task run on SQLite) and never prunes them by
default. Only history is lost: cached stage results and their keys live in the artifact root, so a
rerun after pruning still takes every completed stage from cache (`tests/test_prefect_api.py`).
Deleting a flow run deletes its task runs and states with it (foreign keys), and the server deletes
its logs in the background. SQLite reuses the freed pages, so the file stops growing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from datetime import datetime

PAGE = 200
"""Flow runs read (and deleted) per request."""


async def _prune(before: datetime, flows: Sequence[str] | None) -> int:
    from prefect.client.orchestration import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterEndTime,
        FlowRunFilterState,
        FlowRunFilterStateType,
    )
    from prefect.client.schemas.objects import TERMINAL_STATES

    ended = FlowRunFilter(end_time=FlowRunFilterEndTime.model_validate({"before_": before}),
                          state=FlowRunFilterState(type=FlowRunFilterStateType(any_=list(TERMINAL_STATES))))
    named = FlowFilter(name=FlowFilterName(any_=list(flows))) if flows else None
    deleted = 0
    async with get_client() as client:
        while page := await client.read_flow_runs(flow_run_filter=ended, flow_filter=named, limit=PAGE):
            for run in page:
                await client.delete_flow_run(run.id)
            deleted += len(page)
    return deleted


def prune_flow_runs(before: datetime, flows: Sequence[str] | None = None) -> int:
    """Delete every finished flow run (of `flows`, by flow name; default all) that ended before
    `before` from the current Prefect API; return how many were deleted. Runs in progress are kept."""
    return asyncio.run(_prune(before, flows))
