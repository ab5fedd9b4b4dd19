"""The agent interface and the transcript format every agent adapter produces.

An agent gets the visible prompt (and, for continuity tasks, follow-up prompts sent into the same
resumed session) and nothing else from the runner: memory reaches it only through its hooks, which
call the command in `AgentSession.hook_argv` with the memory environment in `AgentSession.env`.
Delivery is later confirmed from the transcript's non-agent steps (see `tasks_lib.arm.injection`).
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document, NonEmptyText

StepSource = Literal["user", "system", "hook", "agent", "tool"]
"""Who wrote a transcript step. Only `user`, `system` and `hook` steps can confirm delivery."""


class TranscriptStep(ContractModel):
    """One step of an agent session, in order."""

    source: StepSource
    """Who wrote it: the user prompt, the system/harness, a hook's injected context, the agent, or a tool result."""
    kind: Literal["prompt", "context", "message", "tool-call", "tool-result", "usage", "error"]
    """What it is."""
    text: str
    """Its text (tool calls: the command or arguments; usage: a short summary)."""
    channel: str | None = None
    """For injected context: the hook event or channel it came through."""


class Transcript(Document):
    """A whole agent session, as the runner stores it."""

    agent: NonEmptyText
    """The agent adapter's name."""
    session_id: str | None = None
    """The agent's own session id, when it has one (continuity tasks resume it)."""
    steps: tuple[TranscriptStep, ...]
    """Every step in order."""


class AgentSession(ContractModel):
    """Everything the runner hands an agent for one attempt."""

    workspace: Path
    """The task's scratch workspace (read-write); the agent's cwd."""
    home: Path
    """The arm's private HOME: user-level agent settings and hooks are installed here, never in the workspace."""
    prompts: tuple[NonEmptyText, ...] = Field(min_length=1)
    """The visible prompt, then any follow-up prompts for the same resumed session."""
    env: dict[str, str] = Field(default_factory=dict)
    """Memory environment for the agent and its child hooks (realm, socket, kill switch, ablated lanes)."""
    hook_argv: tuple[NonEmptyText, ...]
    """The command the agent's session-start and prompt-submit hooks run (reads the hook event on stdin)."""
    timeout_seconds: float = Field(gt=0)
    """Wall-clock limit for the whole session."""
    model: str | None = None
    """Model name to ask for, when the agent takes one."""
    sandbox: NonEmptyText = "local"
    """Sandbox provider the agent's commands run in."""
    sandbox_options: dict[str, str] = Field(default_factory=dict)
    """How the run config builds that provider (`docker`: `base_url`, `image`); an adapter's own
    `sandbox_options` override them."""
    hidden_paths: tuple[Path, ...] = ()
    """Runner-owned host paths the agent must never see (the task corpus with hidden tests and
    solutions, the checkout and its git history, the artifact root); a confining adapter hides them."""


class AgentRun(ContractModel):
    """What one session produced."""

    exit_code: int | None
    """The agent process's exit status (None when killed or not a process)."""
    infra_failure: str | None = None
    """Set when the apparatus failed (agent could not start, endpoint unreachable): not an agent failure."""
    input_tokens: int = Field(ge=0)
    """Input tokens reported by the model provider."""
    output_tokens: int = Field(ge=0)
    """Output tokens reported by the model provider."""
    cost_usd: float = Field(ge=0)
    """Cost reported by the provider (0 when it reports none)."""
    wall_seconds: float = Field(ge=0)
    """Wall time of the session."""
    transcript: Transcript
    """The session's transcript."""
    model: str | None = None
    """The model the session asked for (None for an agent that runs no named model); part of the
    comparability key of its records."""
    sandbox_unenforced: tuple[str, ...] = ()
    """Each limit or guarantee the session's sandbox could not enforce (`SandboxResult.unenforced`,
    de-duplicated over its commands); empty for an agent whose sandbox enforced them all."""


class Agent(abc.ABC):
    """A coding agent under test."""

    name: ClassVar[str]
    """Registry name."""

    @abc.abstractmethod
    def run(self, session: AgentSession) -> AgentRun:
        """Run one session over `session.prompts` in `session.workspace`.

        Must not raise for agent-side failures (a crash, a timeout, a refusal): those are an
        AgentRun with the exit code and the transcript so far. Raises AgentSetupError (a
        MemtrialError) only when the agent cannot be set up at all, e.g. its CLI is not installed.
        """
