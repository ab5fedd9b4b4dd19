"""Errors of the recall suite."""

from __future__ import annotations

from tasks_lib.errors import MemtrialError


class RecallError(MemtrialError):
    """The recall suite cannot run as configured (bad option, unusable filler, unknown memory)."""


class RecallModelError(RecallError):
    """The configured OpenAI-compatible model could not be asked or gave an unusable reply."""
