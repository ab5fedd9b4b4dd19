"""Plant a task's `MemorySpec`s through any adapter, turning `superseded`/`correction` pairs into supersession.

Rule: every spec that is not a correction is stored first, in one call, in spec order. Then each
`correction` supersedes the `superseded`-kind specs with the same `subject` when it declares one;
otherwise those that share an entity with it (see `entities`), or, when none does and the task
has exactly one `superseded` spec, that one. A correction with nothing to supersede is an error
naming `memories[i]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.adapter import MemoryAdapter, MemoryItem
from tasks_lib.memory.entities import extract_entities
from tasks_lib.memory.errors import MemoryInputError


def supersession_plan(specs: Sequence[MemorySpec]) -> dict[int, tuple[int, ...]]:
    """For each `correction` spec (by index, in order), the indexes of the `superseded` specs it replaces.

    Raises MemoryInputError naming `memories[i]` for a correction with nothing to supersede.
    """
    stale = [i for i, s in enumerate(specs) if s.kind == "superseded"]
    plan: dict[int, tuple[int, ...]] = {}
    for index, spec in enumerate(specs):
        if spec.kind != "correction":
            continue
        if spec.subject is not None:
            targets = [i for i in stale if specs[i].subject == spec.subject]
        else:
            mine = extract_entities(spec.text)
            targets = [i for i in stale if mine & extract_entities(specs[i].text)]
            if not targets and len(stale) == 1:
                targets = stale
        if not targets:
            raise MemoryInputError(
                f"memories[{index}]: this correction shares no entity with any 'superseded' memory; "
                "name the corrected thing the same way in both"
            )
        plan[index] = tuple(targets)
        stale = [i for i in stale if i not in targets]
    return plan


def plant(adapter: MemoryAdapter, realm: str, specs: Sequence[MemorySpec]) -> tuple[str, ...]:
    """Store `specs` in `realm`; return their ids in spec order (for teardown by exact id)."""
    plan = supersession_plan(specs)
    plain = [i for i, s in enumerate(specs) if s.kind != "correction"]
    ids: dict[int, str] = {}
    if plain:
        stored = adapter.remember(realm, [MemoryItem(text=specs[i].text, kind=specs[i].kind) for i in plain])
        ids.update(zip(plain, stored))
    for index, targets in plan.items():
        (ids[index],) = adapter.remember(
            realm, [MemoryItem(text=specs[index].text, kind="correction", supersedes=tuple(ids[i] for i in targets))]
        )
    return tuple(ids[i] for i in range(len(specs)))
