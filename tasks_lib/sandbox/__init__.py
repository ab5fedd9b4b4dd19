"""Sandboxes: run one command for one arm, confined, and report what was enforced.

    from tasks_lib.sandbox import SandboxRequest, SandboxLimits, get_sandbox
    with get_sandbox("local") as sandbox:
        result = sandbox.run(SandboxRequest(argv=("make", "test"), workspace=ws, limits=SandboxLimits()))

Several confined processes at once, talking to each other (the judged check): `Party` and
`LocalSandbox.start` (`tasks_lib.sandbox.party`).
"""

from tasks_lib.sandbox.base import (
    CapturedOutput,
    Guarantee,
    Isolation,
    ReadOnlyMount,
    Sandbox,
    SandboxCapabilities,
    SandboxLimits,
    SandboxRequest,
    SandboxResult,
)
from tasks_lib.sandbox.errors import (
    DockerdError,
    SandboxError,
    SandboxRequestError,
    SandboxUnavailable,
    SandboxUnsupported,
    UnknownSandboxError,
)
from tasks_lib.sandbox.party import Party, PartyProcess
from tasks_lib.sandbox.registry import get_sandbox, register_sandbox, sandbox_names

__all__ = [
    "CapturedOutput", "DockerdError", "Guarantee", "Isolation", "Party", "PartyProcess", "ReadOnlyMount", "Sandbox",
    "SandboxCapabilities", "SandboxError", "SandboxLimits", "SandboxRequest", "SandboxRequestError",
    "SandboxResult", "SandboxUnavailable", "SandboxUnsupported", "UnknownSandboxError",
    "get_sandbox", "register_sandbox", "sandbox_names",
]
