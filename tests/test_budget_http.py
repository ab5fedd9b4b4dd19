"""The HTTP balance sources against a real local server on 127.0.0.1 that answers each case.

The server speaks the documented shapes of OpenRouter's key endpoint and the Anthropic / OpenAI
admin cost reports; each case lives under its own path prefix, so one base URL selects one case.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import pytest

from tasks_lib.budget import BudgetConfig, check_drain, key_fingerprint, open_source, preflight
from tasks_lib.budget.errors import BalanceUnavailable, KeyRejected
from tasks_lib.budget.sources import AnthropicCostSource, OpenAICostSource, OpenRouterSource

KEY = "sk-or-v1-eval-0001"
ADMIN = "sk-admin-0001"
NOW = datetime(2026, 12, 2, 16, 0, tzinfo=UTC)
CLIENT_TIMEOUT = 0.5
SLOW_SECONDS = 2.0


def key_body(limit: float | None, remaining: float | None, usage: float = 1.5) -> dict:
    return {"data": {"label": "sk-or-v1-ev...001", "limit": limit, "limit_remaining": remaining, "usage": usage,
                     "is_free_tier": False, "limit_reset": None}}


OPENROUTER_CASES: dict[str, tuple[int, bytes | dict]] = {
    "ok": (200, key_body(100.0, 80.0, 20.0)),
    "no-ceiling": (200, key_body(None, None)),
    "low-balance": (200, key_body(100.0, 12.0, 88.0)),
    "unauthorized": (401, {"error": {"code": 401, "message": "No auth credentials found"}}),
    "forbidden": (403, {"error": {"code": 403, "message": "Key disabled"}}),
    "server-error": (500, {"error": {"code": 500, "message": "Internal"}}),
    "malformed": (200, b"{\"data\": {\"limit\": 10"),
    "wrong-shape": (200, {"limit": 100, "limit_remaining": 80}),
    "non-numeric": (200, key_body(100.0, "eighty")),  # type: ignore[arg-type]
}


class Recorder:
    """What the server saw: path, query and headers of each request."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict, dict]] = []


def make_handler(recorder: Recorder) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def send(self, status: int, body: bytes | dict) -> None:
            payload = body if isinstance(body, bytes) else json.dumps(body).encode()
            try:
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (the timeout case)
                pass

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            url = urlparse(self.path)
            query = parse_qs(url.query)
            recorder.requests.append((url.path, query, {k.lower(): v for k, v in self.headers.items()}))
            case, _, rest = url.path.lstrip("/").partition("/")
            if case == "truncated":  # promises more body than it sends, then hangs up
                self.send_response(200)
                self.send_header("Content-Length", "500")
                self.end_headers()
                self.wfile.write(b'{"data": {')
                self.close_connection = True
                return None
            if case == "slow":
                time.sleep(SLOW_SECONDS)
                return self.send(200, key_body(100.0, 80.0))
            if rest == "api/v1/key":
                if self.headers.get("Authorization") != f"Bearer {KEY}":
                    return self.send(401, {"error": {"code": 401, "message": "bad key"}})
                return self.send(*OPENROUTER_CASES[case])
            if rest == "v1/organizations/cost_report":
                if self.headers.get("x-api-key") != ADMIN or not self.headers.get("anthropic-version"):
                    return self.send(401, {"type": "error", "error": {"type": "authentication_error"}})
                return self.send(*anthropic_case(case, query))
            if rest == "v1/organization/costs":
                if self.headers.get("Authorization") != f"Bearer {ADMIN}":
                    return self.send(401, {"error": {"message": "bad admin key"}})
                return self.send(*openai_case(case, query))
            self.send(404, {"error": "no such case"})

    return Handler


def anthropic_case(case: str, query: dict) -> tuple[int, bytes | dict]:
    """Two pages of daily buckets; amounts are decimal strings in cents ($12.50 + $7.25 = $19.75)."""
    if case == "forbidden":
        return 403, {"type": "error", "error": {"type": "permission_error"}}
    if case == "wrong-shape":
        return 200, {"results": []}
    bucket = lambda cents: {"starting_at": "2026-12-01T00:00:00Z", "ending_at": "2026-12-02T00:00:00Z",  # noqa: E731
                            "results": [{"currency": "USD", "amount": cents, "cost_type": "tokens"}]}
    if "page" not in query:
        return 200, {"data": [bucket("1250.00")], "has_more": True, "next_page": "page-2"}
    return 200, {"data": [bucket("725")], "has_more": False, "next_page": None}


