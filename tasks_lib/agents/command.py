"""The `command` agent: any executable, run in the sandbox once per prompt, with runner-run hooks.

Protocol (what the executable sees, per prompt):

- argv: the configured `argv`, run in `session.sandbox` with the workspace as cwd (read-write).
- stdin: the prompt, then (first prompt only, in the notes arm) the notes file its harness loads from
  the session's HOME (`notes_context`), then, for each hook that delivered context before this prompt, a blank line
  and `<system-reminder>\\n<Event> hook additional context: <context>\\n</system-reminder>\\n`.
- environment (nothing else from the host): `PATH`, `LANG`, the configured `env`, the memory
  environment `session.env` (the realm, and the replica file or socket in an arm with memory), and, named
  in `tasks_lib.memory.env`: `WORKSPACE_ENV` (the workspace as the command sees it), `HOOK_ARGV_ENV`
  (JSON list), `PROMPT_INDEX_ENV` (0-based), `PROMPT_COUNT_ENV`, `SESSION_ID_ENV` (the same for
  every prompt of the session) and `TRANSCRIPT_ENV` (a read-only JSON-lines file of the transcript
  steps so far, for resuming across prompts: the sandbox's HOME does not persist), and `MODEL_ENV`
  when a model is configured (the agent's `model` option, or the session's; the run records it, so
  two models behind one command never share a comparability key).
- stdout: JSON lines, one transcript step each:
  `{"kind": "message" | "tool-call" | "tool-result" | "error" | "context" | "prompt", "text": "..."}`
  and usage as `{"kind": "usage", "input_tokens": 10, "output_tokens": 5, "cost_usd": 0.001}`
  (each number optional). When any non-blank line is not such an object, the whole stdout is
  one agent message. Stderr, when not empty, is one agent `error` step.

Delivery cannot be forged: the runner itself calls `session.hook_argv` before each prompt
(SessionStart once, then UserPromptSubmit) and records what it printed as a `hook` step; every
step the executable reports is recorded with source `agent` (`tool` for a tool result) whatever
source it claims, so a provenance block it prints never confirms delivery. The hook runs on the
host in a private scratch directory, never in the workspace (a module the agent planted there
cannot shadow the hook's imports). A crash, a non-zero exit or a timeout ends the session there;
follow-up prompts are not sent.

The shared pieces (`call_hook`, `InfraFailure`, `command_env`) are used by `openai_chat` too.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import tempfile
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript, TranscriptStep
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.agents.registry import register_agent
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.delivery.hook import EVENTS
from tasks_lib.memory.delivery.notes import NOTES_LANE, NOTES_PATHS, read_notes
from tasks_lib.memory.env import (
    HOOK_ARGV_ENV,
    MODEL_ENV,
    PROMPT_COUNT_ENV,
    PROMPT_INDEX_ENV,
    SESSION_ID_ENV,
    SOCKET_ENV,
    STORE_ENV,
    TRANSCRIPT_ENV,
    WORKSPACE_ENV,
)
from tasks_lib.sandbox.base import (
    DEFAULT_PATH,
    ReadOnlyMount,
    Sandbox,
    SandboxLimits,
    SandboxRequest,
)
from tasks_lib.sandbox.errors import SandboxError, UnknownSandboxError
from tasks_lib.sandbox.registry import get_sandbox

HOOK_TIMEOUT_SECONDS = 60.0
"""Longest a hook may run before it is killed and recorded as an error (nothing delivered)."""
MAX_ERROR_CHARS = 4_000
"""Characters of a stderr or error text kept in a transcript step."""
STEP_KINDS = ("message", "tool-call", "tool-result", "error", "context", "prompt", "usage")
"""Kinds a command agent may report on stdout."""
NON_AGENT_CLAIMS = frozenset({"user", "system", "hook"})
"""Sources a command agent may claim but never gets."""
WRAPPER = f'{WORKSPACE_ENV}="$PWD"; export {WORKSPACE_ENV}; exec "$@" < "$0"'
"""`sh -c` script that feeds the prompt file to the agent on stdin (SandboxRequest has no stdin)."""


class InfraFailure(MemtrialError):
    """The apparatus failed (hook or sandbox could not start, endpoint unreachable): not the agent's fault."""


@dataclass(frozen=True)
class HookCall:
    """What one runner-run hook call delivered and the steps that record it."""

    context: str
    """The additional context delivered to the agent ('' when none)."""
    steps: tuple[TranscriptStep, ...]
    """A `hook` context step when something was delivered; a `system` error step when the hook failed."""


def defang(text: str) -> str:
    """`text` with HTML comment openers broken, so an error text can never read as a delivered block."""
    return text.replace("<!--", "<!_-")


