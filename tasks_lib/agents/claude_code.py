"""The `claude-code` agent: the real Claude Code CLI (npm `@anthropic-ai/claude-code`), headless.

Per session the adapter

1. passes the memory hooks on the command line, `--settings '<json>'` (`settings_for`), and loads
   no settings file at all (`--setting-sources ""`): the hooks are the runner's, and nothing the
   agent writes (`~/.claude/settings.json`, the workspace's `.claude/`) can add, change or remove
   one, not even for a follow-up prompt. `SessionStart` and `UserPromptSubmit` both run
   `session.hook_argv`, joined with `shlex.join` because Claude Code runs a hook command through
   its own shell;
2. runs `claude -p --output-format stream-json --verbose --include-hook-events` once per prompt,
   the prompt on stdin, cwd = the workspace, HOME = `session.home`, TMPDIR = `<home>/tmp`, in
   permission mode `bypassPermissions` (file edits and commands need no approval). The first prompt fixes the session id (`--session-id`), each follow-up prompt
   resumes it (`--resume`);
3. turns the stream into `TranscriptStep`s (see `parse_stream`) and reads tokens and cost from the
   `result` message of each invocation.

How delivery is seen. With `--include-hook-events` the stream carries a `hook_response` system
message for every hook run, with the hook's stdout, exit code and outcome. A successful one
becomes a `hook` step whose text is the context the hook returned (`additionalContext` of its JSON,
or its plain stdout) and whose channel is the hook event; `tasks_lib.arm.injection` then confirms
delivery from it. This is the CLI's own report of what its hook produced, which Claude Code adds
to the model's context for these two events; the tests check against a scripted server that the
same marker reaches the request body (on) and never does (off).

Environment. Nothing of the runner's environment is passed on except PATH: the CLI gets HOME,
TMPDIR, LANG, the switches that stop non-essential traffic (telemetry, error reporting, the auto
updater), ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY from the adapter's configuration (or, when not
configured, the runner's variables of those names) and `session.env` (the memory switches). Run
as root (unconfined) the CLI refuses bypass mode outside a sandbox it recognises, so there
IS_SANDBOX=1 is set.

Confinement. The per-command `tasks_lib.sandbox` providers give every command a fresh private HOME
and no network, so they can neither keep the arm's HOME (hooks, the session files a follow-up
prompt resumes from) nor reach the model endpoint. The whole CLI session is confined with bubblewrap
instead (`tasks_lib.sandbox.session_confine`): the host seen through an allow-list (the toolchain,
the CLI's install, the Python that runs the hooks, memtrial; `session.hidden_paths` masked where
they lie inside those), the memory store's folder (for a root runner the store file alone) or the
socket's folder read-only, only the workspace and the HOME writable; the network is shared. A root runner never hands the CLI root:
it runs as a uid of its own for the session (`tasks_lib.sandbox.identity`), with no capabilities
and no new privileges, hooks included; the workspace and the HOME are lent to that uid for the
session and given back after it, and every process still owned by it is killed. Without a working
bwrap (or with `confine=False`) the CLI runs as a plain subprocess in its own session with its own
HOME and TMPDIR and a scrubbed environment, sharing the host filesystem and the runner's uid;
`confine=True` refuses that. Each transcript starts with a `system` step saying which of the two
happened.

Limits. The session's whole process tree (the CLI, its hooks, every command its tools start, over
all its prompts) runs in one cgroup of the adapter's `limits` (`tasks_lib.sandbox.cgroups`: memory
with no swap, process count, CPU quota), joined by a launcher before the CLI starts; its private
tmpfs folders are capped at `limits.tmpfs_mb` and their pages count in that memory. A tool call
that takes the tree past `memory_mb` ends the session: the transcript says `claude killed
(memory)`. Each limit this machine cannot hold (no cgroup controller, no bwrap for the tmpfs caps)
is named in the run's `sandbox_unenforced`; nothing is named when all hold. No per-process limit
(RLIMIT_AS) is set: Node reserves far more address space than it uses.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import subprocess
import time
import uuid
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tasks_lib
from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript, TranscriptStep
from tasks_lib.agents.errors import AgentSetupError
from tasks_lib.agents.registry import register_agent
from tasks_lib.memory.delivery.notes import NOTES_LANE, NOTES_PATHS, read_notes
from tasks_lib.memory.env import SOCKET_ENV, STORE_ENV
from tasks_lib.sandbox.base import DEFAULT_PATH, SandboxLimits
from tasks_lib.sandbox.capture import BoundedSink, drain_file
from tasks_lib.sandbox.cgroups import LAUNCHER_FAILED, RunCgroup, make_run_cgroup
from tasks_lib.sandbox.errors import SandboxError
from tasks_lib.sandbox.identity import RunIdentity, lent_workspace, run_identity
from tasks_lib.sandbox.procs import TreeWatcher, kill_tree
from tasks_lib.sandbox.session_confine import bwrap_for_sessions, python_paths, session_prefix
from tasks_lib.settings import CHECKOUT_ROOT, CLAUDE_BINARY

PINNED_VERSION = "2.1.332"
"""The CLI version `scripts/install_claude_code.sh` installs and the tests drive."""

DEFAULT_BINARY = CHECKOUT_ROOT / ".memtrial" / "npm-claude" / "node_modules" / ".bin" / "claude"
"""Where `scripts/install_claude_code.sh` puts the CLI."""

BINARY_ENV = CLAUDE_BINARY.name

DEFAULT_MODEL = "claude-sonnet-4-5"
"""Model asked for when neither the session nor the adapter names one."""

HOOK_EVENTS = ("SessionStart", "UserPromptSubmit")
"""Hook events wired to `session.hook_argv`."""

HOOK_TIMEOUT_SECONDS = 60
"""Per-hook timeout in the settings passed with --settings (Claude Code's own limit on one hook run)."""

QUIET_ENV = {
    "DISABLE_TELEMETRY": "1",
    "DISABLE_AUTOUPDATER": "1",
    "DISABLE_ERROR_REPORTING": "1",
    "DISABLE_BUG_COMMAND": "1",
    "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
}
"""Switches that keep the CLI from calling anything but the model endpoint."""
NOTES_DIR_ENV = {"CLAUDE_CODE_ADDITIONAL_DIRECTORIES_CLAUDE_MD": "1"}
"""With `--add-dir <HOME>/.claude` (every arm), the CLI loads the CLAUDE.md it finds there by itself:
the notes arm's user-level notes file (`tasks_lib.memory.delivery.notes`), which `--setting-sources ""`
would otherwise keep out; set in every arm, so it names none."""

MAX_STREAM_BYTES = 256 << 20
"""Stream-json bytes kept per invocation; past it the transcript notes the truncation."""

MAX_STDERR_BYTES = 1 << 20
"""Stderr bytes kept per invocation."""

READER_JOIN_SECONDS = 5.0

CONFINED_NOTE = (
    "claude-code ran confined by bubblewrap{user}: the host seen through an allow-list (toolchain, its install, "
    "Python, memtrial; {hidden} runner-owned path(s) hidden); memory store read-only; only its workspace and HOME "
    "writable; network shared (model endpoint)"
)
UNPRIVILEGED = " as an unprivileged uid (no capabilities, no new privileges)"
TREE_LIMITS = {"memory": "memory", "pids": "process count", "cpu": "CPU quota"}
"""Controller -> the limit it holds for a session's process tree (named in `sandbox_unenforced` when it cannot)."""
POLL_SECONDS = 0.1
"""How often a running invocation's cgroup is checked for an out-of-memory kill."""
PLAIN_NOTE = (
    "claude-code ran as a plain subprocess (own session, HOME and TMPDIR; scrubbed environment), NOT confined: "
    "{reason}; it shares the host filesystem, network and the runner's uid"
)
SURVIVOR_NOTE = "{count} process(es) of the CLI's uid {uid} were still alive after the session and SIGKILL"


def install_root(binary: Path) -> Path:
    """The folder holding the CLI's whole install: its `node_modules` parent, else the binary's folder."""
    for path in (binary.absolute(), binary.resolve()):
        if "node_modules" in path.parts:
            return Path(*path.parts[: path.parts.index("node_modules")])
    return binary.resolve().parent


def memory_paths(env: Mapping[str, str], identity: RunIdentity | None) -> list[Path]:
    """What a confined session's hooks read of the memory, bound read-only so the agent cannot change
    the memory it is measured with: the socket's folder (a socket connects through a read-only mount)
    and the store's folder, or only the store file for a session run as `identity` (the folder, the
    arm's own, may be one that uid cannot enter; the hook opens the file read-only)."""
    store = [Path(env[STORE_ENV]) if identity else Path(env[STORE_ENV]).parent] if env.get(STORE_ENV) else []
    return store + ([Path(env[SOCKET_ENV]).parent] if env.get(SOCKET_ENV) else [])


def check_reachable_memory(env: Mapping[str, str]) -> None:
    """Fail before the session when a fresh uid (no groups: only the `other` bits apply) could not
    read the store file or connect to the socket; its hooks would then deliver nothing.

    Raises:
        AgentSetupError: naming the path, its mode and the fix.
    """
    fix = ("a root runner runs claude-code as an unprivileged uid; make it readable by others, "
           f"or export a replica file ({STORE_ENV}) readable by others, or run memtrial as a non-root user")
    needs = []
    if env.get(STORE_ENV):
        needs.append((Path(env[STORE_ENV]), stat.S_IROTH))
    if env.get(SOCKET_ENV):
        socket = Path(env[SOCKET_ENV])
        needs += [(socket.parent, stat.S_IXOTH), (socket, stat.S_IWOTH)]
    for path, bit in needs:
        try:
            mode = os.stat(path).st_mode
        except OSError as error:
            raise AgentSetupError(f"claude-code: the memory path {path} cannot be read: {error}") from error
        if not mode & bit:
            raise AgentSetupError(f"claude-code: the memory path {path} has mode {stat.S_IMODE(mode):o}; {fix}")


def find_binary(binary: str | Path | None = None) -> Path:
    """The `claude` binary: `binary`, else $MEMTRIAL_CLAUDE_BINARY, else the project-local install or PATH.

    An explicitly named binary (argument or variable) is the only candidate.

    Raises:
        AgentSetupError: none of them is an executable file.
    """
    candidates: list[str] = []
    if binary is not None:
        candidates.append(str(binary))
    elif CLAUDE_BINARY.text():
        candidates.append(CLAUDE_BINARY.text())  # named explicitly: no silent fallback to another CLI
    else:
        candidates.append(str(DEFAULT_BINARY))
        found = shutil.which("claude")
        if found:
            candidates.append(found)
    for candidate in candidates:
        path = Path(candidate)
        if path.is_file() and os.access(path, os.X_OK):
            return path
    looked = ", ".join(candidates) or "nothing"
    raise AgentSetupError(
        f"claude-code: the Claude Code CLI is not installed (looked at {looked}); "
        "run scripts/install_claude_code.sh or pass binary="
    )


def settings_for(hook_argv: Sequence[str]) -> dict[str, Any]:
    """The settings (passed with `--settings`) that wire every event in HOOK_EVENTS to `hook_argv`."""
    command = shlex.join(hook_argv)
    entry = [{"hooks": [{"type": "command", "command": command, "timeout": HOOK_TIMEOUT_SECONDS}]}]
    return {"hooks": {event: entry for event in HOOK_EVENTS}}


@dataclass
class StreamUsage:
    """Usage of one invocation, from its `result` message."""

    input_tokens: int = 0
    """Uncached input + cache writes + cache reads: every input token the model processed."""
    output_tokens: int = 0
    cost_usd: float = 0.0
    """`total_cost_usd`: for a resumed session this includes the cost restored from the session (2.1.332)."""
    reported: bool = False
    """False when the stream had no result message (killed, crashed): the numbers are then 0."""


@dataclass
class ParsedStream:
    """What one invocation's stream-json output says."""

    steps: list[TranscriptStep] = field(default_factory=list)
    session_id: str | None = None
    usage: StreamUsage = field(default_factory=StreamUsage)
    is_error: bool = False
    """The result message reported an error."""
    api_error: str | None = None
    """The API error the result reported (endpoint unreachable, rejected key), if any."""


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _hook_context(stdout: str) -> str:
    """The context a hook's stdout hands Claude Code: JSON additionalContext, else the plain text."""
    text = stdout.strip()
    try:
        payload = json.loads(text)
    except ValueError:
        return text
    if isinstance(payload, dict):
        specific = payload.get("hookSpecificOutput")
        if isinstance(specific, dict) and isinstance(specific.get("additionalContext"), str):
            return specific["additionalContext"]
    return text


def _content_text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = []
        for item in content:
            if isinstance(item, dict) and isinstance(item.get("text"), str):
                parts.append(item["text"])
            elif isinstance(item, dict):
                parts.append(f"[{item.get('type', 'content')}]")
        return "\n".join(parts)
    return "" if content is None else json.dumps(content)


def _system_step(message: dict[str, Any], parsed: ParsedStream) -> None:
    subtype = message.get("subtype")
    if subtype == "init":
        parsed.session_id = message.get("session_id") or parsed.session_id
        parsed.steps.append(TranscriptStep(
            source="system", kind="context",
            text=(f"claude-code {message.get('claude_code_version', '?')} session {message.get('session_id')} "
                  f"model {message.get('model')} permission mode {message.get('permissionMode')}"),
        ))
    elif subtype == "hook_response":
        event = str(message.get("hook_event") or message.get("hook_name") or "hook")
        stdout = str(message.get("stdout") or "")  # "output" mixes in stderr
        if message.get("outcome") == "success" and message.get("exit_code") in (0, None):
            if stdout.strip():
                parsed.steps.append(TranscriptStep(source="hook", kind="context", text=_hook_context(stdout), channel=event))
        else:
            stderr = str(message.get("stderr") or "").strip()
            parsed.steps.append(TranscriptStep(
                source="system", kind="error", channel=event,
                text=f"hook {event} {message.get('outcome')} (exit {message.get('exit_code')}): {stderr[:1000]}",
            ))


def _assistant_steps(message: dict[str, Any], parsed: ParsedStream) -> None:
    body = message.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    if message.get("is_api_error_message"):  # written by the CLI, not the model
        text = _content_text(content)
        parsed.steps.append(TranscriptStep(source="system", kind="error", text=f"{message.get('api_error') or 'api error'}: {text}"))
        return
    for block in content if isinstance(content, list) else []:
        if not isinstance(block, dict):
            continue
        kind = block.get("type")
        if kind == "text" and block.get("text"):
            parsed.steps.append(TranscriptStep(source="agent", kind="message", text=str(block["text"])))
        elif kind == "thinking" and block.get("thinking"):
            parsed.steps.append(TranscriptStep(source="agent", kind="message", text=str(block["thinking"])))
        elif kind in ("tool_use", "server_tool_use"):
            arguments = json.dumps(block.get("input"), ensure_ascii=False, sort_keys=True)
            parsed.steps.append(TranscriptStep(source="agent", kind="tool-call", text=f"{block.get('name')} {arguments}"))


def _user_steps(message: dict[str, Any], parsed: ParsedStream) -> None:
    body = message.get("message")
    content = body.get("content") if isinstance(body, dict) else None
    for block in content if isinstance(content, list) else []:
        if isinstance(block, dict) and block.get("type") == "tool_result":
            text = _content_text(block.get("content"))
            if block.get("is_error"):
                text = "[error] " + text
            parsed.steps.append(TranscriptStep(source="tool", kind="tool-result", text=text))


def _result_step(message: dict[str, Any], parsed: ParsedStream) -> None:
    reported = message.get("usage")
    usage: dict[str, Any] = reported if isinstance(reported, dict) else {}
    cost = message.get("total_cost_usd")
    parsed.usage = StreamUsage(
        input_tokens=_int(usage.get("input_tokens")) + _int(usage.get("cache_creation_input_tokens"))
        + _int(usage.get("cache_read_input_tokens")),
        output_tokens=_int(usage.get("output_tokens")),
        cost_usd=float(cost) if isinstance(cost, (int, float)) and not isinstance(cost, bool) and cost >= 0 else 0.0,
        reported=True,
    )
    parsed.session_id = message.get("session_id") or parsed.session_id
    parsed.is_error = bool(message.get("is_error"))
    if message.get("api_error_status") is not None or message.get("api_error") or message.get("terminal_reason") == "api_error":
        status = message.get("api_error_status")
        parsed.api_error = f"{message.get('api_error') or 'api error'}{f' (status {status})' if status is not None else ''}: {message.get('result')}"
    parsed.steps.append(TranscriptStep(
        source="system", kind="usage",
        text=(f"{message.get('subtype')}: input {usage.get('input_tokens', 0)} (+cache write "
              f"{usage.get('cache_creation_input_tokens', 0)}, cache read {usage.get('cache_read_input_tokens', 0)}), "
              f"output {usage.get('output_tokens', 0)}, cost ${parsed.usage.cost_usd:.6f}, turns {message.get('num_turns')}"),
    ))
    if parsed.is_error:
        parsed.steps.append(TranscriptStep(
            source="system", kind="error",
            text=f"result {message.get('subtype')}: {str(message.get('result') or message.get('errors') or '')[:2000]}",
        ))


def parse_stream(text: str) -> ParsedStream:
    """Parse Claude Code's stream-json output (one JSON object a line) into transcript steps.

    - `system`/`init`: a system step naming the version, session and model;
    - `system`/`hook_response`: a successful hook with output becomes a `hook` context step
      (channel = the hook event); a failed one a system error step (stderr only);
    - `assistant`: text and thinking become agent messages, tool uses agent tool calls;
    - `user`: tool results become tool steps (the prompt itself is not in the stream);
    - `result`: a usage step, the invocation's usage and cost, and an error step when it failed.

    Other lines (hook_started, status, partial messages) are skipped; a line that is not JSON
    becomes a system error step.
    """
    parsed = ParsedStream()
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            parsed.steps.append(TranscriptStep(source="system", kind="error", text=f"not stream-json: {line[:500]}"))
            continue
        if not isinstance(message, dict):
            continue
        kind = message.get("type")
        if kind == "system":
            _system_step(message, parsed)
        elif kind == "assistant":
            _assistant_steps(message, parsed)
        elif kind == "user":
            _user_steps(message, parsed)
        elif kind == "result":
            _result_step(message, parsed)
    return parsed


@dataclass
class _Invocation:
    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    truncated: bool
    out_of_memory: bool


class ClaudeCodeAgent(Agent):
    """The Claude Code CLI, headless; see the module docstring."""

    name = "claude-code"

    def __init__(
        self,
        binary: str | Path | None = None,
        model: str = DEFAULT_MODEL,
        extra_args: Sequence[str] = (),
        base_url: str | None = None,
        api_key: str | None = None,
        confine: bool | None = None,
        limits: SandboxLimits | Mapping[str, object] | None = None,
    ) -> None:
        """`binary`: the `claude` executable (default: see `find_binary`); `model`: used when the
        session names none; `extra_args`: appended to every invocation; `base_url`/`api_key`: the
        Anthropic endpoint and key (default: the runner's ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY);
        `confine`: None confines the session with bwrap when it works here, True requires it, False never;
        `limits`: the session's `memory_mb`, `max_processes` and `cpus` (one cgroup for its whole process
        tree) and `tmpfs_mb` (each private tmpfs folder); default `SandboxLimits()`. Its network and
        timeout do not apply: the session shares the network, and its timeout is the session's.
        """
        self.binary = binary
        self.model = model
        self.extra_args = tuple(extra_args)
        self.base_url = base_url
        self.api_key = api_key
        self.confine = confine
        self.limits = limits if isinstance(limits, SandboxLimits) else SandboxLimits.model_validate(limits or {})

    def environment(self, session: AgentSession, tmpdir: Path, identity: RunIdentity | None = None) -> dict[str, str]:
        """The CLI's whole environment (see the module docstring); `identity`: the uid it runs as, if not the runner's."""
        env = {
            "PATH": os.environ.get("PATH") or DEFAULT_PATH,
            "LANG": "C.UTF-8",
            **QUIET_ENV,
            **NOTES_DIR_ENV,
        }
        base_url = self.base_url or os.environ.get("ANTHROPIC_BASE_URL")
        api_key = self.api_key or os.environ.get("ANTHROPIC_API_KEY")
        if base_url:
            env["ANTHROPIC_BASE_URL"] = base_url
        if api_key:
            env["ANTHROPIC_API_KEY"] = api_key
        if os.geteuid() == 0 and identity is None:
            env["IS_SANDBOX"] = "1"  # as root the CLI refuses bypassPermissions without it
        env.update(session.env)
        env["HOME"] = str(session.home)
        env["TMPDIR"] = str(tmpdir)
        return env

    def confinement(self, session: AgentSession, binary: Path) -> tuple[list[str], str, RunIdentity | None]:
        """(argv prefix, transcript note, the uid a root runner's confined CLI runs as or None); see the module docstring.

        Raises:
            AgentSetupError: `confine=True` and bwrap cannot confine a session here; the session's
                uid could not reach the memory, or no free uid was found.
        """
        if self.confine is False:
            return [], PLAIN_NOTE.format(reason="confinement disabled by the caller (confine=False)"), None
        bwrap, problem = bwrap_for_sessions()
        if bwrap is None:
            if self.confine:
                raise AgentSetupError(f"claude-code: confine=True but {problem}")
            return [], PLAIN_NOTE.format(reason=problem), None
        try:
            identity = run_identity()
            if identity is not None:
                check_reachable_memory(session.env)
            hook_python = Path(session.hook_argv[0])
            readable = [install_root(binary), hook_python.parent.parent, *python_paths(), Path(tasks_lib.__file__).parent,
                        *memory_paths(session.env, identity)]
            prefix = session_prefix(bwrap, workdir=session.workspace, writable=[session.workspace, session.home],
                                    readable=readable, hidden=session.hidden_paths, identity=identity,
                                    tmpfs_bytes=self.limits.tmpfs_mb << 20)
        except SandboxError as error:
            raise AgentSetupError(f"claude-code: {error}") from error
        note = CONFINED_NOTE.format(user=UNPRIVILEGED if identity else "", hidden=len(session.hidden_paths))
        return prefix, note, identity

    def argv(self, binary: Path, model: str, session_id: str, resume: bool, hook_argv: Sequence[str],
             notes_dir: Path | None = None) -> list[str]:
        """One invocation's argv (the prompt goes on stdin): the runner's hooks inline, no settings file
        read; with `notes_dir` (the session HOME's `.claude`), the CLAUDE.md there is loaded as notes."""
        return [
            str(binary), "-p", "--output-format", "stream-json", "--verbose", "--include-hook-events",
            "--model", model, "--permission-mode", "bypassPermissions",
            "--setting-sources", "", "--settings", json.dumps(settings_for(hook_argv)),
            *(["--add-dir", str(notes_dir)] if notes_dir is not None else []),
            *(["--resume", session_id] if resume else ["--session-id", session_id]),
            *self.extra_args,
        ]

    def run(self, session: AgentSession) -> AgentRun:
        """Run every prompt of `session` in one resumed Claude Code session.

        Raises:
            AgentSetupError: the CLI is not installed, or no API key is configured.
        """
        binary = find_binary(self.binary)
        if not (self.api_key or os.environ.get("ANTHROPIC_API_KEY") or session.env.get("ANTHROPIC_API_KEY")):
            raise AgentSetupError("claude-code: no API key; pass api_key= or set ANTHROPIC_API_KEY")
        session.home.mkdir(parents=True, exist_ok=True)
        tmpdir = session.home / "tmp"
        tmpdir.mkdir(exist_ok=True)
        notes_dir = session.home / NOTES_PATHS[0].rpartition("/")[0]
        notes_dir.mkdir(exist_ok=True)
        confine_prefix, note, identity = self.confinement(session, binary)
        env = self.environment(session, tmpdir, identity)
        model = session.model or self.model
        session_id = str(uuid.uuid4())
        steps = [TranscriptStep(source="system", kind="context", text=note)]
        if notes := read_notes(session.home):
            steps.append(TranscriptStep(source="system", kind="context", text=notes, channel=NOTES_LANE))
        input_tokens = output_tokens = 0
        cost = 0.0
        exit_code: int | None = None
        infra: str | None = None
        started = time.monotonic()
        with ExitStack() as lent:
            cgroup = make_run_cgroup(self.limits.memory_mb << 20, self.limits.max_processes, self.limits.cpus)
            lent.callback(cgroup.remove)  # last of all, whatever failed before
            lent.enter_context(lent_workspace(session.workspace, identity))
            lent.enter_context(lent_workspace(session.home, identity))
            lent.callback(_reap, identity, steps)  # before the folders are taken back
            lent.callback(cgroup.kill)  # first of all: the whole tree dies before the uid is reaped
            for index, prompt in enumerate(session.prompts):
                steps.append(TranscriptStep(source="user", kind="prompt", text=prompt))
                remaining = session.timeout_seconds - (time.monotonic() - started)
                if remaining <= 0:
                    steps.append(TranscriptStep(source="system", kind="error", text="session timeout reached before this prompt"))
                    exit_code = None
                    break
                try:
                    argv = [*confine_prefix, *self.argv(binary, model, session_id, resume=index > 0, hook_argv=session.hook_argv,
                                                           notes_dir=notes_dir)]
                    done = self._invoke([*cgroup.enter_argv(), *argv], prompt, session.workspace, env, remaining, cgroup)
                except OSError as error:
                    infra = f"claude-code could not start {binary}: {error}"
                    steps.append(TranscriptStep(source="system", kind="error", text=infra))
                    exit_code = None
                    break
                parsed = parse_stream(done.stdout)
                steps.extend(parsed.steps)
                session_id = parsed.session_id or session_id
                input_tokens += parsed.usage.input_tokens
                output_tokens += parsed.usage.output_tokens
                cost = max(cost, parsed.usage.cost_usd)  # total_cost_usd is cumulative over a resumed session
                exit_code = done.exit_code
                if done.truncated:
                    steps.append(TranscriptStep(source="system", kind="error", text=f"stream-json output past {MAX_STREAM_BYTES} bytes was dropped"))
                if not parsed.usage.reported:
                    steps.append(TranscriptStep(source="system", kind="error", text="no result message: usage and cost of this prompt are unknown (counted as 0)"))
                if done.timed_out:
                    steps.append(TranscriptStep(source="system", kind="error", text=f"killed at the session timeout ({session.timeout_seconds:g} s)"))
                    exit_code = None
                    break
                if done.out_of_memory:
                    steps.append(TranscriptStep(source="system", kind="error", text=(
                        f"claude killed (memory): the session's process tree went past {self.limits.memory_mb} MiB on prompt "
                        f"{index}; follow-up prompts not sent")))
                    exit_code = None
                    break
                if done.exit_code == LAUNCHER_FAILED and cgroup.folders and "cgroup.procs" in done.stderr:
                    infra = f"claude-code: the session could not join its cgroup ({', '.join(map(str, cgroup.distinct))})"
                    steps.append(TranscriptStep(source="system", kind="error", text=infra))
                    exit_code = None
                    break
                if parsed.api_error is not None and infra is None:
                    infra = f"model endpoint: {parsed.api_error}"
                if done.exit_code != 0:
                    tail = done.stderr.strip()[-2000:]
                    steps.append(TranscriptStep(source="system", kind="error", text=f"claude exited {done.exit_code}: {tail}"))
                    if not parsed.usage.reported and infra is None:
                        infra = f"claude exited {done.exit_code} without a result: {tail[-300:]}"
                    break
        return AgentRun(
            exit_code=exit_code,
            infra_failure=infra,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            cost_usd=cost,
            wall_seconds=round(time.monotonic() - started, 6),
            transcript=Transcript(agent=self.name, session_id=session_id, steps=tuple(steps)),
            model=model,
            sandbox_unenforced=session_unenforced(cgroup, confined=bool(confine_prefix), tmpfs_mb=self.limits.tmpfs_mb),
        )

    @staticmethod
    def _invoke(argv: list[str], prompt: str, cwd: Path, env: Mapping[str, str], timeout: float, cgroup: RunCgroup) -> _Invocation:
        """Run one invocation (`argv` joins `cgroup` first) with `prompt` on stdin; kill its whole process
        tree at `timeout`, at an out-of-memory kill in `cgroup`, and when it ends."""
        proc = subprocess.Popen(
            argv, cwd=cwd, env=dict(env), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, close_fds=True,
        )
        watcher = TreeWatcher(proc.pid).start()
        out, err = BoundedSink(MAX_STREAM_BYTES), BoundedSink(MAX_STDERR_BYTES)
        readers = [drain_file(proc.stdout, out), drain_file(proc.stderr, err)]  # type: ignore[arg-type]
        try:
            assert proc.stdin is not None
            proc.stdin.write(prompt.encode("utf-8"))
            proc.stdin.close()
        except OSError:
            pass  # the CLI exited before reading its prompt; its exit status and stderr say why
        timed_out = out_of_memory = False
        deadline = time.monotonic() + timeout
        try:
            while proc.poll() is None:
                if time.monotonic() >= deadline:
                    timed_out = True
                    break
                if cgroup.oom_kills() > 0:  # v1 kills one process, not the tree: the session ends here
                    out_of_memory = True
                    break
                try:
                    proc.wait(timeout=min(POLL_SECONDS, max(0.0, deadline - time.monotonic())))
                except subprocess.TimeoutExpired:
                    continue
            out_of_memory = out_of_memory or cgroup.oom_kills() > 0
        finally:
            cgroup.kill()
            watcher.stop()
            kill_tree(proc.pid, watcher)  # background commands the agent left behind die with it
            proc.wait()
        for reader in readers:
            reader.join(READER_JOIN_SECONDS)
        stdout, stderr = out.result(), err.result()
        code = proc.returncode
        return _Invocation(
            exit_code=None if code < 0 else code, stdout=stdout.text, stderr=stderr.text,
            timed_out=timed_out, truncated=stdout.truncated, out_of_memory=out_of_memory,
        )


def session_unenforced(cgroup: RunCgroup, *, confined: bool, tmpfs_mb: int) -> tuple[str, ...]:
    """Each limit of a session that this machine does not hold, with the reason; empty when all hold."""
    notes = [f"claude-code session: no {TREE_LIMITS[c]} limit on its process tree: {reason}" for c, reason in cgroup.missing.items()]
    # a controller whose folder holds but lacks an optional file (no swap accounting) says so as "<controller>: ..."
    notes += [f"claude-code session: {note}" for note in cgroup.unenforced if note.partition(":")[0] in cgroup.folders]
    if not confined:
        notes.append(f"claude-code session: tmpfs_mb={tmpfs_mb} not applied: unconfined, it has no private tmpfs (TMPDIR is in its HOME)")
    elif "memory" not in cgroup.folders:
        notes.append(f"claude-code session: tmpfs_mb={tmpfs_mb}: private tmpfs pages are not counted in any memory limit")
    return tuple(notes)


def _reap(identity: RunIdentity | None, steps: list[TranscriptStep]) -> None:
    """Kill every process of the session's uid; note in `steps` any that survived."""
    if identity is not None and (count := identity.reap()):
        steps.append(TranscriptStep(source="system", kind="error", text=SURVIVOR_NOTE.format(count=count, uid=identity.uid)))


register_agent(ClaudeCodeAgent.name, ClaudeCodeAgent)