def openai_case(case: str, query: dict) -> tuple[int, bytes | dict]:
    """One page of daily buckets with amounts in dollars ($3.00 + $1.50)."""
    if case == "unauthorized":
        return 401, {"error": {"message": "invalid admin key"}}
    result = lambda usd: {"object": "organization.costs.result", "amount": {"value": usd, "currency": "usd"}}  # noqa: E731
    return 200, {"object": "page", "has_more": False, "next_page": None,
                 "data": [{"object": "bucket", "start_time": 1764547200, "end_time": 1764633600,
                           "results": [result(3.0), result(1.5)]}]}


@pytest.fixture(scope="module")
def provider_server() -> Iterator[tuple[str, Recorder]]:
    """A real HTTP server on 127.0.0.1 (random port), shut down after the module."""
    recorder = Recorder()
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(recorder))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", recorder
    finally:
        server.shutdown()
        server.server_close()


def openrouter(base: str, case: str) -> OpenRouterSource:
    return OpenRouterSource(KEY, f"{base}/{case}", CLIENT_TIMEOUT)


def config_for(base: str, case: str, provider: str = "openrouter", **extra: object) -> BudgetConfig:
    return BudgetConfig.model_validate({
        "provider": provider, "key_env": "OPENROUTER_API_KEY", "key_sha256": key_fingerprint(KEY),
        "production_reserve_usd": 20.0, "pair_cap_usd": 10.0, "arm_ceiling_usd": 5.0, "base_url": f"{base}/{case}",
        "timeout_seconds": CLIENT_TIMEOUT, **extra,
    })


def test_ok_reads_limit_remaining_and_sends_bearer(provider_server) -> None:
    base, recorder = provider_server
    reading = openrouter(base, "ok").read()
    assert (reading.balance_usd, reading.key_ceiling_usd, reading.usage_usd) == (80.0, 100.0, 20.0)
    path, _, headers = recorder.requests[-1]
    assert path == "/ok/api/v1/key" and headers["authorization"] == f"Bearer {KEY}"


def test_no_ceiling_reads_as_none(provider_server) -> None:
    assert openrouter(provider_server[0], "no-ceiling").read().key_ceiling_usd is None


@pytest.mark.parametrize("case", ["unauthorized", "forbidden"])
def test_rejected_key_raises_key_rejected(provider_server, case: str) -> None:
    with pytest.raises(KeyRejected, match="HTTP 40[13]"):
        openrouter(provider_server[0], case).read()


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("server-error", "HTTP 500"),
        ("malformed", "not JSON"),
        ("wrong-shape", "'data' object"),
        ("non-numeric", "data.limit_remaining"),
        ("slow", "no answer within 0.5 s"),
        ("truncated", "IncompleteRead"),
    ],
)
def test_unreadable_balance_raises_balance_unavailable(provider_server, case: str, message: str) -> None:
    with pytest.raises(BalanceUnavailable, match=message):
        openrouter(provider_server[0], case).read()


def test_connection_refused_is_a_transport_error() -> None:
    import socket

    with socket.socket() as probe:  # a port that was free a moment ago and has no listener now
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    with pytest.raises(BalanceUnavailable):
        OpenRouterSource(KEY, f"http://127.0.0.1:{port}", CLIENT_TIMEOUT).read()


# ------------------------------------------------------------------ the guard over HTTP, case by case

@pytest.mark.parametrize(
    ("case", "allowed", "failing_step"),
    [
        ("ok", True, None),
        ("no-ceiling", False, "per-key-budget"),
        ("low-balance", False, "shared-headroom"),
        ("unauthorized", False, "per-key-budget"),
        ("forbidden", False, "per-key-budget"),
        ("server-error", False, None),
        ("slow", False, None),
        ("malformed", False, None),
        ("wrong-shape", False, None),
    ],
)
def test_preflight_over_http(provider_server, case: str, allowed: bool, failing_step: str | None) -> None:
    base, _ = provider_server
    config = config_for(base, case)
    decision = preflight(config, open_source(config, Path("."), {"OPENROUTER_API_KEY": KEY}, NOW), KEY, NOW)
    assert decision.allowed is allowed
    if failing_step:
        assert decision.reason.startswith(failing_step)
    if not allowed and failing_step is None:  # transport failures at preflight: recorded unobserved, pair not started
        assert {s.step: s.status for s in decision.steps}["per-key-budget"] == "unobserved"


