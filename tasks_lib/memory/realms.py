"""Realm names: the canonical shape, validation, and one fresh realm per trial.

A realm is `<namespace>:<name>`: the namespace is lowercase letters, digits and '-', the name adds
'.', '_' and '-'; both start with a letter or digit; at most 200 characters in all. The colon is
required on purpose: an earlier harness used colon-less names, a hook rejected them and silently
fell back to a default realm, and memory-on runs delivered nothing. Here a bad name is an error,
and a realm that was never created is an error too; nothing falls back to a default realm.
"""

from __future__ import annotations

import hashlib
import re

from tasks_lib.memory.errors import InvalidRealmError

REALM_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*:[a-z0-9][a-z0-9._-]*$")
"""The canonical realm shape, e.g. `trial:run-7.fix-exit-code.on.t2`."""

MAX_REALM_CHARS = 200
"""Longest realm name accepted."""


def validate_realm(value: object, field: str = "realm") -> str:
    """Return `value` if it is a canonical realm name, else raise InvalidRealmError naming `field`."""
    if not isinstance(value, str):
        raise InvalidRealmError(f"{field}: expected a realm name string, got {type(value).__name__}")
    if len(value) > MAX_REALM_CHARS:
        raise InvalidRealmError(f"{field}: realm name is {len(value)} characters; the limit is {MAX_REALM_CHARS}")
    if not REALM_PATTERN.match(value):
        raise InvalidRealmError(
            f"{field}: {value!r} is not a canonical realm name; it must match {REALM_PATTERN.pattern} "
            "(lowercase, with one ':' between namespace and name, e.g. 'trial:run-1.task-a.on.t0')"
        )
    return value


def _slug(part: str) -> str:
    """Lowercase `part` and replace every character outside [a-z0-9._-] by '-'."""
    return re.sub(r"[^a-z0-9._-]", "-", part.lower()).strip("-._") or "x"


REALM_NAMESPACE = "project"
"""The namespace of every trial's realm: a word any memory system's users would use."""


def trial_realm(run_id: str, task_id: str, condition: str, trial: int) -> str:
    """The realm of one trial, unique per trial and blind: `project:<16 hex>`, a digest of the run,
    task, condition and trial, so the name an agent may see has one form in every condition and names
    no condition, task, run or harness (an agent that could read its arm off the realm could play it).

    Raises InvalidRealmError for a negative trial.
    """
    if trial < 0:
        raise InvalidRealmError(f"trial: must be >= 0, got {trial}")
    digest = hashlib.sha256("\0".join((run_id, task_id, condition, str(trial))).encode()).hexdigest()[:16]
    return validate_realm(f"{REALM_NAMESPACE}:{digest}", field="trial_realm")
