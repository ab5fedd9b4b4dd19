"""Secrets as references: a deployment names Prefect Secret blocks, the flow run reads them.

Prefect renders `{{ prefect.blocks.secret.x }}` in a deployment's job variables when you deploy, so
the secret would be stored in plain text in the deployment. Instead the deployment's environment
holds `MEMTRIAL_SECRET_<VAR>: <block name>` (a name, not a secret) and the flow run sets `<VAR>` from
the block when it starts, in its own process. A variable already set wins (a worker's own credentials).
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping
from typing import cast

from tasks_lib.errors import MemtrialError
from tasks_lib.settings import SECRET_REFERENCE_PREFIX


class SecretReferenceError(MemtrialError):
    """A `MEMTRIAL_SECRET_<VAR>` names no readable Prefect Secret block."""


def resolve_secret_references(environ: MutableMapping[str, str] | None = None) -> list[str]:
    """Set each `<VAR>` named by `MEMTRIAL_SECRET_<VAR>=<block>` from that Secret block, unless `<VAR>` is
    already set; return the variables set. Raises SecretReferenceError naming the variable and block."""
    from prefect.blocks.system import Secret

    env = os.environ if environ is None else environ
    resolved = []
    for key, block in sorted(env.items()):
        variable = key.removeprefix(SECRET_REFERENCE_PREFIX)
        if not key.startswith(SECRET_REFERENCE_PREFIX) or not variable or env.get(variable):
            continue
        try:
            value = cast("Secret", Secret.load(block)).get()  # called from sync code: the block, not a coroutine
        except (ValueError, RuntimeError) as error:
            raise SecretReferenceError(
                f"{key}={block}: no Prefect Secret block {block!r} on this API ({error}); create it with "
                f"Secret(value=...).save({block!r}) (docs/DEPLOY.md) or set {variable} on the worker") from None
        env[variable] = str(value)
        resolved.append(variable)
    return resolved
