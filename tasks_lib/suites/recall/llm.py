"""The model-backed `ask` step: an OpenAI-compatible chat completion over the session's context.

The prompt holds the retained conversation and the recalled memories, each line marked with its
turn number, then the question, and tells the model to answer briefly or say it does not know.
Each sample is one request; the caller scores every sample and takes the majority verdict.

`guard_model_reader` puts the budget guard (tasks_lib.budget preflight: key identity, per-key
ceiling, shared headroom) in front of the first request. Only a loopback endpoint (a local model,
which costs nothing) runs without a budget configuration.
"""

from __future__ import annotations

import ipaddress
import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path

from tasks_lib.budget import BudgetStop, GuardDecision, load_budget_config, open_source, preflight
from tasks_lib.suites.recall.errors import RecallModelError
from tasks_lib.suites.recall.retention import Turn

SYSTEM_PROMPT = (
    "You are an assistant continuing a long conversation. You are shown what you still have in "
    "context and what your memory recalled. Answer the user's question in one short sentence using "
    "only that information; if the most recent statement corrects an older one, use the most recent. "
    "If the information is not there, answer exactly: I don't know."
)
"""The instruction sent with every question."""


def is_loopback(base_url: str) -> bool:
    """Whether the endpoint is this machine (`localhost` or a loopback address): a local model spends no money."""
    host = urllib.parse.urlsplit(base_url).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def guard_model_reader(base_url: str, budget_config: str | None, env: Mapping[str, str] | None = None,
                       now: datetime | None = None) -> GuardDecision | None:
    """The budget guard's preflight before a model reader's first request; None for a loopback endpoint.

    Raises RecallModelError when a non-loopback endpoint has no budget configuration, BudgetStop
    (carrying the decision) when the guard refuses, and the budget's config errors for a bad file.
    """
    if is_loopback(base_url):
        return None
    if not budget_config:
        raise RecallModelError(
            f"model base URL {base_url!r} is not on this machine, so it may cost money: give a budget guard "
            "config (--budget FILE, see `memtrial budget check`) or use a local endpoint on 127.0.0.1"
        )
    env = os.environ if env is None else env
    now = now or datetime.now(UTC)
    path = Path(budget_config)
    config = load_budget_config(path)
    decision = preflight(config, open_source(config, path.parent, env, now), env.get(config.key_env), now)
    if not decision.allowed:
        raise BudgetStop(decision, f"budget guard refused the recall sweep's model reader: {decision.reason} ({decision.source})")
    return decision


def render_prompt(question: str, retained: Sequence[Turn], recalled: Sequence[Turn]) -> str:
    """The user message: retained context, recalled memories, then the question."""
    lines = ["Conversation still in context:"]
    lines += [f"[turn {t.index}] {t.speaker}: {t.text}" for t in retained] or ["(nothing)"]
    lines.append("Recalled from memory:")
    lines += [f"[turn {t.index}] {t.speaker}: {t.text}" for t in recalled] or ["(nothing)"]
    lines.append(f"Question: {question}")
    return "\n".join(lines)


class ChatModelAsker:
    """Asks an OpenAI-compatible `/chat/completions` endpoint; `samples` answers per question."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        samples: int = 1,
        temperature: float = 0.0,
        api_key_env: str | None = "OPENAI_API_KEY",
        timeout_seconds: float = 60.0,
    ) -> None:
        """Raises RecallModelError for a base URL that is not http(s), an empty model or samples < 1."""
        if not base_url.startswith(("http://", "https://")):
            raise RecallModelError(f"model base URL {base_url!r} must start with http:// or https://")
        if not model.strip():
            raise RecallModelError("model name is empty; give the model to ask")
        if samples < 1 or timeout_seconds <= 0:
            raise RecallModelError(f"samples must be >= 1 and the timeout positive, got {samples} and {timeout_seconds}")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.samples = samples
        self.temperature = temperature
        self.api_key_env = api_key_env
        self.timeout_seconds = timeout_seconds
        self.calls = 0
        """Requests made so far."""
        self.tokens = 0
        """Total tokens the endpoint reported so far."""

    def answers(self, question: str, retained: Sequence[Turn], recalled: Sequence[Turn]) -> list[str]:
        """One answer per sample; raises RecallModelError on a transport error or a malformed reply."""
        body = {
            "model": self.model,
            "temperature": self.temperature,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": render_prompt(question, retained, recalled)},
            ],
        }
        return [self._complete(body) for _ in range(self.samples)]

    def _complete(self, body: dict[str, object]) -> str:
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers, method="POST")
        self.calls += 1
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_seconds) as response:
                raw = response.read()
        except urllib.error.HTTPError as error:
            detail = error.read(300).decode("utf-8", "replace")
            raise RecallModelError(f"POST {self.url}: HTTP {error.code}: {detail}") from None
        except (urllib.error.URLError, OSError) as error:
            raise RecallModelError(f"POST {self.url}: {getattr(error, 'reason', error)}; is the endpoint up?") from None
        try:
            reply = json.loads(raw)
            content = reply["choices"][0]["message"]["content"]
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            raise RecallModelError(f"POST {self.url}: the reply has no choices[0].message.content: {raw[:200]!r}") from None
        if not isinstance(content, str):
            raise RecallModelError(f"POST {self.url}: choices[0].message.content is {type(content).__name__}, not text")
        usage = reply.get("usage") if isinstance(reply, dict) else None
        if isinstance(usage, dict) and isinstance(usage.get("total_tokens"), int):
            self.tokens += usage["total_tokens"]
        return content
