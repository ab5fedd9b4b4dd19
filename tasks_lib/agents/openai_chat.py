"""The `openai-chat` agent: a minimal built-in tool loop for any OpenAI-compatible endpoint.

Each turn is one `POST {base_url}/chat/completions` (stdlib urllib, no SDK) offering four tools:
`list_files`, `read_file`, `write_file` (workspace-relative paths, resolved on the host and
refused when they lead outside the workspace, symlinks included) and `run_command` (`sh -c` in
`session.sandbox` with the workspace as cwd, a scrubbed environment and the configured limits;
never on the host).

Memory reaches the model only through the session's hooks, as with Claude Code: the runner runs
`session.hook_argv` for SessionStart once and for UserPromptSubmit before every prompt (see
`command.call_hook`), records what it printed as a `hook` step with its channel, and adds it to
the conversation as a `<system-reminder>` (session start: in the system message; prompt time: in
the same user message, after the prompt). Follow-up prompts continue the same conversation.

Bounds: `max_turns` model calls per prompt, `session.timeout_seconds` for the whole session,
`request_timeout_seconds` per call, `command_timeout_seconds` per command. Tokens are summed
from each response's `usage`; cost comes from `prices` (USD per million input/output tokens by
model name), 0 for a model not in it. Exit codes: 0 when every prompt ended in a final answer,
TURN_LIMIT_EXIT when a prompt ran out of turns, None on the session timeout or an infrastructure
failure (endpoint unreachable or answering garbage, sandbox gone: `AgentRun.infra_failure`).
"""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript, TranscriptStep
from tasks_lib.agents.command import (
    InfraFailure,
    call_hook,
    command_env,
    defang,
    notes_context,
    open_sandbox,
    reminder,
)
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.agents.registry import register_agent
from tasks_lib.sandbox.base import Sandbox, SandboxLimits, SandboxRequest
from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.settings import OPENAI_BASE_URL

BASE_URL_ENV = OPENAI_BASE_URL.name
TURN_LIMIT_EXIT = 2
"""Exit code when a prompt ran out of turns before a final answer."""
MAX_TOOL_OUTPUT_CHARS = 20_000
"""Characters of a tool result sent back to the model (the rest is cut, and the model told so)."""
MAX_LIST_ENTRIES = 1_000
"""Entries `list_files` returns at most."""
SANDBOX_WORKSPACE = "/workspace"
"""Where namespace and container sandboxes show the workspace; accepted as a path prefix."""

INSTRUCTIONS = (
    "You are a coding agent working in a software repository. Use the tools to look at files, change them and "
    "run commands; file paths are relative to the repository root, and commands run with the repository root as "
    "the working directory. When the request is done, answer with a short summary and no tool call."
)
"""Default system message."""

