"""Hostile class 5 (part): the agent can tell its arm. What the memory side shows an agent (its realm,
the delivered block's wording) must have one form in every condition and name no condition, task
corpus or harness. (The environment's variable names are still MEMTRIAL_*: see the README's limits.)"""

from __future__ import annotations

import re

import pytest

from tasks_lib.memory.delivery.provenance import find_provenance, wrap_block
from tasks_lib.memory.realms import trial_realm

GIVEAWAYS = re.compile(r"memtrial|benchmark|harness|trial|condition|ablat|calibration|\boff\b|\bon\b|logship", re.I)
"""Words that would tell an agent it is being measured, or in which arm."""


@pytest.mark.parametrize("condition", ["off", "on", "ablate:all", "ablate:keyword"])
def test_the_realm_an_agent_may_see_names_no_arm(condition: str) -> None:
    """Regression: `trial:<run>.<task>.<condition>.t0` handed the agent its condition and task id."""
    realm = trial_realm("paired-20261203-101010-abc123", "logship-partial-exit", condition, 2)
    assert not GIVEAWAYS.search(realm), realm


def test_the_delivered_block_is_worded_neutrally() -> None:
    """Regression: delivered memory was wrapped in `<!-- memtrial-memory ... -->`, naming the apparatus."""
    block = wrap_block("prompt-time", ["1f2e3d4c5b6a7980"], "Partial deliveries exit with status 17.")
    marker_lines = [line for line in block.splitlines() if line.startswith("<!--")]
    assert len(marker_lines) == 2 and not any(GIVEAWAYS.search(line) for line in marker_lines), marker_lines
    assert find_provenance(block) == [("prompt-time", ("1f2e3d4c5b6a7980",))]