def reminder(event: str, context: str) -> str:
    """Hook context as the agent receives it (the shape Claude Code uses)."""
    return f"<system-reminder>\n{event} hook additional context: {context}\n</system-reminder>"


def notes_context(session: AgentSession) -> tuple[str, list[TranscriptStep]]:
    """What a harness loads at session start from the user-level notes file of the session's HOME
    (`tasks_lib.memory.delivery.notes`; the notes arm's only channel): the reminder the agent receives,
    worded as Claude Code words its user memory, and a `system` context step on the `notes-file`
    channel; ('', []) when HOME holds no notes file (every other arm)."""
    notes = read_notes(session.home)
    if not notes:
        return "", []
    text = f"<system-reminder>\nContents of ~/{NOTES_PATHS[0]} (user's private global instructions for all projects):\n\n{notes}</system-reminder>"
    return text, [TranscriptStep(source="system", kind="context", text=notes, channel=NOTES_LANE)]


def command_env(*layers: Mapping[str, str]) -> dict[str, str]:
    """A scrubbed environment: PATH and LANG, then `layers` in order; nothing from the host."""
    env = {"PATH": DEFAULT_PATH, "LANG": "C.UTF-8"}
    for layer in layers:
        env.update(layer)
    return env


def call_hook(
    session: AgentSession,
    event: str,
    session_id: str,
    prompt: str | None = None,
    timeout_seconds: float = HOOK_TIMEOUT_SECONDS,
) -> HookCall:
    """Run `session.hook_argv` for hook `event` as Claude Code would, on the host, and record it.

    The event JSON goes to stdin; the environment is PATH, LANG, HOME=`session.home` and
    `session.env` only; the cwd is a fresh private directory (never the workspace). Stdout is
    read as `{"hookSpecificOutput": {"additionalContext": ...}}` or else as plain context. A
    non-zero exit or a timeout delivers nothing and is recorded as a `system` error step.

    Raises:
        InfraFailure: the hook command could not be started.
    """
    if event not in EVENTS:
        raise ValueError(f"event {event!r} is not one of {', '.join(EVENTS)}")
    payload: dict[str, object] = {
        "hook_event_name": event, "session_id": session_id, "transcript_path": "", "cwd": str(session.workspace),
    }
    if event == "UserPromptSubmit":
        payload["prompt"] = prompt or ""
    else:
        payload["source"] = "startup"
    scratch = tempfile.mkdtemp()
    try:
        done = subprocess.run(
            list(session.hook_argv), input=json.dumps(payload).encode(), capture_output=True, cwd=scratch,
            env=command_env({"HOME": str(session.home)}, session.env), timeout=timeout_seconds, check=False,
        )
    except subprocess.TimeoutExpired:
        return HookCall("", (_error_step(f"{event} hook timed out after {timeout_seconds:g}s; nothing delivered"),))
    except OSError as error:
        raise InfraFailure(f"hook_argv {session.hook_argv[0]!r} could not be started for {event}: {error}") from error
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    stderr = done.stderr.decode("utf-8", "replace").strip()
    if done.returncode != 0:
        return HookCall("", (_error_step(f"{event} hook exited {done.returncode}; nothing delivered: {stderr}"),))
    context = _hook_context(done.stdout.decode("utf-8", "replace"))
    if not context:
        return HookCall("", ())
    return HookCall(context, (TranscriptStep(source="hook", kind="context", text=context, channel=EVENTS[event]),))


def _hook_context(stdout: str) -> str:
    text = stdout.strip()
    if not text:
        return ""
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        return text
    if not isinstance(parsed, dict):
        return text
    output = parsed.get("hookSpecificOutput")
    context = output.get("additionalContext") if isinstance(output, dict) else None
    return context if isinstance(context, str) else ""


def _error_step(text: str) -> TranscriptStep:
    return TranscriptStep(source="system", kind="error", text=defang(text[-MAX_ERROR_CHARS:]))


def open_sandbox(name: str, options: Mapping[str, object]) -> Sandbox:
    """The sandbox provider `name`.

    Raises:
        AgentSetupError: no provider has that name.
        InfraFailure: the provider cannot run here.
    """
    try:
        return get_sandbox(name, **options)
    except UnknownSandboxError as error:
        raise AgentSetupError(f"AgentSession.sandbox: {error}") from error
    except SandboxError as error:
        raise InfraFailure(f"sandbox {name!r} is unavailable: {error}") from error


def memory_mounts(env: Mapping[str, str]) -> tuple[ReadOnlyMount, ...]:
    """Read-only mounts that let a sandboxed agent reach its memory replica (file, or socket folder)."""
    mounts = []
    db, socket_path = env.get(STORE_ENV, ""), env.get(SOCKET_ENV, "")
    if db and Path(db).is_absolute() and Path(db).exists():
        mounts.append(ReadOnlyMount(source=Path(db)))
    if socket_path and Path(socket_path).is_absolute() and Path(socket_path).parent.is_dir():
        mounts.append(ReadOnlyMount(source=Path(socket_path).parent))
    return tuple(mounts)


