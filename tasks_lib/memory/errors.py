"""Errors of the memory package: each names the field or setting at fault and the fix."""

from __future__ import annotations

from tasks_lib.errors import MemtrialError


class MemoryStoreError(MemtrialError):
    """Base class for every error of a memory adapter or store."""


class InvalidRealmError(MemoryStoreError):
    """A realm name does not have the canonical `<namespace>:<name>` shape."""


class UnknownRealmError(MemoryStoreError):
    """A realm was never created in this store; memory never falls back to another realm."""


class RealmExistsError(MemoryStoreError):
    """A realm is created twice; realms are unique per trial."""


class MemoryInputError(MemoryStoreError):
    """An item, query or argument is unusable (empty, too large, not UTF-8, ...); nothing was changed."""


class UnknownMemoryIdError(MemoryStoreError):
    """An id given to forget or supersedes is not stored in this store (or not in this realm)."""


class UnknownLaneError(MemoryStoreError):
    """A lane name (argument or `env.ABLATE_LANES_ENV`) is not a lane of this adapter."""


class SwitchError(MemoryStoreError):
    """An environment switch (`env.MEMORY_OFF_ENV`, `env.ABLATE_LANES_ENV`, `env.REALM_ENV`, ...) is malformed."""


class UnknownEmbedderError(MemoryStoreError):
    """An embedder name is not registered."""


class EmbedderUnavailableError(MemoryStoreError):
    """An embedder is registered but its optional packages are not installed."""


class EmbedderMismatchError(MemoryStoreError):
    """A store was built with another embedder than the one requested; its vectors are not comparable."""


class HookError(MemoryStoreError):
    """The agent delivery hook got unusable input or settings."""


class MemoryServerError(MemoryStoreError):
    """The memory server could not be started, reached or stopped, or answered outside the protocol."""


class UnreadableRequestError(MemoryInputError):
    """A line sent to the memory server is not a UTF-8 JSON object; the server answers and closes the connection."""
