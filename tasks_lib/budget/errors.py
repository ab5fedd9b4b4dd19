"""Errors of the money fence."""

from __future__ import annotations

from tasks_lib.errors import MemtrialError


class BudgetError(MemtrialError):
    """Base class of the fence's errors."""


class BudgetConfigError(BudgetError):
    """The budget configuration or ledger file is missing or invalid (names the file and field)."""


class BalanceUnavailable(BudgetError):
    """The balance could not be read: transport error, timeout, 5xx, malformed or unexpected body.

    The guard records such a check as `unobserved`; between arms it fails open."""


class KeyRejected(BudgetError):
    """The provider rejected the key (401/403 or a revoked ledger key): the guard fails closed."""


class BudgetStop(BudgetError):
    """The guard refused the next paid stage; carries the decision that says why."""

    def __init__(self, decision: object, message: str) -> None:
        self.decision = decision
        super().__init__(message)

    def __reduce__(self) -> tuple[type, tuple[object, str]]:
        """Pickle with the decision (Prefect may persist a failed task's exception)."""
        return type(self), (self.decision, str(self))