def parse_agent_output(stdout: str) -> tuple[list[TranscriptStep], int, int, float]:
    """Steps, input tokens, output tokens and cost from a command agent's stdout (see module doc).

    Every step is agent-sourced (`tool` for a tool result); claimed sources are counted in a
    `system` note, never honoured.
    """
    lines = [line for line in stdout.splitlines() if line.strip()]
    records: list[dict[str, object]] = []
    for line in lines:
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            break
        if not isinstance(record, dict) or record.get("kind") not in STEP_KINDS:
            break
        records.append(record)
    if len(records) != len(lines):
        return ([TranscriptStep(source="agent", kind="message", text=stdout)] if stdout.strip() else []), 0, 0, 0.0
    steps: list[TranscriptStep] = []
    tokens_in = tokens_out = 0
    cost = 0.0
    claims = 0
    for record in records:
        kind = str(record["kind"])
        claims += record.get("source") in NON_AGENT_CLAIMS
        if kind == "usage":
            got_in, got_out, got_cost = (_count(record.get(k)) for k in ("input_tokens", "output_tokens", "cost_usd"))
            tokens_in, tokens_out, cost = tokens_in + int(got_in), tokens_out + int(got_out), cost + got_cost
            steps.append(TranscriptStep(source="agent", kind="usage", text=f"input_tokens={int(got_in)} output_tokens={int(got_out)} cost_usd={got_cost:g}"))
            continue
        text = record.get("text")
        steps.append(TranscriptStep(
            source="tool" if kind == "tool-result" else "agent", kind=kind,  # type: ignore[arg-type]
            text=text if isinstance(text, str) else json.dumps(text),
        ))
    if claims:
        steps.append(TranscriptStep(
            source="system", kind="error",
            text=f"{claims} reported step(s) claimed a user/system/hook source; recorded as agent (only the runner writes those)",
        ))
    return steps, tokens_in, tokens_out, cost


