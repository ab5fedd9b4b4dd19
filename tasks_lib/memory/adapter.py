"""The in-process memory adapter interface, its item/hit/accounting models and input checks.

Every memory system memtrial measures is wrapped as a `MemoryAdapter`. `recall` is final: it
checks the realm and query, asks `switches.active_lanes` which lanes may run (kill switch and
ablation), and only then calls the adapter's `search`. So the switches are honoured by the code
that would have made the call, for every adapter, and an adapter cannot forget to honour them.

Supersession rule (how updates stop stale values from being served): a new memory supersedes
(a) every id in its `supersedes` list, which must be live ids of the same realm, and (b) when it
has a `subject`, every older live memory of the same realm with the same subject (compared
case-insensitively, whitespace collapsed). A `correction` must name what it corrects through one
of the two. Superseded memories stay stored (for audit) but no lane ever serves them. Forgetting a
memory does not bring back the ones it superseded.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import ClassVar, Literal, Self

from pydantic import Field, ValidationError, field_validator

from tasks_lib.contracts import ContractModel, LaneName, Turn
from tasks_lib.memory.errors import MemoryInputError
from tasks_lib.memory.realms import validate_realm
from tasks_lib.memory.switches import active_lanes

MAX_TEXT_BYTES = 16_384
"""Largest memory text accepted, in UTF-8 bytes (16 KiB); split longer documents."""

MAX_QUERY_BYTES = 16_384
"""Largest recall query accepted, in UTF-8 bytes."""

MAX_K = 100
"""Most hits one recall may ask for."""

MAX_BATCH = 1_000
"""Most items one remember call may store."""

MemoryKind = Literal["convention", "fact", "decision", "procedure", "correction", "superseded"]


def check_text(value: object, field: str, limit: int = MAX_TEXT_BYTES) -> str:
    """Return `value` as str if it is non-empty UTF-8 text within `limit` bytes, else raise ValueError.

    Bytes are decoded strictly as UTF-8; a str holding lone surrogates (undecodable bytes smuggled
    in by `surrogateescape`) is rejected as not UTF-8.
    """
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as error:
            raise ValueError(f"{field} is not valid UTF-8 (bad byte at offset {error.start}); re-encode it as UTF-8") from None
    if not isinstance(value, str):
        raise ValueError(f"{field} must be text, got {type(value).__name__}")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as error:
        raise ValueError(f"{field} is not valid UTF-8 (lone surrogate at index {error.start}); re-encode it as UTF-8") from None
    if not value.strip():
        raise ValueError(f"{field} is empty; give the memory's text")
    if "\x00" in value:
        raise ValueError(f"{field} contains a NUL character; remove it")
    if size > limit:
        raise ValueError(f"{field} is {size} bytes; the limit is {limit} UTF-8 bytes, split it into smaller memories")
    return value


def normalize_subject(subject: str) -> str:
    """The comparison form of a subject: casefolded, whitespace collapsed."""
    return re.sub(r"\s+", " ", subject.casefold()).strip()


class MemoryItem(ContractModel):
    """One memory to store."""

    text: str
    """The memory's text: non-empty UTF-8, at most MAX_TEXT_BYTES bytes."""
    kind: MemoryKind = "fact"
    """What sort of knowledge it is; a `correction` must name a subject or ids it supersedes."""
    subject: str | None = Field(default=None, min_length=1, max_length=200)
    """What the memory is about; a newer memory with the same subject supersedes this one."""
    supersedes: tuple[str, ...] = ()
    """Ids of live memories of the same realm that this memory replaces."""
    speaker: str | None = Field(default=None, min_length=1, max_length=200)
    """Who said or wrote it (a conversation turn's speaker); a query naming them favours their memories."""
    timestamp: str | None = Field(default=None, min_length=1, max_length=200)
    """When it was said, as free text (e.g. `1:56 pm on 8 May, 2023`); indexed with the text."""
    session: str | None = Field(default=None, min_length=1, max_length=200)
    """The conversation or episode it belongs to; memories of one session, in storing order, are neighbours."""

    @field_validator("text", mode="before")
    @classmethod
    def _text_is_usable(cls, value: object) -> str:
        return check_text(value, "text")

    @field_validator("subject")
    @classmethod
    def _subject_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("subject is blank; give a subject or leave it out")
        return value

    @field_validator("speaker", "timestamp", "session")
    @classmethod
    def _metadata_not_blank(cls, value: str | None) -> str | None:
        if value is not None and (not value.strip() or "\x00" in value):
            raise ValueError("is blank or holds a NUL character; give text or leave it out")
        return value


class MemoryHit(ContractModel):
    """One recalled memory, ranked."""

    id: str
    """The memory's id, as returned by remember."""
    text: str
    """The memory's text."""
    score: float
    """Fused score (weighted sum of the lanes' normalised scores); higher is better; comparable only within one recall."""
    lanes: tuple[LaneName, ...]
    """The lanes that returned this memory, in the adapter's lane order."""
    kind: MemoryKind = "fact"
    """The memory's kind."""
    speaker: str | None = None
    """The memory's speaker, if it was stored with one."""
    timestamp: str | None = None
    """The memory's timestamp, if it was stored with one."""
    session: str | None = None
    """The memory's session, if it was stored with one."""