TOOLS: list[dict[str, object]] = [
    {"type": "function", "function": {
        "name": "list_files", "description": "List files and folders under a folder of the repository (recursive).",
        "parameters": {"type": "object", "properties": {"path": {"type": "string", "description": "Folder, default '.'"}}},
    }},
    {"type": "function", "function": {
        "name": "read_file", "description": "Read a text file of the repository.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
    }},
    {"type": "function", "function": {
        "name": "write_file", "description": "Create or replace a text file of the repository with the given content.",
        "parameters": {"type": "object", "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                       "required": ["path", "content"]},
    }},
    {"type": "function", "function": {
        "name": "run_command", "description": "Run a shell command in the repository root; returns exit code, stdout and stderr.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    }},
]
"""Tool definitions offered on every call."""


class _Timeout(Exception):
    """The session's wall-clock limit was reached."""


def _clip(text: str, limit: int = MAX_TOOL_OUTPUT_CHARS) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"\n[... {len(text) - limit} more characters not shown]"


def resolve_in_workspace(workspace: Path, path: str) -> Path:
    """Host path of workspace path `path`, following symlinks; raises ValueError when it leads outside."""
    root = Path(os.path.realpath(workspace))
    text = path.strip() or "."
    for prefix in (SANDBOX_WORKSPACE, str(workspace), str(root)):
        if text == prefix or text.startswith(prefix.rstrip("/") + "/"):
            text = "." + text[len(prefix.rstrip("/")):]
            break
    if text.startswith("/"):
        raise ValueError(f"{path}: absolute paths outside the repository are not allowed; use a path relative to its root")
    resolved = Path(os.path.realpath(root / text))
    if resolved != root and root not in resolved.parents:
        raise ValueError(f"{path}: leads outside the repository")
    return resolved


class OpenAIChatAgent(Agent):
    """A tool-calling loop over an OpenAI-compatible chat completions endpoint."""

    name = "openai-chat"

    def __init__(
        self,
        base_url: str | None = None,
        *,
        model: str | None = None,
        api_key_env: str | None = "OPENAI_API_KEY",
        max_turns: int = 30,
        request_timeout_seconds: float = 120.0,
        command_timeout_seconds: float = 300.0,
        retries: int = 2,
        retry_backoff_seconds: float = 1.0,
        prices: Mapping[str, tuple[float, float]] | None = None,
        limits: SandboxLimits | None = None,
        hidden_paths: Sequence[Path] = (),
        sandbox_options: Mapping[str, object] | None = None,
        instructions: str = INSTRUCTIONS,
        max_tokens: int | None = None,
        temperature: float | None = None,
    ) -> None:
        """`base_url` (or MEMTRIAL_OPENAI_BASE_URL) ends before `/chat/completions`; `model` is used
        when the session names none; the bearer key is read from `api_key_env` at run time.

        Raises AgentSetupError when there is no base URL or a bound is not positive.
        """
        url = base_url or OPENAI_BASE_URL.text()
        if not url.startswith(("http://", "https://")):
            raise AgentSetupError(f"openai-chat: base_url {url!r} must be an http(s) URL; pass base_url or set {BASE_URL_ENV}")
        if max_turns < 1 or request_timeout_seconds <= 0 or command_timeout_seconds <= 0 or retries < 0:
            raise AgentSetupError("openai-chat: max_turns, request_timeout_seconds and command_timeout_seconds must be positive, retries >= 0")
        self.url = url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.max_turns = max_turns
        self.request_timeout_seconds = request_timeout_seconds
        self.command_timeout_seconds = command_timeout_seconds
        self.retries = retries
        self.retry_backoff_seconds = retry_backoff_seconds
        self.prices = dict(prices or {})
        self.limits = limits or SandboxLimits()
        self.hidden_paths = tuple(Path(p) for p in hidden_paths)
        self.sandbox_options = dict(sandbox_options or {})
        self.instructions = instructions
        self.max_tokens = max_tokens
        self.temperature = temperature

    # ------------------------------------------------------------------ the loop

    def run(self, session: AgentSession) -> AgentRun:
        """Run every prompt of `session` in one conversation; see the module doc for exit codes."""
        model = session.model or self.model
        if not model:
            raise AgentSetupError("openai-chat: no model; set AgentSession.model or the `model` option")
        started = time.monotonic()
        deadline = started + session.timeout_seconds
        session_id = f"openai-chat-{uuid.uuid4().hex[:16]}"
        self._unenforced: dict[str, None] = {}
        steps: list[TranscriptStep] = []
        usage = [0, 0]
        exit_code: int | None = 0
        infra: str | None = None
        sandbox: Sandbox | None = None
        try:
            sandbox = open_sandbox(session.sandbox, {**session.sandbox_options, **self.sandbox_options})
            system = self.instructions
            steps.append(TranscriptStep(source="system", kind="prompt", text=system))
            notes, notes_steps = notes_context(session)
            steps.extend(notes_steps)
            if notes:
                system += "\n\n" + notes
            start = call_hook(session, "SessionStart", session_id)
            steps.extend(start.steps)
            if start.context:
                system += "\n\n" + reminder("SessionStart", start.context)
            messages: list[dict[str, object]] = [{"role": "system", "content": system}]
            for prompt in session.prompts:
                steps.append(TranscriptStep(source="user", kind="prompt", text=prompt))
                call = call_hook(session, "UserPromptSubmit", session_id, prompt)
                steps.extend(call.steps)
                content = prompt + (f"\n\n{reminder('UserPromptSubmit', call.context)}" if call.context else "")
                messages.append({"role": "user", "content": content})
                if not self._answer(session, sandbox, model, messages, steps, usage, deadline):
                    steps.append(TranscriptStep(source="system", kind="error", text=f"turn limit of {self.max_turns} reached before a final answer"))
                    exit_code = TURN_LIMIT_EXIT
                    break
        except _Timeout:
            exit_code = None
            steps.append(TranscriptStep(source="system", kind="error", text=f"session timeout of {session.timeout_seconds:g}s reached"))
        except InfraFailure as error:
            exit_code, infra = None, str(error)
        except SandboxError as error:
            exit_code, infra = None, f"sandbox {session.sandbox!r} could not run a command: {error}"
        finally:
            if sandbox is not None:
                sandbox.close()
        input_price, output_price = self.prices.get(model, (0.0, 0.0))
        return AgentRun(
            exit_code=exit_code,
            infra_failure=infra,
            input_tokens=usage[0],
            output_tokens=usage[1],
            cost_usd=(usage[0] * input_price + usage[1] * output_price) / 1e6,
            wall_seconds=round(time.monotonic() - started, 6),
            transcript=Transcript(agent=self.name, session_id=session_id, steps=tuple(steps)),
            model=model,
            sandbox_unenforced=tuple(self._unenforced),
        )

    def _answer(
        self, session: AgentSession, sandbox: Sandbox, model: str, messages: list[dict[str, object]],
        steps: list[TranscriptStep], usage: list[int], deadline: float,
    ) -> bool:
        """Call the model until it answers without a tool call (True) or the turn limit is hit (False)."""
        for _ in range(self.max_turns):
            reply = self._complete(model, messages, deadline)
            reported = reply.get("usage")
            got: dict[str, object] = reported if isinstance(reported, dict) else {}
            used_in, used_out = _tokens(got.get("prompt_tokens")), _tokens(got.get("completion_tokens"))
            usage[0] += used_in
            usage[1] += used_out
            steps.append(TranscriptStep(source="system", kind="usage", text=f"input_tokens={used_in} output_tokens={used_out}"))
            message = _message_of(reply, self.url)
            text = message.get("content")
            calls = message.get("tool_calls") or []
            if not isinstance(calls, list):
                raise InfraFailure(f"POST {self.url}: choices[0].message.tool_calls is not a list")
            messages.append({"role": "assistant", "content": text if isinstance(text, str) else None, **({"tool_calls": calls} if calls else {})})
            if isinstance(text, str) and text.strip():
                steps.append(TranscriptStep(source="agent", kind="message", text=text))
            if not calls:
                return True
            for call in calls:
                call_id, name, arguments = _call_parts(call, self.url)
                steps.append(TranscriptStep(source="agent", kind="tool-call", text=f"{name} {arguments}"))
                output = self._tool(session, sandbox, name, arguments, deadline)
                steps.append(TranscriptStep(source="tool", kind="tool-result", text=output))
                messages.append({"role": "tool", "tool_call_id": call_id, "content": output})
        return False

    # ------------------------------------------------------------------ the endpoint

    def _complete(self, model: str, messages: list[dict[str, object]], deadline: float) -> dict[str, object]:
        """One chat completion; retries transport errors, 429 and 5xx. Raises InfraFailure or _Timeout."""
        body: dict[str, object] = {"model": model, "messages": messages, "tools": TOOLS, "tool_choice": "auto"}
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            body["temperature"] = self.temperature
        data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json"}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        problem = ""
        for attempt in range(self.retries + 1):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Timeout
            timeout = min(self.request_timeout_seconds, remaining)
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) checked above)
                    raw = response.read()
                break
            except urllib.error.HTTPError as error:
                detail = error.read(300).decode("utf-8", "replace")
                problem = f"HTTP {error.code}: {detail}"
                if error.code != 429 and error.code < 500:
                    raise InfraFailure(f"POST {self.url}: {problem}") from None
            except (urllib.error.URLError, OSError) as error:
                reason = getattr(error, "reason", error)
                if isinstance(reason, socket.timeout | TimeoutError) and timeout < self.request_timeout_seconds:
                    raise _Timeout from None
                problem = f"{type(reason).__name__}: {reason}"
            if attempt < self.retries:
                time.sleep(min(self.retry_backoff_seconds * 2**attempt, max(deadline - time.monotonic(), 0)))
        else:
            raise InfraFailure(f"POST {self.url}: {problem} (after {self.retries + 1} attempt(s)); is the endpoint up?")
        try:
            reply = json.loads(raw)
        except json.JSONDecodeError as error:
            raise InfraFailure(f"POST {self.url}: the response is not JSON ({error.msg} at {error.pos}): {raw[:200]!r}") from None
        if not isinstance(reply, dict):
            raise InfraFailure(f"POST {self.url}: the response is not a JSON object")
        return reply

    # ------------------------------------------------------------------ tools

    def _tool(self, session: AgentSession, sandbox: Sandbox, name: str, arguments: str, deadline: float) -> str:
        """Run one tool call; a bad call is an error text for the model, never an exception."""
        try:
            args = json.loads(arguments or "{}")
        except json.JSONDecodeError as error:
            return f"error: the arguments are not JSON ({error.msg})"
        if not isinstance(args, dict):
            return "error: the arguments must be a JSON object"
        try:
            if name == "list_files":
                return self._list_files(session.workspace, str(args.get("path") or "."))
            if name == "read_file":
                path = resolve_in_workspace(session.workspace, _string(args, "path"))
                return _clip(path.read_bytes().decode("utf-8", "replace"))
            if name == "write_file":
                path = resolve_in_workspace(session.workspace, _string(args, "path"))
                content = _string(args, "content", allow_empty=True)
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(content, encoding="utf-8")
                return f"wrote {len(content.encode())} bytes to {args['path']}"
            if name == "run_command":
                return self._run_command(session, sandbox, _string(args, "command"), deadline)
        except (ValueError, OSError) as error:
            return f"error: {error}"
        return f"error: unknown tool {name!r}; the tools are {', '.join(t['function']['name'] for t in TOOLS)}"  # type: ignore[index]

    @staticmethod
    def _list_files(workspace: Path, path: str) -> str:
        top = resolve_in_workspace(workspace, path)
        if not top.is_dir():
            raise ValueError(f"{path}: not a folder")
        root = Path(os.path.realpath(workspace))
        found: list[str] = []
        for folder, dirs, files in os.walk(top):
            dirs.sort()
            for entry in [*(d + "/" for d in dirs), *sorted(files)]:
                found.append(str((Path(folder) / entry).relative_to(root)) + ("/" if entry.endswith("/") else ""))
                if len(found) >= MAX_LIST_ENTRIES:
                    return "\n".join(found) + f"\n[stopped at {MAX_LIST_ENTRIES} entries]"
        return "\n".join(found) or "(empty)"

    def _run_command(self, session: AgentSession, sandbox: Sandbox, command: str, deadline: float) -> str:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise _Timeout
        timeout = min(self.command_timeout_seconds, self.limits.timeout_seconds, remaining)
        result = sandbox.run(SandboxRequest(
            argv=("/bin/sh", "-c", command),
            workspace=session.workspace.resolve(),
            env=command_env(),
            hidden_paths=self.hidden_paths,
            limits=self.limits.model_copy(update={"timeout_seconds": timeout}),
        ))
        self._unenforced.update(dict.fromkeys(result.unenforced))
        status = f"timed out after {timeout:g}s" if result.timed_out else (
            f"killed by signal {result.signal}" if result.exit_code is None else f"exit code {result.exit_code}")
        half = MAX_TOOL_OUTPUT_CHARS // 2
        return f"{status}\n--- stdout ---\n{_clip(result.stdout.text, half)}\n--- stderr ---\n{_clip(result.stderr.text, half)}"


def _tokens(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _string(args: Mapping[str, object], key: str, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str) or (not value and not allow_empty):
        raise ValueError(f"argument {key!r} must be a{'' if allow_empty else ' non-empty'} string")
    return value


def _message_of(reply: Mapping[str, object], url: str) -> dict[str, object]:
    choices = reply.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        error = reply.get("error")
        raise InfraFailure(f"POST {url}: no choices in the response{f' (error: {defang(str(error))[:300]})' if error else ''}")
    message = choices[0].get("message")
    if not isinstance(message, dict):
        raise InfraFailure(f"POST {url}: choices[0].message is missing")
    return message


def _call_parts(call: object, url: str) -> tuple[str, str, str]:
    function = call.get("function") if isinstance(call, dict) else None
    if not isinstance(call, dict) or not isinstance(function, dict) or not isinstance(function.get("name"), str):
        raise InfraFailure(f"POST {url}: a tool call has no function name: {str(call)[:200]}")
    arguments = function.get("arguments")
    return str(call.get("id") or ""), function["name"], arguments if isinstance(arguments, str) else json.dumps(arguments or {})


register_agent(OpenAIChatAgent.name, OpenAIChatAgent)
