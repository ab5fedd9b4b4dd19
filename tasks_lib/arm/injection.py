"""Injection confirmation, grading layer one: did the memory system's context reach the agent?

Delivery is a runner-side fact: the attempt's delivery witness (`tasks_lib.memory.delivery.witness`)
is the only memory the agent can reach, and its receipt says what it served. An attempt counts as
delivered only when that receipt shows at least one of the task's planted memories served (by id,
or by exact text for a system that assigns its own ids). An arm without memory has no witness,
hence nothing delivered, whatever its transcript says.

The transcript is still read, for what it can add but never decide: the channels that carried the
memory (prompt-time retrieval, session start, ...), provenance blocks the agent wrote itself
(`agent_echoes`), and ids that a non-agent step claims delivered although the witness never served
them (`unwitnessed_ids`): a forged hook line, or a leak around the witness. Both are reported, never
counted as delivery.
"""

from __future__ import annotations

from typing import Literal

from tasks_lib.agents.base import Transcript
from tasks_lib.contracts import ContractModel
from tasks_lib.memory.delivery.provenance import find_provenance
from tasks_lib.memory.delivery.witness import DeliveryReceipt

NON_AGENT_SOURCES = frozenset({"user", "system", "hook"})


class Injection(ContractModel):
    """What the witness's receipt and the transcript show about delivery."""

    confirmed: Literal["yes", "no", "unknown"]
    """`yes` when the receipt shows a planted memory served; `no` otherwise (and always without a witness)."""
    channels: tuple[str, ...] = ()
    """Channels the transcript shows delivering, in first-seen order."""
    memory_ids: tuple[str, ...] = ()
    """Planted memories the witness served (for `transcript_claims`: ids the transcript shows), first-seen order."""
    unwitnessed_ids: tuple[str, ...] = ()
    """Ids a non-agent transcript step shows delivered that the witness never served (forged or leaked)."""
    agent_echoes: int = 0
    """Provenance blocks found in agent-written steps: never counted as delivery."""


def transcript_claims(transcript: Transcript | None, expected_ids: tuple[str, ...] = ()) -> Injection:
    """What `transcript` alone claims was delivered: `yes` when a non-agent step carries a provenance
    block (naming one of `expected_ids`, when given), `unknown` without a transcript.

    This checks an agent adapter's reporting (its hook steps); it is never the delivery an arm is
    graded on, which only the witness's receipt decides (`confirm_delivery`).
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


def confirm_delivery(receipt: DeliveryReceipt | None, transcript: Transcript | None) -> Injection:
    """Delivery from the witness's `receipt` (None: the arm had no witness), cross-read with `transcript`."""
    claims = transcript_claims(transcript)
    served = set(receipt.served_ids()) if receipt is not None else set()
    planted = receipt.planted_served() if receipt is not None else ()
    return Injection(confirmed="yes" if planted else "no", channels=claims.channels, memory_ids=planted,
                     unwitnessed_ids=tuple(i for i in claims.memory_ids if i not in served), agent_echoes=claims.agent_echoes)
