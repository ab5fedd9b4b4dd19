"""Errors of the sandbox layer: each names the provider, the path or the limit, and the fix."""

from __future__ import annotations

from tasks_lib.errors import MemtrialError


class SandboxError(MemtrialError):
    """A command could not be run in a sandbox; subclasses say why."""


class SandboxRequestError(SandboxError):
    """The request itself is wrong (missing workspace, reserved variable, bad mount)."""


class SandboxUnsupported(SandboxError):
    """The provider cannot give what the request asks for (a network mode, a mount target)."""


class SandboxUnavailable(SandboxError):
    """The provider cannot run here at all (no bwrap, no docker daemon, no image)."""


class UnknownSandboxError(SandboxError):
    """No provider is registered under the requested name."""


class DockerdError(SandboxUnavailable):
    """A private docker daemon could not be started, reached or stopped."""
