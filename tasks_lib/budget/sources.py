"""Balance sources behind one interface: a ledger file and the providers' HTTP APIs.

Every source answers `read()` with a `BalanceReading`, or raises `KeyRejected` (401/403: the guard
fails closed) or `BalanceUnavailable` (transport error, timeout, 5xx, malformed or unexpected body:
the guard records the check as unobserved). HTTP uses only the standard library.
"""

from __future__ import annotations

import http.client
import json
import socket
import urllib.error
import urllib.parse
import urllib.request
from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tasks_lib.budget.contracts import BalanceReading, BudgetConfig, Ledger, LedgerEntry
from tasks_lib.budget.errors import BalanceUnavailable, BudgetConfigError, KeyRejected
from tasks_lib.contracts import dump_document, load_document
from tasks_lib.trees import write_atomically

DEFAULT_BASE_URLS = {
    "openrouter": "https://openrouter.ai",
    "anthropic-admin": "https://api.anthropic.com",
    "openai-admin": "https://api.openai.com",
}
ANTHROPIC_VERSION = "2023-06-01"
MAX_PAGES = 50
"""Cost reports are paginated; more pages than this means something is wrong."""


class BalanceSource(ABC):
    """Where the guard learns the key's ceiling and the balance the pair draws from."""

    name: str

    @abstractmethod
    def read(self) -> BalanceReading:
        """Read the balance now.

        Raises:
            KeyRejected: the provider refused the key (401/403) or the ledger marks it revoked.
            BalanceUnavailable: the balance could not be read (network, timeout, 5xx, bad body).
            ContractError / BudgetConfigError: the ledger file or configuration is wrong.
        """


# --------------------------------------------------------------------------- ledger


class LedgerSource(BalanceSource):
    """A JSON ledger: opening balance, the key's ceiling, and recorded spending."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.name = f"ledger:{path.name}"

    def read(self) -> BalanceReading:
        ledger = load_ledger(self.path)
        if ledger.key_status == "revoked":
            raise KeyRejected(f"{self.path}: field 'key_status' is 'revoked'; the key was withdrawn")
        return BalanceReading(
            source=self.name,
            balance_usd=ledger.balance_usd,
            key_ceiling_usd=ledger.key_ceiling_usd,
            usage_usd=sum(e.usd for e in ledger.entries),
        )


def load_ledger(path: Path) -> Ledger:
    """Read and validate a ledger file; errors name the file and the field."""
    return load_document(path, Ledger)


def write_ledger(path: Path, ledger: Ledger) -> None:
    """Write a ledger atomically (temp file + rename)."""
    write_atomically(path, dump_document(ledger), "the ledger")


def append_ledger_entry(path: Path, usd: float, note: str = "") -> Ledger:
    """Record one spend in the ledger (atomically) and return the new ledger."""
    ledger = load_ledger(path)
    updated = ledger.model_copy(update={"entries": (*ledger.entries, LedgerEntry(usd=usd, note=note))})
    write_ledger(path, updated)
    return updated


# --------------------------------------------------------------------------- HTTP


def get_json(url: str, headers: Mapping[str, str], timeout: float) -> Any:
    """GET `url` and decode its JSON body, classifying every failure for the guard."""
    request = urllib.request.Request(url, headers={"Accept": "application/json", **headers}, method="GET")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as error:
        if error.code in (401, 403):
            raise KeyRejected(f"GET {url}: HTTP {error.code}; the provider rejected the key") from None
        raise BalanceUnavailable(f"GET {url}: HTTP {error.code} {error.reason}") from None
    except TimeoutError:
        raise BalanceUnavailable(f"GET {url}: no answer within {timeout:g} s") from None
    except urllib.error.URLError as error:
        if isinstance(error.reason, (TimeoutError, socket.timeout)):
            raise BalanceUnavailable(f"GET {url}: no answer within {timeout:g} s") from None
        raise BalanceUnavailable(f"GET {url}: {error.reason}") from None
    except (OSError, http.client.HTTPException) as error:  # reset, refused, truncated body
        raise BalanceUnavailable(f"GET {url}: {type(error).__name__}: {error}") from None
    try:
        return json.loads(body)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise BalanceUnavailable(f"GET {url}: body is not JSON ({error})") from None


def _number(value: Any, where: str, url: str, *, optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise BalanceUnavailable(f"GET {url}: field '{where}' is {value!r}, expected a number")
    return float(value)


class OpenRouterSource(BalanceSource):
    """OpenRouter's key endpoint: `GET {base}/api/v1/key` says the key's limit and what is left."""

    def __init__(self, api_key: str, base_url: str, timeout: float) -> None:
        self.url = base_url.rstrip("/") + "/api/v1/key"
        self.name = f"openrouter:{self.url}"
        self._api_key = api_key
        self._timeout = timeout

    def read(self) -> BalanceReading:
        body = get_json(self.url, {"Authorization": f"Bearer {self._api_key}"}, self._timeout)
        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, dict):
            raise BalanceUnavailable(f"GET {self.url}: expected an object with a 'data' object")
        if "limit" not in data:
            raise BalanceUnavailable(f"GET {self.url}: field 'data.limit' is missing")
        limit = _number(data["limit"], "data.limit", self.url, optional=True)
        usage = _number(data.get("usage"), "data.usage", self.url)
        remaining = _number(data.get("limit_remaining"), "data.limit_remaining", self.url, optional=True)
        if limit is None:
            # No external ceiling: there is no remaining limit to report either.
            return BalanceReading(source=self.name, balance_usd=0.0, key_ceiling_usd=None, usage_usd=usage)
        if remaining is None:
            raise BalanceUnavailable(f"GET {self.url}: field 'data.limit_remaining' is null although 'data.limit' is set")
        return BalanceReading(source=self.name, balance_usd=remaining, key_ceiling_usd=limit, usage_usd=usage)


def period_start(config: BudgetConfig, now: datetime) -> datetime:
    """Start of the declared ceiling's period: `period_start`, else the 1st of this month (UTC)."""
    if config.period_start:
        return datetime.strptime(config.period_start, "%Y-%m-%d").replace(tzinfo=UTC)
    return now.astimezone(UTC).replace(day=1, hour=0, minute=0, second=0, microsecond=0)


