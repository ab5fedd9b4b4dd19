"""Errors of agent adapters."""

from tasks_lib.errors import MemtrialError


class AgentSetupError(MemtrialError):
    """The agent cannot be set up here (CLI missing, bad configuration)."""


class UnknownAgentError(MemtrialError):
    """No agent is registered under the requested name."""
