"""The experience feed: recorded session transcripts of earlier work on a task's project.

A transcript is JSON Lines, one `Turn` (`{"role", "text"}`) per line, pinned by SHA-256 in the
task manifest (`transcripts`), and fed byte-identically to every memory system. Its key fact is
said in passing amid other work, never as a headline. `transcript_failures` checks that, as part
of the corpus invariants:

- `digests-match`: the file's bytes match the pinned SHA-256;
- `layout`: the file lies outside the fixture, solution and hidden folders, parses as turns (each
  within the memory text limit), and every key turn exists;
- `certification-clean` (the in-passing rule): the opening turn never carries the key fact; a key
  turn carries other work too (at least `MIN_KEY_TURN_SENTENCES` sentences), does not open with the
  fact or a headline marker (`Note:`, `Important`, `Remember`, a heading, bold text...), and, when
  the task has answer terms, holds one of them after its first sentence;
- `no-answer-leak`: an answer term appears only in declared key turns, and no transcript copies
  `NARRATION_NGRAM` consecutive words of a curated memory (the feed is not the curated items).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path

from pydantic import ValidationError

from tasks_lib.contracts import TaskManifest, TranscriptRef, Turn, violations_of
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.adapter import MAX_TEXT_BYTES
from tasks_lib.trees import sha256_bytes

MIN_TURNS = 4
"""Fewest turns a transcript may have: a session of work, not a note."""
MIN_KEY_TURN_SENTENCES = 3
"""Fewest sentences a key turn may have: the fact sits amid other work."""
HEADLINE = re.compile(
    r"^\s*(?:#|\*\*|__|>|(?:note|nb|n\.b\.|important|remember|key fact|fyi|tl;?dr|summary|heads[ -]up|reminder|warning)\b)",
    re.IGNORECASE,
)
"""How a headline opens a turn or a line: a heading, bold text, a quote, or an announcing word."""
SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z`(\"'])|\n+")


class FeedError(MemtrialError):
    """A transcript is missing, malformed, or a condition needs transcripts the task does not have."""


def sentences(text: str) -> list[str]:
    """`text` split into sentences (and lines), without empty pieces."""
    return [s.strip() for s in SENTENCE_END.split(text) if s.strip()]


def parse_transcript(data: bytes, source: str) -> tuple[Turn, ...]:
    """Parse JSON Lines of turns; raise FeedError naming `source`, the line and the field."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FeedError(f"{source}: not UTF-8 (bad byte at offset {error.start}); re-encode it") from None
    turns = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            raise FeedError(f"{source}:{number}: blank line; a transcript has one JSON turn per line and no blank lines")
        try:
            turn = Turn.model_validate(json.loads(line))
        except json.JSONDecodeError as error:
            raise FeedError(f"{source}:{number}: invalid JSON at column {error.colno}: {error.msg}") from None
        except ValidationError as error:
            problems = "; ".join(f"{v.field or 'turn'}: {v.problem}" for v in violations_of(error, source))
            raise FeedError(f"{source}:{number}: {problems}") from None
        if len(turn.text.encode()) > MAX_TEXT_BYTES:
            raise FeedError(f"{source}:{number}: text is over {MAX_TEXT_BYTES} bytes, a memory system's limit; split the turn")
        turns.append(turn)
    if not turns:
        raise FeedError(f"{source}: empty; a transcript has at least {MIN_TURNS} turns")
    return tuple(turns)


def load_transcript(task_root: Path, ref: TranscriptRef) -> tuple[bytes, tuple[Turn, ...]]:
    """Read one pinned transcript: its exact bytes (checked against the pin) and its turns."""
    path = task_root / ref.path
    try:
        data = path.read_bytes()
    except OSError as error:
        raise FeedError(f"{path}: cannot be read ({error.strerror or error}); add the transcript or drop it from task.json transcripts") from None
    actual = sha256_bytes(data)
    if actual != ref.sha256:
        raise FeedError(f"{path}: sha256 is {actual} but task.json transcripts pins {ref.sha256}; re-pin it")
    turns = parse_transcript(data, str(path))
    bad = [i for i in ref.key_turns if i >= len(turns)]
    if bad:
        raise FeedError(f"{path}: key_turns {bad} are past its {len(turns)} turns; name turns that exist")
    return data, turns


