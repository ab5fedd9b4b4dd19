"""Sandbox providers by name: `local` and `docker` built in; an unknown name lists the known ones."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from tasks_lib.sandbox.base import Sandbox
from tasks_lib.sandbox.errors import UnknownSandboxError

Factory = Callable[..., Sandbox]

_BUILTIN: dict[str, str] = {
    "local": "tasks_lib.sandbox.local:LocalSandbox",
    "docker": "tasks_lib.sandbox.docker:DockerSandbox",
}
"""Built-in providers, imported on first use (the docker SDK is only loaded for `docker`)."""

_REGISTERED: dict[str, Factory] = {}


def register_sandbox(name: str, factory: Factory) -> None:
    """Register `factory` (a Sandbox class or callable returning one) under `name`, replacing any."""
    _REGISTERED[name] = factory


def sandbox_names() -> list[str]:
    """Every known provider name, sorted."""
    return sorted(set(_BUILTIN) | set(_REGISTERED))


def get_sandbox(name: str, **options: object) -> Sandbox:
    """A provider instance by name, built with `options`.

    Raises:
        UnknownSandboxError: no provider has that name (the message lists the known ones).
        SandboxUnavailable: the provider cannot run here (raised by its constructor).
    """
    factory = _REGISTERED.get(name)
    if factory is None and name in _BUILTIN:
        module_name, _, attr = _BUILTIN[name].partition(":")
        factory = getattr(importlib.import_module(module_name), attr)
    if factory is None:
        raise UnknownSandboxError(f"no sandbox provider named {name!r}; known providers: {', '.join(sandbox_names())}")
    return factory(**options)