class Accounting(ContractModel):
    """What an adapter spent since it was opened (per adapter instance, per process)."""

    embedding_calls: int = Field(default=0, ge=0)
    """Calls made to the embedding model."""
    embedding_texts: int = Field(default=0, ge=0)
    """Texts embedded."""
    embedding_tokens: int = Field(default=0, ge=0)
    """Input tokens embedded (the model's tokenizer, or words for the hashed fallback)."""
    llm_calls: int = Field(default=0, ge=0)
    """Chat-model calls made (zero for the reference store)."""
    llm_tokens: int = Field(default=0, ge=0)
    """Chat-model tokens used (zero for the reference store)."""
    storage_bytes: int = Field(default=0, ge=0)
    """Bytes the store occupies now."""


def coerce_items(items: Sequence[MemoryItem | str | bytes]) -> list[MemoryItem]:
    """Validate every item before anything is written; raise MemoryInputError naming `items[i].field`."""
    if isinstance(items, (str, bytes)) or not isinstance(items, Sequence):
        raise MemoryInputError("items: expected a list of MemoryItem or texts, not a single value")
    if not items:
        raise MemoryInputError("items: the list is empty; give at least one memory")
    if len(items) > MAX_BATCH:
        raise MemoryInputError(f"items: {len(items)} items in one call; the limit is {MAX_BATCH}, split the batch")
    out = []
    for index, item in enumerate(items):
        try:
            out.append(item if isinstance(item, MemoryItem) else MemoryItem(text=item))  # type: ignore[arg-type]
        except ValidationError as error:
            first = error.errors()[0]
            field = ".".join(str(p) for p in first["loc"]) or "text"
            raise MemoryInputError(f"items[{index}].{field}: {first['msg'].removeprefix('Value error, ')}") from None
        if out[-1].kind == "correction" and out[-1].subject is None and not out[-1].supersedes:
            raise MemoryInputError(
                f"items[{index}].subject: a correction must say what it corrects; give subject or supersedes"
            )
    return out


class MemoryAdapter(ABC):
    """A memory system, in process. Subclasses implement the abstract methods; `recall` is final.

    Every method that takes a realm raises InvalidRealmError for a malformed name and
    UnknownRealmError for a realm that was never created.
    """

    LANES: ClassVar[tuple[str, ...]] = ()
    """The adapter's retrieval lanes, in the order hits list them."""

    ABSTENTION: ClassVar[str | None] = None
    """The system's own rule for returning nothing on an unrelated query, in words; None when it has
    none (a plain nearest-neighbour search always returns its k nearest), which conformance reports."""

    @abstractmethod
    def create_realm(self, realm: str) -> None:
        """Create an empty realm.

        Raises InvalidRealmError for a malformed name and RealmExistsError if it already exists.
        """

    @abstractmethod
    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        """Store `items` in `realm` atomically; return one new id per item, in order.

        Raises InvalidRealmError, UnknownRealmError, MemoryInputError (naming `items[i].field`) and
        UnknownMemoryIdError (a `supersedes` id that is not live in this realm). On any error
        nothing is stored and nothing already stored changes.
        """

    def ingest(self, realm: str, transcript: Sequence[Turn], session: str) -> tuple[str, ...]:
        """Feed one recorded session transcript through the system's own write path; return the ids of
        what it kept (what its extraction keeps, possibly nothing, is part of what is measured).

        The default keeps every turn as it is, through `remember`, in one atomic call: the turn's text,
        its role as speaker and `session` as its session. A system that extracts (an LLM, a summariser)
        overrides this. Raises what `remember` raises, and MemoryInputError for an empty transcript or
        one over MAX_BATCH turns.
        """
        if not transcript:
            raise MemoryInputError(f"transcript {session!r}: no turns; give at least one")
        if len(transcript) > MAX_BATCH:
            raise MemoryInputError(f"transcript {session!r}: {len(transcript)} turns; the limit is {MAX_BATCH}, split the session")
        return self.remember(realm, [MemoryItem(text=t.text, speaker=t.role, session=session) for t in transcript])

    def recall(self, realm: str, query: str | bytes, k: int = 5, lanes: Sequence[str] | None = None) -> tuple[MemoryHit, ...]:
        """Up to `k` live memories of `realm` for `query`, best first.

        `lanes` restricts the lanes (default all); the kill switch and ABLATE_LANES_ENV are
        applied here, before `search` runs: a switched-off call validates its arguments and the
        switches, then returns nothing without searching or embedding anything.
        Raises InvalidRealmError, UnknownRealmError, MemoryInputError (field `query` or `k`),
        UnknownLaneError and SwitchError.
        """
        validate_realm(realm)
        try:
            text = check_text(query, "query", MAX_QUERY_BYTES)
        except ValueError as error:
            raise MemoryInputError(str(error)) from None
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
            raise MemoryInputError(f"k: must be an integer from 1 to {MAX_K}, got {k!r}")
        use = active_lanes(self.LANES, lanes)
        self.check_realm(realm)
        if not use:
            return ()
        return tuple(self.search(realm, text, k, use)[:k])

    @abstractmethod
    def check_realm(self, realm: str) -> None:
        """Raise UnknownRealmError if `realm` was never created."""

    @abstractmethod
    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> Sequence[MemoryHit]:
        """Run the given lanes (already validated and non-empty) and fuse them; called only by recall."""

    @abstractmethod
    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        """Delete exactly these ids (any realm) atomically; return them.

        Raises MemoryInputError for an empty list and UnknownMemoryIdError, removing nothing, when
        any id is not stored.
        """

    @abstractmethod
    def accounting(self) -> Accounting:
        """What this adapter instance has spent so far, and the store's current size."""

    def close(self) -> None:  # noqa: B027 - a default no-op; adapters holding resources override it
        """Release resources; the default does nothing."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
