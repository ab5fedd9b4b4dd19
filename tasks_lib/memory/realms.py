"""Realm names: the canonical shape, validation, and one fresh realm per trial, keyed by the run's secret.

A realm is `<namespace>:<name>`: the namespace is lowercase letters, digits and '-', the name adds
'.', '_' and '-'; both start with a letter or digit; at most 200 characters in all. The colon is
required on purpose: an earlier harness used colon-less names, a hook rejected them and silently
fell back to a default realm, and memory-on runs delivered nothing. Here a bad name is an error,
and a realm that was never created is an error too; nothing falls back to a default realm.

A trial's realm is an HMAC-SHA256, under the run's secret, of the run id, task, condition and trial.
The secret is drawn at run start (`ensure_run_secret`, 32 random bytes) and kept in the run folder
(`runs/<run_id>/` + `tasks_lib.run.layout.REALMS_KEY`), which no sandbox mounts and no record, receipt or manifest copies:
an agent that knows everything it can see (run id, task, its own realm) still cannot recompute which
condition a realm belongs to, while `memtrial rerun` of the same run reads the same secret and gets
the same realms (the arms' cache keys do not hold realms or the secret).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import TYPE_CHECKING

from tasks_lib.memory.errors import InvalidRealmError, MemoryInputError

if TYPE_CHECKING:
    from tasks_lib.artifacts import ArtifactStore

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


REALM_NAMESPACE = "project"
"""The namespace of every trial's realm: a word any memory system's users would use."""


RUN_SECRET_BYTES = 32
"""Length of a run's realm secret."""


class BadRunSecretError(MemoryInputError):
    """A run's stored realm secret is not RUN_SECRET_BYTES bytes of hex."""


def new_run_secret() -> bytes:
    """A fresh realm secret (RUN_SECRET_BYTES random bytes from the OS)."""
    return secrets.token_bytes(RUN_SECRET_BYTES)


def ensure_run_secret(store: ArtifactStore, run_id: str) -> bytes:
    """The realm secret of run `run_id`: read from its run folder, or drawn and stored there when the run
    has none yet. Call it at run start, before arms fan out (two arms drawing at once would disagree);
    every later call (an arm, `memtrial rerun`) reads the same secret.

    Raises BadRunSecretError naming the file when the stored secret is not RUN_SECRET_BYTES bytes of hex.
    """
    from tasks_lib.artifacts import run_key
    from tasks_lib.run.layout import (
        REALMS_KEY,  # here, not at the top: the hook's off path imports this module
    )

    key = run_key(run_id, REALMS_KEY)
    if not store.exists(key):
        store.put_bytes(key, new_run_secret().hex().encode())
    text = store.get_bytes(key).decode("ascii", "replace").strip()
    if not re.fullmatch(rf"[0-9a-f]{{{2 * RUN_SECRET_BYTES}}}", text):
        raise BadRunSecretError(f"{key}: not a realm secret ({2 * RUN_SECRET_BYTES} hex digits); delete it only if the run "
                                "has no arms yet (its realms would change), else start a new run")
    return bytes.fromhex(text)


def trial_realm(secret: bytes, run_id: str, task_id: str, condition: str, trial: int) -> str:
    """The realm of one trial, unique per trial and blind: `project:<16 hex>`, an HMAC-SHA256 under the
    run's `secret` of the run, task, condition and trial, so the name an agent may see has one form in
    every condition, names no condition, task, run or harness, and cannot be recomputed without the
    secret (an agent that could read its arm off the realm could play it).

    Raises InvalidRealmError for a negative trial or a secret shorter than 16 bytes.
    """
    if trial < 0:
        raise InvalidRealmError(f"trial: must be >= 0, got {trial}")
    if len(secret) < 16:
        raise InvalidRealmError(f"secret: {len(secret)} bytes is too short to key a realm; use ensure_run_secret")
    message = "\0".join((run_id, task_id, condition, str(trial))).encode()
    digest = hmac.new(secret, message, hashlib.sha256).hexdigest()[:16]
    return validate_realm(f"{REALM_NAMESPACE}:{digest}", field="trial_realm")
