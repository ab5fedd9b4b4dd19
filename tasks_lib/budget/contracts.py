"""Contracts of the money fence: its configuration, one balance reading, and every decision it makes."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from tasks_lib.contracts import ContractModel, Document, Sha256

ProviderName = Literal["ledger", "openrouter", "anthropic-admin", "openai-admin"]
"""Where the guard reads a key's ceiling and the shared balance."""

StepName = Literal["key-identity", "per-key-budget", "shared-headroom", "observed-drain"]
"""The four checks of the fence, in the order they run."""

StepStatus = Literal["pass", "fail", "unobserved", "skipped"]
"""`unobserved`: the balance could not be read (transport error); `skipped`: an earlier step failed."""


class BudgetConfig(Document):
    """How the fence guards one evaluation key (a `budget:` section or a file of its own)."""

    KIND = "budget"

    provider: ProviderName
    """Balance source: `ledger` (a JSON file), `openrouter` (key endpoint) or an admin cost API."""
    key_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Environment variable holding the evaluation API key whose fingerprint is checked."""
    key_sha256: Sha256
    """SHA-256 (hex) of the evaluation key's exact bytes; another key, e.g. production's, fails step 1."""
    production_reserve_usd: float = Field(ge=0)
    """Balance that must stay untouched for production; the pair may never eat into it."""
    pair_cap_usd: float = Field(gt=0)
    """Acknowledged most a paired run may spend; headroom must cover reserve plus this cap."""
    arm_ceiling_usd: float = Field(gt=0)
    """Most one arm may spend (the agent's own per-run limit); the next arm may start only if this
    still fits the pair cap and keeps the balance above the reserve."""
    drain_tolerance_usd: float = Field(default=0.0, ge=0)
    """How much more than the declared spend the balance may drop between arms (billing rounding)."""
    ledger_path: str | None = None
    """Ledger file for `provider: ledger`; relative paths are relative to the config file's folder."""
    base_url: str | None = Field(default=None, pattern=r"^https?://[^\s]+$")
    """Provider API base URL (e.g. https://openrouter.ai); default: the provider's public URL."""
    admin_key_env: str | None = Field(default=None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")
    """Environment variable with the admin key the Anthropic/OpenAI cost APIs need."""
    declared_ceiling_usd: float | None = Field(default=None, gt=0)
    """Admin cost APIs only: the spend limit set in the provider console for this period (they report
    spending, not limits); the balance is this minus the period's cost. Absent: step 2 fails."""
    period_start: str | None = Field(default=None, pattern=r"^\d{4}-\d{2}-\d{2}$")
    """Admin cost APIs only: first day (UTC, YYYY-MM-DD) of the ceiling's period; default: the 1st of this month."""
    timeout_seconds: float = Field(default=10.0, gt=0, le=300)
    """Timeout of one balance request; a timeout is a transport error (recorded as unobserved)."""

    @model_validator(mode="after")
    def _source_settings(self) -> BudgetConfig:
        if self.arm_ceiling_usd > self.pair_cap_usd:
            raise ValueError(f"'arm_ceiling_usd' ({self.arm_ceiling_usd:g}) exceeds 'pair_cap_usd' ({self.pair_cap_usd:g}); one arm cannot spend more than the pair")
        if self.provider == "ledger" and not self.ledger_path:
            raise ValueError("provider 'ledger' needs 'ledger_path' (the ledger JSON file)")
        if self.provider in ("anthropic-admin", "openai-admin") and not self.admin_key_env:
            raise ValueError(f"provider {self.provider!r} needs 'admin_key_env' (the variable holding the admin key)")
        return self


class LedgerEntry(ContractModel):
    """One recorded spend in a ledger file."""

    usd: float = Field(ge=0)
    """Amount spent, in US dollars."""
    note: str = ""
    """What spent it (run, arm)."""


class Ledger(Document):
    """A static or append-only balance file: opening balance minus recorded entries."""

    KIND = "ledger"

    opening_balance_usd: float
    """Shared balance when the ledger was opened."""
    key_ceiling_usd: float | None = Field(ge=0)
    """External per-key ceiling; null means the key has none (step 2 fails)."""
    key_status: Literal["active", "revoked"] = "active"
    """`revoked` behaves like a 401 from a real provider (fails closed)."""
    entries: tuple[LedgerEntry, ...] = ()
    """Spending recorded so far, oldest first."""

    @property
    def balance_usd(self) -> float:
        """Opening balance minus every entry."""
        return self.opening_balance_usd - sum(e.usd for e in self.entries)


class BalanceReading(ContractModel):
    """What a balance source said at one moment."""

    source: str
    """Which source answered (provider name and URL or file)."""
    balance_usd: float
    """Money left to spend that the pair draws from (shared balance or key's remaining limit)."""
    key_ceiling_usd: float | None
    """The key's external ceiling, or None when the provider says it has none."""
    usage_usd: float | None = None
    """Spending the provider reports for the key or period, when it reports it."""


class StepResult(ContractModel):
    """The outcome of one of the four checks."""

    step: StepName
    """Which check."""
    status: StepStatus
    """pass, fail, unobserved (balance unreadable) or skipped (an earlier step failed)."""
    detail: str
    """The figures and the reason, in one line."""


class GuardDecision(Document):
    """One decision of the fence, kept with the run's artifacts whatever it decided."""

    KIND = "budget-decision"

    phase: Literal["preflight", "between-arms"]
    """`preflight` runs steps 1-3 before a paid pair; `between-arms` runs steps 1 and 4."""
    allowed: bool
    """True when the next paid stage may start."""
    outcome: Literal["pass", "fail", "unobserved"]
    """`unobserved`: allowed although the balance could not be read (fail-open, recorded)."""
    reason: str
    """Why, in one line (the first failing step, or what went unobserved)."""
    steps: tuple[StepResult, ...]
    """Every check run, in order."""
    provider: ProviderName
    """Balance source kind."""
    source: str
    """The source's address (URL or ledger file name)."""
    key_sha256_prefix: str = Field(pattern=r"^[0-9a-f]{0,12}$")
    """First 12 hex of the exported key's SHA-256 (empty when no key was exported); never the key."""
    balance_usd: float | None
    """Balance read now; None when unobserved or not read."""
    key_ceiling_usd: float | None
    """The key's external ceiling as the provider reported it."""
    production_reserve_usd: float
    """Reserve from the configuration."""
    pair_cap_usd: float
    """Acknowledged pair cap from the configuration."""
    start_balance_usd: float | None = None
    """Between arms: the balance the preflight read."""
    declared_spent_usd: float | None = None
    """Between arms: what the run itself recorded as spent so far."""
    observed_drain_usd: float | None = None
    """Between arms: start balance minus balance now (counts anyone's spending on the account)."""
    next_arm_ceiling_usd: float | None = None
    """Between arms: most the next arm may spend."""
    checked_at: str
    """UTC time of the decision (ISO 8601)."""