def _count(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        return 0
    return value


class CommandAgent(Agent):
    """Any executable agent: prompt on stdin, JSON-lines (or plain) transcript on stdout, in the sandbox."""

    name = "command"

    def __init__(
        self,
        argv: Sequence[str],
        *,
        limits: SandboxLimits | None = None,
        hidden_paths: Sequence[Path] = (),
        mounts: Sequence[ReadOnlyMount] = (),
        env: Mapping[str, str] | None = None,
        sandbox_options: Mapping[str, object] | None = None,
        hook_timeout_seconds: float = HOOK_TIMEOUT_SECONDS,
        model: str | None = None,
    ) -> None:
        """`argv` runs inside the sandbox; `limits` (network none by default) cap each prompt's run.

        `hidden_paths` (the runner-owned area) are masked; `mounts` are extra read-only mounts;
        `env` adds variables for the agent (e.g. an API key it needs); `model` names the model the
        command asks for, when it asks for one (a session's own model wins). Raises
        AgentSetupError for an empty argv.
        """
        if not argv or not all(isinstance(a, str) and a for a in argv):
            raise AgentSetupError(f"command agent: argv must be a non-empty list of non-empty strings, got {list(argv)!r}")
        self.argv = tuple(argv)
        self.limits = limits or SandboxLimits()
        self.hidden_paths = tuple(Path(p) for p in hidden_paths)
        self.mounts = tuple(mounts)
        self.env = dict(env or {})
        self.sandbox_options = dict(sandbox_options or {})
        self.hook_timeout_seconds = hook_timeout_seconds
        self.model = model

    def run(self, session: AgentSession) -> AgentRun:
        """Run the executable once per prompt, each after the runner-run hooks; see the module doc."""
        started = time.monotonic()
        deadline = started + session.timeout_seconds
        session_id = str(uuid.uuid4())  # a plain UUID, as Claude Code uses: it names no agent or harness
        steps: list[TranscriptStep] = []
        totals = [0, 0, 0.0]
        exit_code: int | None = None
        infra: str | None = None
        unenforced: dict[str, None] = {}
        try:
            sandbox = open_sandbox(session.sandbox, {**session.sandbox_options, **self.sandbox_options})
        except InfraFailure as error:
            return self._result(session, session_id, steps, None, str(error), totals, started)
        io_dir = Path(tempfile.mkdtemp())
        io_dir.chmod(0o755)  # the sandboxed command runs unprivileged (a uid of its own under a root runner)
        try:
            pending: list[tuple[str, str]] = []
            notes, notes_steps = notes_context(session)
            steps.extend(notes_steps)
            start = self._hook(session, "SessionStart", session_id, None, steps)
            if start.context:
                pending.append(("SessionStart", start.context))
            for index, prompt in enumerate(session.prompts):
                steps.append(TranscriptStep(source="user", kind="prompt", text=prompt))
                call = self._hook(session, "UserPromptSubmit", session_id, prompt, steps)
                if call.context:
                    pending.append(("UserPromptSubmit", call.context))
                stdin = prompt + (f"\n\n{notes}" if notes and index == 0 else "")
                stdin += "".join(f"\n\n{reminder(event, context)}" for event, context in pending) + "\n"
                pending = []
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    steps.append(_error_step(f"session timeout of {session.timeout_seconds:g}s reached before prompt {index}"))
                    exit_code = None
                    break
                result = sandbox.run(self._request(session, session_id, index, stdin, steps, io_dir, remaining))
                unenforced.update(dict.fromkeys(result.unenforced))
                if result.unenforced and index == 0:
                    steps.append(TranscriptStep(source="system", kind="message", text="sandbox did not enforce: " + "; ".join(result.unenforced)))
                parsed, got_in, got_out, got_cost = parse_agent_output(result.stdout.text)
                steps.extend(parsed)
                totals = [totals[0] + got_in, totals[1] + got_out, totals[2] + got_cost]
                if result.stderr.text.strip():
                    steps.append(TranscriptStep(source="agent", kind="error", text=result.stderr.text[-MAX_ERROR_CHARS:]))
                exit_code = result.exit_code
                if result.killed:
                    reason = f"timed out after {result.wall_seconds:.1f}s" if result.timed_out else f"killed ({result.kill_reason})"
                    steps.append(_error_step(f"agent process {reason} on prompt {index}; follow-up prompts not sent"))
                    break
                if result.exit_code != 0:
                    steps.append(_error_step(f"agent exited {result.exit_code} on prompt {index}; follow-up prompts not sent"))
                    break
        except InfraFailure as error:
            infra, exit_code = str(error), None
        except SandboxError as error:
            infra, exit_code = f"sandbox {session.sandbox!r} could not run the agent: {error}", None
        finally:
            sandbox.close()
            shutil.rmtree(io_dir, ignore_errors=True)
        return self._result(session, session_id, steps, exit_code, infra, totals, started, unenforced)

    def _hook(self, session: AgentSession, event: str, session_id: str, prompt: str | None, steps: list[TranscriptStep]) -> HookCall:
        call = call_hook(session, event, session_id, prompt, self.hook_timeout_seconds)
        steps.extend(call.steps)
        return call

    def _request(
        self, session: AgentSession, session_id: str, index: int, stdin: str, steps: list[TranscriptStep], io_dir: Path, remaining: float,
    ) -> SandboxRequest:
        stdin_file, transcript_file = io_dir / "stdin", io_dir / "transcript.jsonl"
        stdin_file.write_text(stdin, encoding="utf-8")
        transcript_file.write_text("".join(s.model_dump_json() + "\n" for s in steps), encoding="utf-8")
        env = command_env(self.env, session.env, {
            HOOK_ARGV_ENV: json.dumps(list(session.hook_argv)),
            PROMPT_INDEX_ENV: str(index),
            PROMPT_COUNT_ENV: str(len(session.prompts)),
            SESSION_ID_ENV: session_id,
            TRANSCRIPT_ENV: str(transcript_file),
        }, {MODEL_ENV: model} if (model := session.model or self.model) else {})
        limits = self.limits.model_copy(update={"timeout_seconds": min(self.limits.timeout_seconds, max(remaining, 0.001))})
        return SandboxRequest(
            argv=("/bin/sh", "-c", WRAPPER, str(stdin_file), *self.argv),
            workspace=session.workspace.resolve(),
            env=env,
            mounts=(ReadOnlyMount(source=io_dir), *memory_mounts(session.env), *self.mounts),
            hidden_paths=self.hidden_paths,
            limits=limits,
        )

    def _result(
        self, session: AgentSession, session_id: str, steps: list[TranscriptStep], exit_code: int | None, infra: str | None,
        totals: list[float], started: float, unenforced: dict[str, None] | None = None,
    ) -> AgentRun:
        return AgentRun(
            model=session.model or self.model,
            exit_code=exit_code,
            infra_failure=infra,
            input_tokens=int(totals[0]),
            output_tokens=int(totals[1]),
            cost_usd=float(totals[2]),
            wall_seconds=round(time.monotonic() - started, 6),
            transcript=Transcript(agent=self.name, session_id=session_id, steps=tuple(steps)),
            sandbox_unenforced=tuple(unenforced or ()),
        )


register_agent(CommandAgent.name, CommandAgent)