def require_transcripts(manifest: TaskManifest, condition: str) -> tuple[TranscriptRef, ...]:
    """The task's transcripts, or FeedError saying `condition` cannot run the task without them."""
    if not manifest.transcripts:
        raise FeedError(
            f"task {manifest.task_id!r} has no transcripts, so condition {condition!r} cannot run it; "
            "add task.json transcripts or leave the task out of runs with that condition"
        )
    return manifest.transcripts


TermTest = Callable[[str], bool]
"""Whether a text states one of the task's answer terms (the corpus check's own matching rule)."""


def headline_problems(turns: Sequence[Turn], ref: TranscriptRef, has_term: TermTest | None) -> list[str]:
    """Why this transcript states its key fact as a headline rather than in passing (empty: in passing)."""
    out = []
    if len(turns) < MIN_TURNS:
        out.append(f"only {len(turns)} turns; a session of work has at least {MIN_TURNS}")
    if 0 in ref.key_turns:
        out.append("turn 0 is a key turn: the opening request must be about other work")
    if has_term is not None and has_term(turns[0].text):
        out.append("turn 0 states an answer term: the opening request must be about other work")
    for index in ref.key_turns:
        text = turns[index].text
        parts = sentences(text)
        if len(parts) < MIN_KEY_TURN_SENTENCES:
            out.append(f"turn {index} has {len(parts)} sentence(s); the key fact must sit amid at least {MIN_KEY_TURN_SENTENCES}")
        headed = [line for line in text.splitlines() if HEADLINE.match(line)]
        if headed:
            out.append(f"turn {index} has a headline line {headed[0][:60]!r}; say the fact in passing")
        if has_term is not None:
            if parts and has_term(parts[0]):
                out.append(f"turn {index} opens with the key fact; say it after other work")
            if not any(has_term(p) for p in parts[1:]):
                out.append(f"turn {index} is declared a key turn but holds no answer term after its first sentence")
    return out


def leak_problems(turns: Sequence[Turn], ref: TranscriptRef, has_term: TermTest | None, memory_grams: set[tuple[str, ...]],
                  grams_of: Callable[[str], set[tuple[str, ...]]]) -> list[str]:
    """Answer terms (`has_term`; None when the task has none) outside the declared key turns, and curated-memory wording (`memory_grams`, as
    `grams_of` cuts a text) copied into the transcript."""
    out = []
    for index, turn in enumerate(turns):
        if index not in ref.key_turns and has_term is not None and has_term(turn.text):
            out.append(f"turn {index} states an answer term but is not a declared key turn; declare it in key_turns or reword it")
        copied = grams_of(turn.text) & memory_grams
        if copied:
            out.append(f"turn {index} copies a curated memory's wording ({' '.join(sorted(copied)[0])!r}); "
                       "the feed records the work, not the curated item")
    return out


def feed_documents(task_root: Path, manifest: TaskManifest, condition: str) -> list[tuple[str, bytes, tuple[Turn, ...]]]:
    """Every transcript of the task as (file name, exact bytes, turns), checked; FeedError when there are none."""
    out = []
    for ref in require_transcripts(manifest, condition):
        data, turns = load_transcript(task_root, ref)
        out.append((Path(ref.path).name, data, turns))
    return out


def key_turn_texts(task_root: Path, manifest: TaskManifest) -> list[str]:
    """Texts of every declared key turn of the task's transcripts (empty when it has none)."""
    out: list[str] = []
    for ref in manifest.transcripts:
        _, turns = load_transcript(task_root, ref)
        out.extend(turns[i].text for i in ref.key_turns)
    return out
