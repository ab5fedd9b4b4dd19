"""Filler dialogue: the real turns that bury a planted fact, and their order per seed.

Filler comes in conversations whose turns stay in order; `bury_order` shuffles the conversations
with a generator seeded by (seed, case id) and concatenates them, so every length of a sweep takes
a prefix of the same sequence (a deeper burial adds turns, it does not swap them) and a different
seed gives a different ordering.

Two sources: the authored `corpora/recall/filler.json` (validated by `cases.load_filler`) or a
LoCoMo file (`locomo_filler`), where each session is one conversation, the first speaker is
`user` and the second `assistant`. LoCoMo quirks are handled by counted rules, reported in
`FillerSource.dropped`: a session that is not a list, a turn without text, and a turn that states
a case's value are skipped.
"""

from __future__ import annotations

import json
import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks_lib.suites.recall.cases import FillerConversation, RecallCase, filler_violations
from tasks_lib.suites.recall.errors import RecallError

_SESSION_KEY = re.compile(r"^session_\d+$")


@dataclass(frozen=True)
class FillerSource:
    """Filler conversations ready to bury facts under."""

    name: str
    """Where they came from: `authored` or the dataset path."""
    conversations: tuple[tuple[tuple[str, str], ...], ...]
    """Conversations, each a tuple of (speaker, text) turns in order."""
    dropped: dict[str, int] = field(default_factory=dict)
    """Turns or sessions skipped, counted by rule."""

    @property
    def turns(self) -> int:
        """Total filler turns available."""
        return sum(len(c) for c in self.conversations)


def bury_order(source: FillerSource, seed: int, case_id: str, length: int) -> list[tuple[str, str]]:
    """The first `length` filler turns for `case_id` under `seed`; raises RecallError if there are too few."""
    if length > source.turns:
        raise RecallError(
            f"filler: length {length} needs {length} filler turns but {source.name} has {source.turns}; "
            "use shorter lengths or a larger filler source (--filler-dataset)"
        )
    order = list(range(len(source.conversations)))
    random.Random(f"{seed}:{case_id}").shuffle(order)
    out: list[tuple[str, str]] = []
    for index in order:
        out.extend(source.conversations[index])
        if len(out) >= length:
            break
    return out[:length]


def authored_filler(conversations: Sequence[FillerConversation]) -> FillerSource:
    """A FillerSource of the authored conversations (already validated)."""
    return FillerSource("authored", tuple(tuple((t.speaker, t.text) for t in c.turns) for c in conversations))


def locomo_filler(path: Path, cases: Sequence[RecallCase]) -> FillerSource:
    """Filler from a LoCoMo file (a JSON list of samples with `conversation.session_N` turn lists).

    Raises RecallError naming the file when it cannot be read or has no usable turn.
    """
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise RecallError(f"{path}: cannot read it as a LoCoMo JSON file ({error}); pass the locomo10.json path") from None
    if not isinstance(data, list):
        raise RecallError(f"{path}: a LoCoMo file is a JSON list of samples, got {type(data).__name__}")
    dropped: Counter[str] = Counter()
    conversations = []
    for i, sample in enumerate(data):
        conversation = sample.get("conversation") if isinstance(sample, dict) else None
        if not isinstance(conversation, dict):
            raise RecallError(f"{path}: field '[{i}].conversation' is missing or not an object; is this a LoCoMo file?")
        roles = {conversation.get("speaker_a"): "user", conversation.get("speaker_b"): "assistant"}
        keys = sorted((k for k in conversation if _SESSION_KEY.match(k)), key=lambda k: int(k.split("_")[1]))
        for key in keys:
            session = conversation[key]
            if not isinstance(session, list):
                dropped["session-not-a-list"] += 1
                continue
            turns = []
            for turn in session:
                text = turn.get("text") if isinstance(turn, dict) else None
                if not isinstance(text, str) or not text.strip():
                    dropped["turn-without-text"] += 1
                    continue
                if filler_violations([text], cases, str(path), "text"):
                    dropped["turn-states-a-case-value"] += 1
                    continue
                turns.append((roles.get(turn.get("speaker"), "user"), text))
            if turns:
                conversations.append(tuple(turns))
    if not conversations:
        raise RecallError(f"{path}: no usable dialogue turn in any conversation.session_N list")
    return FillerSource(str(path), tuple(conversations), dict(dropped))
