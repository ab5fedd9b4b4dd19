"""Injection confirmation: only non-agent steps with a provenance block count."""

from __future__ import annotations

import pytest

from tasks_lib.agents.base import Transcript, TranscriptStep
from tasks_lib.arm.injection import transcript_claims
from tasks_lib.memory.delivery.provenance import wrap_block

BLOCK = wrap_block("prompt-time", ["a1b2c3d4e5f60718"], "logship: partial delivery exits with a special status")


def transcript(*steps: tuple[str, str, str]) -> Transcript:
    return Transcript(agent="test", steps=tuple(TranscriptStep(source=s, kind=k, text=t) for s, k, t in steps))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        ([("user", "prompt", "fix it"), ("hook", "context", BLOCK)], "yes"),
        ([("system", "context", BLOCK)], "yes"),
        ([("user", "prompt", "fix it"), ("agent", "message", BLOCK)], "no"),
        ([("tool", "tool-result", BLOCK)], "no"),
        ([("hook", "context", "<!-- recalled-memory channel=prompt-time ids=a1 -->unterminated")], "no"),
        ([("user", "prompt", "fix it")], "no"),
    ],
    ids=["hook-step", "system-step", "agent-echo-never-counts", "tool-output-never-counts", "incomplete-block", "nothing"],
)
def test_delivery_is_confirmed_only_from_non_agent_steps(steps: list[tuple[str, str, str]], expected: str) -> None:
    assert transcript_claims(transcript(*steps)).confirmed == expected


def test_channel_and_ids_are_reported_and_agent_echoes_counted() -> None:
    result = transcript_claims(transcript(("hook", "context", BLOCK), ("agent", "message", BLOCK)))
    assert result.channels == ("prompt-time",)
    assert result.memory_ids == ("a1b2c3d4e5f60718",)
    assert result.agent_echoes == 1


def test_missing_transcript_is_unknown_not_no() -> None:
    assert transcript_claims(None).confirmed == "unknown"


def test_a_block_with_other_ids_does_not_confirm_the_planted_memory() -> None:
    """A memory leaked from another realm is not the planted one."""
    result = transcript_claims(transcript(("hook", "context", BLOCK)), expected_ids=("ffffffffffffffff",))
    assert result.confirmed == "no"
