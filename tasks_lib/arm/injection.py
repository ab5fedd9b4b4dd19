"""Injection confirmation, grading layer one: did the memory system's context reach the agent?

Only non-agent steps count (user, system and hook steps carrying the memory system's provenance
marker): an agent that writes the marker or the memory's words itself proves nothing. The channel
is reported (prompt-time retrieval, session start, ...) and never silently corrected for.
"""

from __future__ import annotations

from typing import Literal

from tasks_lib.agents.base import Transcript
from tasks_lib.contracts import ContractModel
from tasks_lib.memory.delivery.provenance import find_provenance

NON_AGENT_SOURCES = frozenset({"user", "system", "hook"})


class Injection(ContractModel):
    """What the transcript shows about delivery."""

    confirmed: Literal["yes", "no", "unknown"]
    """`yes` when a non-agent step carries a complete provenance block; `unknown` without a transcript."""
    channels: tuple[str, ...] = ()
    """Channels that delivered, in first-seen order."""
    memory_ids: tuple[str, ...] = ()
    """Memory ids delivered, in first-seen order."""
    agent_echoes: int = 0
    """Provenance blocks found in agent-written steps: never counted as delivery."""


def confirm_injection(transcript: Transcript | None, expected_ids: tuple[str, ...] = ()) -> Injection:
    """Read delivery off the non-agent steps of `transcript`.

    With `expected_ids`, delivery is confirmed only if at least one of them was delivered (a block
    carrying other ids, e.g. from a leaked realm, does not count).
    """
    if transcript is None:
        return Injection(confirmed="unknown")
    channels: list[str] = []
    ids: list[str] = []
    echoes = 0
    for step in transcript.steps:
        blocks = find_provenance(step.text)
        if step.source not in NON_AGENT_SOURCES:
            echoes += len(blocks)
            continue
        for channel, block_ids in blocks:
            if channel not in channels:
                channels.append(channel)
            ids.extend(i for i in block_ids if i not in ids)
    delivered = bool(ids) and (not expected_ids or bool(set(expected_ids) & set(ids)))
    return Injection(confirmed="yes" if delivered else "no", channels=tuple(channels), memory_ids=tuple(ids), agent_echoes=echoes)