class CostReportSource(BalanceSource):
    """An admin cost API: balance = the console's declared ceiling minus this period's cost.

    These APIs report spending, not limits, so the ceiling comes from `declared_ceiling_usd`;
    without it the reading says the key has no ceiling and step 2 fails."""

    path: str
    provider: str

    def __init__(self, admin_key: str, base_url: str, timeout: float, ceiling: float | None, start: datetime) -> None:
        self.url = base_url.rstrip("/") + self.path
        self.name = f"{self.provider}:{self.url}"
        self._admin_key = admin_key
        self._timeout = timeout
        self._ceiling = ceiling
        self._start = start

    @abstractmethod
    def _headers(self) -> dict[str, str]: ...

    @abstractmethod
    def _first_query(self) -> dict[str, str]: ...

    @abstractmethod
    def _amount_usd(self, result: Any, url: str) -> float: ...

    def read(self) -> BalanceReading:
        spent = 0.0
        query = self._first_query()
        for _ in range(MAX_PAGES):
            url = f"{self.url}?{urllib.parse.urlencode(query)}"
            body = get_json(url, self._headers(), self._timeout)
            if not isinstance(body, dict) or not isinstance(body.get("data"), list) or "has_more" not in body:
                raise BalanceUnavailable(f"GET {url}: expected an object with 'data' (a list) and 'has_more'")
            for bucket in body["data"]:
                results = bucket.get("results") if isinstance(bucket, dict) else None
                if not isinstance(results, list):
                    raise BalanceUnavailable(f"GET {url}: a bucket in 'data' has no 'results' list")
                spent += sum(self._amount_usd(result, url) for result in results)
            if not body["has_more"]:
                break
            if not isinstance(body.get("next_page"), str):
                raise BalanceUnavailable(f"GET {url}: 'has_more' is true but 'next_page' is missing")
            query = {**self._first_query(), "page": body["next_page"]}
        else:
            raise BalanceUnavailable(f"GET {self.url}: more than {MAX_PAGES} pages of costs")
        balance = (self._ceiling - spent) if self._ceiling is not None else 0.0
        return BalanceReading(source=self.name, balance_usd=balance, key_ceiling_usd=self._ceiling, usage_usd=spent)


class AnthropicCostSource(CostReportSource):
    """Anthropic's Admin API cost report (`GET /v1/organizations/cost_report`, amounts in cents)."""

    path = "/v1/organizations/cost_report"
    provider = "anthropic-admin"

    def _headers(self) -> dict[str, str]:
        return {"x-api-key": self._admin_key, "anthropic-version": ANTHROPIC_VERSION}

    def _first_query(self) -> dict[str, str]:
        return {"starting_at": self._start.strftime("%Y-%m-%dT%H:%M:%SZ"), "bucket_width": "1d", "limit": "31"}

    def _amount_usd(self, result: Any, url: str) -> float:
        amount = result.get("amount") if isinstance(result, dict) else None
        if isinstance(amount, (str, int, float)) and not isinstance(amount, bool):
            try:
                return float(amount) / 100.0
            except ValueError:
                pass
        raise BalanceUnavailable(f"GET {url}: field 'data[].results[].amount' is {amount!r}, expected a decimal string of cents")


class OpenAICostSource(CostReportSource):
    """OpenAI's organization costs API (`GET /v1/organization/costs`, amounts in dollars)."""

    path = "/v1/organization/costs"
    provider = "openai-admin"

    def _headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._admin_key}"}

    def _first_query(self) -> dict[str, str]:
        return {"start_time": str(int(self._start.timestamp())), "bucket_width": "1d", "limit": "31"}

    def _amount_usd(self, result: Any, url: str) -> float:
        amount = result.get("amount") if isinstance(result, dict) else None
        value = amount.get("value") if isinstance(amount, dict) else None
        return _number(value, "data[].results[].amount.value", url)  # type: ignore[return-value]


# --------------------------------------------------------------------------- factory


def secret_from_env(variable: str, env: Mapping[str, str], what: str) -> str:
    """The value of `variable`, or a BudgetConfigError saying to export it."""
    value = env.get(variable, "")
    if not value:
        raise BudgetConfigError(f"${variable} is not set; export the {what} there (the budget config names it)")
    return value


def open_source(config: BudgetConfig, config_dir: Path, env: Mapping[str, str], now: datetime) -> BalanceSource:
    """The balance source the configuration names, with its credentials from `env`."""
    if config.provider == "ledger":
        assert config.ledger_path is not None  # checked by the contract
        path = Path(config.ledger_path)
        return LedgerSource(path if path.is_absolute() else config_dir / path)
    base = config.base_url or DEFAULT_BASE_URLS[config.provider]
    if config.provider == "openrouter":
        return OpenRouterSource(secret_from_env(config.key_env, env, "evaluation API key"), base, config.timeout_seconds)
    assert config.admin_key_env is not None  # checked by the contract
    admin_key = secret_from_env(config.admin_key_env, env, f"{config.provider} admin key")
    kind = AnthropicCostSource if config.provider == "anthropic-admin" else OpenAICostSource
    return kind(admin_key, base, config.timeout_seconds, config.declared_ceiling_usd, period_start(config, now))
