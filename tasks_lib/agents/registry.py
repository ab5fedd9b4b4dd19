"""Agents found by name; an unknown name lists the known ones."""

from __future__ import annotations

from collections.abc import Callable

from tasks_lib.agents.base import Agent
from tasks_lib.agents.errors import UnknownAgentError

Factory = Callable[..., Agent]
_AGENTS: dict[str, Factory] = {}


def register_agent(name: str, factory: Factory) -> None:
    """Register `factory` under `name` (later registrations replace earlier ones)."""
    _AGENTS[name] = factory


def agent_names() -> list[str]:
    """Registered names, sorted."""
    _load_builtins()
    return sorted(_AGENTS)


def get_agent(name: str, **options: object) -> Agent:
    """The agent registered as `name`, built with `options`."""
    _load_builtins()
    if name not in _AGENTS:
        raise UnknownAgentError(f"agent {name!r} is unknown; known agents: {', '.join(sorted(_AGENTS)) or 'none'}")
    return _AGENTS[name](**options)


def _load_builtins() -> None:
    """Import the built-in adapters so they register themselves (each module is optional)."""
    import importlib

    for module in ("calibration", "claude_code", "openai_chat", "command"):
        try:
            importlib.import_module(f"tasks_lib.agents.{module}")
        except ModuleNotFoundError as error:
            if error.name != f"tasks_lib.agents.{module}":
                raise