def test_between_arms_transport_error_fails_open_401_fails_closed(provider_server) -> None:
    """The asymmetry of the seed: a flaky GET does not abandon a paid pair; a rejected key stops it."""
    base, _ = provider_server
    start = preflight(config_for(base, "ok"), openrouter(base, "ok"), KEY, NOW)
    assert start.allowed
    for case in ("server-error", "slow", "malformed"):
        decision = check_drain(config_for(base, case), openrouter(base, case), KEY, start, 2.0, 3.0, NOW)
        assert (decision.allowed, decision.outcome) == (True, "unobserved"), case
    for case in ("unauthorized", "forbidden"):
        decision = check_drain(config_for(base, case), openrouter(base, case), KEY, start, 2.0, 3.0, NOW)
        assert (decision.allowed, decision.outcome) == (False, "fail"), case
        assert "fail-closed" in decision.reason


def test_between_arms_low_balance_reads_as_drain(provider_server) -> None:
    """ok said 80 left; low-balance says 12: a 68 drain against 2 declared stops the pair."""
    base, _ = provider_server
    start = preflight(config_for(base, "ok"), openrouter(base, "ok"), KEY, NOW)
    decision = check_drain(config_for(base, "low-balance"), openrouter(base, "low-balance"), KEY, start, 2.0, 3.0, NOW)
    assert not decision.allowed and decision.observed_drain_usd == pytest.approx(68.0)


# ------------------------------------------------------------------ admin cost reports

def test_anthropic_cost_report_pages_and_cents(provider_server) -> None:
    base, recorder = provider_server
    start = datetime(2026, 12, 1, tzinfo=UTC)
    reading = AnthropicCostSource(ADMIN, f"{base}/ok", CLIENT_TIMEOUT, 100.0, start).read()
    assert reading.usage_usd == pytest.approx(19.75) and reading.balance_usd == pytest.approx(80.25)
    first, second = recorder.requests[-2:]
    assert first[1]["starting_at"] == ["2026-12-01T00:00:00Z"] and second[1]["page"] == ["page-2"]
    assert first[2]["anthropic-version"] == "2023-06-01"


def test_anthropic_forbidden_and_wrong_shape(provider_server) -> None:
    base, _ = provider_server
    start = datetime(2026, 12, 1, tzinfo=UTC)
    with pytest.raises(KeyRejected):
        AnthropicCostSource(ADMIN, f"{base}/forbidden", CLIENT_TIMEOUT, 100.0, start).read()
    with pytest.raises(BalanceUnavailable, match="'has_more'"):
        AnthropicCostSource(ADMIN, f"{base}/wrong-shape", CLIENT_TIMEOUT, 100.0, start).read()


def test_openai_costs_in_dollars_from_period_start(provider_server) -> None:
    base, recorder = provider_server
    config = config_for(base, "ok", provider="openai-admin", admin_key_env="OPENAI_ADMIN_KEY",
                        declared_ceiling_usd=50.0, period_start="2026-12-01")
    source = open_source(config, Path("."), {"OPENAI_ADMIN_KEY": ADMIN}, NOW)
    assert isinstance(source, OpenAICostSource)
    reading = source.read()
    assert reading.usage_usd == pytest.approx(4.5) and reading.balance_usd == pytest.approx(45.5)
    assert recorder.requests[-1][1]["start_time"] == [str(int(datetime(2026, 12, 1, tzinfo=UTC).timestamp()))]
    with pytest.raises(KeyRejected):
        OpenAICostSource(ADMIN, f"{base}/unauthorized", CLIENT_TIMEOUT, 50.0, NOW).read()


def test_admin_source_without_declared_ceiling_fails_step2(provider_server) -> None:
    """The cost APIs report spending, not limits: with no declared ceiling the key counts as uncapped."""
    base, _ = provider_server
    config = config_for(base, "ok", provider="openai-admin", admin_key_env="OPENAI_ADMIN_KEY")
    source = open_source(config, Path("."), {"OPENAI_ADMIN_KEY": ADMIN}, NOW)
    decision = preflight(config, source, KEY, NOW)
    assert not decision.allowed and decision.reason.startswith("per-key-budget")
