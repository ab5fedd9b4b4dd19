"""The calibration agent: a deterministic agent of known effect, used to prove the apparatus.

It is an instrument of the runner, not a measured agent, and the one exception to "an agent never
sees the solution". Like any agent it receives only the prompts and whatever its prompt hook
injects; what it then does follows from the task's kind and from what the hook delivered:

- the memory that carries the answer delivered (its text inside a provenance block from a hook)
  on a task memory can solve: it applies the task's solution, reading nothing else (cost: prompt
  + delivered context);
- a stale-trap whose delivered context holds the superseded value but not its correction: it acts
  on the stale value, i.e. writes nothing useful, and fails;
- a planted state with an old value and no correction at all (`misleading_texts`: the harm
  conditions `superseded` and `contradictory`): when the old value arrives without the key memory
  it acts on it and fails without exploring; when both arrive (a contradiction) it trusts neither
  and explores;
- a notes file its harness loads (`tasks_lib.memory.delivery.notes.read_notes` of its HOME, read at
  session start like Claude Code's `~/.claude/CLAUDE.md`): the notes count as delivered context,
  with no provenance block (the runner's notes receipt, not the transcript, proves delivery);
- given a history folder (the `grep` arm, `HISTORY_ENV`): it reads every recorded session there
  (counted as input tokens) and, when a turn carrying the key fact is among them, acts as if memory
  had delivered it;
- otherwise it explores: reads every visible file (counted as input tokens) and succeeds only on
  tasks that exploration can solve (`EXPLORABLE` kinds), by applying the solution.

Tokens are counted as bytes / 4, so the expected pass/fail and token pattern for every task and
condition follows from the corpus alone. Its records are marked `calibration` and can never be
admitted into a published cohort.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript, TranscriptStep
from tasks_lib.agents.registry import register_agent
from tasks_lib.corpus.tasks import overlay
from tasks_lib.memory.delivery.notes import NOTES_LANE, read_notes
from tasks_lib.memory.delivery.provenance import find_provenance
from tasks_lib.memory.env import HISTORY_ENV
from tasks_lib.trees import walk_files

EXPLORABLE = frozenset({"deducible", "tare", "cross-file", "investigation"})
"""Task kinds whose answer the visible tree holds: exploration alone solves them."""
MEMORY_SOLVES = frozenset({"convention", "continuity", "stale-trap", "deducible", "cross-file", "investigation"})
"""Task kinds where delivered memory replaces exploration (tare tasks: memory does not help)."""
BYTES_PER_TOKEN = 4
HOOK_TIMEOUT_SECONDS = 60


def tokens(size: int) -> int:
    """The calibration agent's token count for `size` bytes."""
    return -(-size // BYTES_PER_TOKEN)


class CalibrationAgent(Agent):
    """Known-effect agent; see the module docstring."""

    name = "calibration"

    def __init__(
        self,
        solution_dir: Path,
        kind: str,
        key_texts: Sequence[str] = (),
        stale_texts: Sequence[str] = (),
        correction_texts: Sequence[str] = (),
        misleading_texts: Sequence[str] = (),
        feed_texts: Sequence[str] = (),
    ) -> None:
        self.solution_dir = solution_dir
        self.kind = kind
        self.key_texts = tuple(key_texts)
        self.stale_texts = tuple(stale_texts)
        self.correction_texts = tuple(correction_texts)
        self.misleading_texts = tuple(misleading_texts)
        self.feed_texts = tuple(feed_texts)

    def _hook(self, session: AgentSession, prompt: str) -> tuple[str, str | None]:
        """Run the prompt-submit hook like any agent harness; return (context, error)."""
        event = {"hook_event_name": "UserPromptSubmit", "prompt": prompt, "session_id": "calibration", "cwd": str(session.workspace)}
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(session.home), **session.env}
        try:
            done = subprocess.run(
                list(session.hook_argv), input=json.dumps(event).encode(), capture_output=True, env=env,
                cwd=session.workspace, timeout=HOOK_TIMEOUT_SECONDS, check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            return "", f"hook did not run: {error}"
        if done.returncode != 0:
            return "", f"hook exited {done.returncode}: {done.stderr.decode(errors='replace').strip()[:300]}"
        out = done.stdout.decode(errors="replace").strip()
        if not out:
            return "", None
        try:
            return str(json.loads(out)["hookSpecificOutput"]["additionalContext"]), None
        except (ValueError, KeyError, TypeError):
            return out, None

    def _explore(self, workspace: Path, steps: list[TranscriptStep]) -> int:
        """Read every visible file; return the bytes read."""
        total = 0
        for rel in walk_files(workspace):
            path = workspace / rel
            if path.is_file() and not path.is_symlink():
                size = path.stat().st_size
                total += size
                steps.append(TranscriptStep(source="agent", kind="tool-call", text=f"read {rel}"))
        return total

    def run(self, session: AgentSession) -> AgentRun:
        started = time.monotonic()
        steps: list[TranscriptStep] = []
        read = 0
        context_all = ""
        notes = read_notes(session.home)
        if notes:
            steps.append(TranscriptStep(source="system", kind="context", text=notes, channel=NOTES_LANE))
            read += len(notes.encode())
        for prompt in session.prompts:
            steps.append(TranscriptStep(source="user", kind="prompt", text=prompt))
            read += len(prompt.encode())
            context, error = self._hook(session, prompt)
            if error:
                steps.append(TranscriptStep(source="system", kind="error", text=error))
            if context:
                steps.append(TranscriptStep(source="hook", kind="context", text=context, channel="UserPromptSubmit"))
                read += len(context.encode())
                context_all += context
        # Memory helps only if what carries the answer arrived, inside a provenance block: a key memory,
        # or a transcript turn that carries the key fact (the experience feed).
        delivered = bool(find_provenance(context_all)) and (
            not self.key_texts or any(t in context_all for t in self.key_texts + self.feed_texts)
        )
        delivered = delivered or bool(notes and any(t in notes for t in self.key_texts))
        context_all += notes
        history, history_bytes = self._read_history(session, steps)
        read += history_bytes
        if history and any(t in history for t in self.feed_texts):
            delivered = True  # read from the recorded sessions it was given (the grep arm)
        misled = any(t in context_all for t in self.misleading_texts)
        stale_only = (
            self.kind == "stale-trap"
            and any(t in context_all for t in self.stale_texts)
            and not any(t in context_all for t in self.correction_texts)
        )
        written = 0
        if misled and not delivered:
            steps.append(TranscriptStep(source="agent", kind="message", text="acting on the remembered (old) value"))
        elif misled:
            read += self._explore(session.workspace, steps)
            if self.kind in EXPLORABLE:
                written = self._apply(session.workspace, steps, "memories disagree; solved by exploration")
            else:
                steps.append(TranscriptStep(source="agent", kind="message", text="memories disagree; exploration did not settle it"))
        elif delivered and stale_only:
            steps.append(TranscriptStep(source="agent", kind="message", text="acting on the remembered (stale) value"))
        elif delivered and self.kind in MEMORY_SOLVES:
            written = self._apply(session.workspace, steps, "applying what memory says")
        else:
            read += self._explore(session.workspace, steps)
            if self.kind in EXPLORABLE:
                written = self._apply(session.workspace, steps, "solved by exploration")
            else:
                steps.append(TranscriptStep(source="agent", kind="message", text="exploration did not reveal the convention"))
        return AgentRun(
            exit_code=0,
            input_tokens=tokens(read),
            output_tokens=tokens(written),
            cost_usd=0.0,
            wall_seconds=round(time.monotonic() - started, 3),
            transcript=Transcript(agent=self.name, session_id="calibration", steps=tuple(steps)),
        )

    def _read_history(self, session: AgentSession, steps: list[TranscriptStep]) -> tuple[str, int]:
        """Read every recorded session in the history folder, when the environment names one: return the
        turns' texts (joined) and the bytes read (the files' full size, counted as input tokens)."""
        folder = session.env.get(HISTORY_ENV, "")
        if not folder:
            return "", 0
        texts, size = [], 0
        for path in sorted(Path(folder).iterdir()):
            data = path.read_bytes()
            size += len(data)
            steps.append(TranscriptStep(source="agent", kind="tool-call", text=f"read {path.name} (recorded session)"))
            for line in data.decode("utf-8", errors="replace").splitlines():
                try:
                    texts.append(str(json.loads(line)["text"]))
                except (ValueError, KeyError, TypeError):
                    texts.append(line)
        return "\n".join(texts), size

    def _apply(self, workspace: Path, steps: list[TranscriptStep], why: str) -> int:
        copied = overlay(self.solution_dir, workspace)
        steps.append(TranscriptStep(source="agent", kind="message", text=f"{why}: wrote {', '.join(copied)}"))
        return sum((self.solution_dir / rel).stat().st_size for rel in copied)


register_agent("calibration", CalibrationAgent)
