"""Typed errors of the library.

Every error names what it is about (a file, a field, a commit) and what to do. The CLI turns
any `MemtrialError` into one readable line and a non-zero exit; nothing else is caught there.
"""

from __future__ import annotations

from dataclasses import dataclass


class MemtrialError(Exception):
    """Base class for every error the library raises on purpose."""


@dataclass(frozen=True)
class Violation:
    """One wrong field in one file."""

    source: str
    field: str
    problem: str

    def __str__(self) -> str:
        where = f"field '{self.field}'" if self.field else "document"
        return f"{self.source}: {where}: {self.problem}"


class ContractError(MemtrialError):
    """A document does not satisfy its contract; carries every violation found."""

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = violations
        super().__init__("; ".join(str(v) for v in violations))

    def __reduce__(self) -> tuple[type[ContractError], tuple[list[Violation]]]:
        """Pickle by the violations (a Dask worker's error reaches the flow with its message intact)."""
        return (type(self), (self.violations,))


class ArtifactError(MemtrialError):
    """An artifact could not be read or written in the artifact store."""


class ArtifactNotFound(ArtifactError):
    """The artifact store has no object under the requested key."""


class CorpusError(MemtrialError):
    """A corpus could not be built, redacted or read."""


class UnknownCommitError(CorpusError):
    """A revision does not resolve to a commit in the named repository."""


class MissingSurfaceError(MemtrialError):
    """A surface that certification must scan (corpus, artifact, graph) does not exist."""


class DigestMismatchError(MemtrialError):
    """A file's SHA-256 differs from the digest its manifest pins."""
