"""The money fence: a budget guard in front of every paid stage and between arms.

`preflight` (steps 1-3) and `check_drain` (step 4) return `GuardDecision` records; balance sources
(a ledger file, OpenRouter's key endpoint, the Anthropic and OpenAI admin cost APIs) share one
interface. No Prefect here: `flows/budget.py` wraps these as tasks.
"""

from tasks_lib.budget.config import load_budget_config
from tasks_lib.budget.contracts import (
    BalanceReading,
    BudgetConfig,
    GuardDecision,
    Ledger,
    LedgerEntry,
    StepResult,
)
from tasks_lib.budget.errors import (
    BalanceUnavailable,
    BudgetConfigError,
    BudgetError,
    BudgetStop,
    KeyRejected,
)
from tasks_lib.budget.guard import check_drain, key_fingerprint, preflight
from tasks_lib.budget.sources import (
    BalanceSource,
    append_ledger_entry,
    load_ledger,
    open_source,
    write_ledger,
)

__all__ = [
    "BalanceReading", "BalanceSource", "BalanceUnavailable", "BudgetConfig", "BudgetConfigError", "BudgetError",
    "BudgetStop", "GuardDecision", "KeyRejected", "Ledger", "LedgerEntry", "StepResult", "append_ledger_entry",
    "check_drain", "key_fingerprint", "load_budget_config", "load_ledger", "open_source", "preflight", "write_ledger",
]
