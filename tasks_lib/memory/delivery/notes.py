"""The notes-file channel: the `notes` arm's memory, written where the agent's harness loads it by itself.

The incumbent a memory product must beat is a notes file the agent already reads (a CLAUDE.md /
AGENTS.md). In the `notes` arm the runner writes the task's memories, one bullet each under a neutral
heading, to the user-level notes paths of the arm's private HOME (`NOTES_PATHS`: Claude Code's
`~/.claude/CLAUDE.md`, Codex's `~/.codex/AGENTS.md`). HOME is runner-owned and fresh per attempt, so
the workspace (and its certification, redaction and mutation audit) is byte-identical to every other
arm's: redaction still removes the project's own CLAUDE.md/AGENTS.md, and no other arm's HOME holds
a notes file (`tasks_lib.corpus.certify.certify_home` checks both before the agent starts).

What proves delivery. There is no memory server to witness, so the runner's receipt says what it can
prove itself: `NotesDelivery` places the file, hashes it, and at `close` hashes it again. The receipt
is a `DeliveryReceipt` like the witness's (same nonce discipline, same evidence checks): one served
entry on the `notes-file` lane naming every note, made when the file was placed intact before the
turn. That the harness then read the file is the harness's documented behaviour, not something the
runner observes; the calibration agent reads it the way a harness does (so its known effect proves
the channel), and a file the agent changed during its turn is noted in `refused` (delivery at session
start stands). See docs/ARMS.md for what is not yet proven for each real agent.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.delivery.witness import DeliveryReceipt, ServedRecall, text_digest

NOTES_PATHS = (".claude/CLAUDE.md", ".codex/AGENTS.md")
"""Where a harness loads user-level notes from, relative to HOME (the first is what the calibration agent reads)."""
NOTES_LANE = "notes-file"
"""The lane name the receipt gives the notes channel."""
NOTES_HEADING = "# Notes\n\n"
"""The file's only heading: neutral, the same words a person would write."""


def notes_text(memories: Sequence[MemorySpec]) -> str:
    """The notes file: the heading and one bullet per memory, in manifest order."""
    return NOTES_HEADING + "".join(f"- {' '.join(m.text.split())}\n" for m in memories)


def note_id(text: str) -> str:
    """A note's id in records and receipts: 16 hex characters of its text's digest."""
    return text_digest(text)[:16]


def read_notes(home: Path) -> str:
    """What a harness loads from `home`: the first notes file of NOTES_PATHS that is a regular file, or ''."""
    for rel in NOTES_PATHS:
        path = home / rel
        if path.is_file() and not path.is_symlink():
            return path.read_text(encoding="utf-8", errors="replace")
    return ""


class NotesDelivery:
    """One attempt's notes file: placed by `start`, its receipt returned by `close` (see the module docstring)."""

    socket_path = None
    """No socket: the notes channel reaches the agent through its harness, not a memory server."""

    def __init__(self, home: Path, realm: str, memories: Sequence[MemorySpec]) -> None:
        self.home = home
        self.realm = realm
        self.text = notes_text(memories)
        self.ids = tuple(note_id(m.text) for m in memories)
        self.texts = tuple(m.text for m in memories)
        self.nonce = secrets.token_hex(16)
        self.sha256 = hashlib.sha256(self.text.encode()).hexdigest()
        self.placed_at: float | None = None
        self._receipt: DeliveryReceipt | None = None

    def start(self) -> NotesDelivery:
        """Write the notes file to every path of NOTES_PATHS under HOME (folders 0755, file 0644)."""
        for rel in NOTES_PATHS:
            path = self.home / rel
            path.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
            path.write_text(self.text, encoding="utf-8")
            path.chmod(0o644)
        self.placed_at = round(time.time(), 3)
        return self

    def close(self) -> DeliveryReceipt:
        """The receipt: every note served on the notes lane when the file was placed; a file changed or
        gone by now is noted in `refused`. Calling it again returns the same receipt."""
        if self._receipt is not None:
            return self._receipt
        changed = []
        for rel in NOTES_PATHS:
            path = self.home / rel
            now = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() and not path.is_symlink() else None
            if now != self.sha256:
                changed.append(f"notes file {rel}: {'gone' if now is None else 'changed'} by the end of the turn")
        served = () if self.placed_at is None else (ServedRecall(
            realm=self.realm, lanes=(NOTES_LANE,), ids=self.ids, text_sha256=tuple(text_digest(t) for t in self.texts),
            at=self.placed_at),)
        self._receipt = DeliveryReceipt(
            nonce=self.nonce, realm=self.realm, served_by=f"notes file loaded by the agent's harness ({', '.join(NOTES_PATHS)})",
            planted_ids=self.ids, planted_text_sha256=tuple(dict.fromkeys(text_digest(t) for t in self.texts)),
            recalls=served, refused=tuple(changed))
        return self._receipt
