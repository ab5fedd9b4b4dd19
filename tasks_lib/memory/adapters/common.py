"""What the third-party adapters share: ids, query terms, rank fusion, record planning and the unavailable error.

The reference store keeps its own versions of these in `store` and `lanes`; the adapters do not
import them so that the reference store's retrieval can change without changing these systems.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tasks_lib.memory.adapter import MemoryHit, MemoryItem, normalize_subject
from tasks_lib.memory.embeddings import Embedder
from tasks_lib.memory.entities import COMMON_WORDS
from tasks_lib.memory.errors import (
    EmbedderMismatchError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)
from tasks_lib.text import stem_prefix

RRF_K = 60
"""The constant of reciprocal rank fusion: a hit at rank r in a lane adds 1 / (RRF_K + r)."""

POOL = 50
"""Candidates each lane returns before fusion."""

MAX_TERMS = 24
"""Most query terms one keyword search uses (the rarest-looking, i.e. longest, are kept)."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


class AdapterUnavailableError(MemoryStoreError):
    """A memory system's optional package or program is not installed here; the message says how to install it."""


def memory_id(realm: str, counter: int, kind: str, text: str) -> str:
    """The id of the `counter`-th memory stored in `realm`: 16 hex digits of sha256 of those inputs."""
    return hashlib.sha256(f"{realm}\n{counter}\n{kind}\n{text}".encode()).hexdigest()[:16]


def realm_key(realm: str) -> str:
    """A filesystem- and collection-safe key for `realm` (24 hex digits of its sha256)."""
    return hashlib.sha256(realm.encode()).hexdigest()[:24]


def query_terms(query: str) -> tuple[str, ...]:
    """The query's distinct casefolded non-common words (longer than one character), stemmed, sorted."""
    terms = {stem_prefix(w) for w in _WORD.findall(query.casefold()) if w not in COMMON_WORDS and len(w) > 1}
    return tuple(sorted(sorted(terms, key=lambda t: (-len(t), t))[:MAX_TERMS]))


def text_has_term(text: str, term: str) -> bool:
    """True when a word of `text` (casefolded) starts with `term`."""
    return re.search(r"(?<![^\W_])" + re.escape(term), text.casefold()) is not None


def rank_by_terms(matches: Mapping[str, Iterable[str]], total: int, newer: Mapping[str, int]) -> list[str]:
    """Rank documents by the summed IDF of the terms they contain (BM25 without length or frequency).

    `matches` maps each term to the live documents containing it; `total` is how many live
    documents there are; ties go to the newer document (higher `newer` value).
    """
    scores: dict[str, float] = {}
    for docs in matches.values():
        found = set(docs)
        if not found:
            continue
        idf = math.log(1.0 + (total - len(found) + 0.5) / (len(found) + 0.5))
        for doc in found:
            scores[doc] = scores.get(doc, 0.0) + idf
    return sorted(scores, key=lambda d: (-scores[d], -newer.get(d, 0), d))[:POOL]


def fuse(ranked: Mapping[str, Sequence[str]], lane_order: Sequence[str], newer: Mapping[str, int]) -> list[tuple[str, float, tuple[str, ...]]]:
    """Reciprocal rank fusion of per-lane rankings: (id, score, lanes in `lane_order`) best first, ties newest first."""
    scores: dict[str, float] = {}
    lanes: dict[str, list[str]] = {}
    for lane in lane_order:
        for rank, doc in enumerate(ranked.get(lane, ()), start=1):
            scores[doc] = scores.get(doc, 0.0) + 1.0 / (RRF_K + rank)
            lanes.setdefault(doc, []).append(lane)
    order = sorted(scores, key=lambda d: (-scores[d], -newer.get(d, 0), d))
    return [(doc, scores[doc], tuple(lanes[doc])) for doc in order]


METADATA_FIELDS = ("kind", "subject", "superseded_by", "seq", "speaker", "timestamp", "session")
"""What each third-party record carries beside its text, in the system's own metadata (empty string = none)."""


def plan_records(
    realm: str,
    checked: Sequence[MemoryItem],
    stored: int,
    named: Mapping[str, str],
    live_by_subject: Mapping[str, Sequence[str]],
) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """Plan one `remember` batch of a third-party system before anything is written.

    `stored` is how many memories the realm ever stored (the id counter); `named` maps each
    `supersedes` id found in this realm to its `superseded_by` ("" while live); `live_by_subject`
    maps each normalised subject of the batch to the realm's live ids with that subject. Returns
    the records to add (id, text and METADATA_FIELDS) and the marks (stored id -> the new id that
    supersedes it). Raises UnknownMemoryIdError naming `items[i].supersedes`, writing nothing.
    """
    records: list[dict[str, Any]] = []
    marks: dict[str, str] = {}
    for index, item in enumerate(checked):
        new_id = memory_id(realm, stored + index, item.kind, item.text)
        subject = normalize_subject(item.subject) if item.subject else ""
        batch = {r["id"]: r for r in records}
        for old in item.supersedes:
            if old in batch:
                live, why = batch[old]["superseded_by"] == "", "is already superseded"
            else:
                live = named.get(old) == "" and old not in marks
                why = "is not a memory of this realm" if old not in named else "is already superseded"
            if not live:
                raise UnknownMemoryIdError(f"items[{index}].supersedes: id {old!r} {why}; name a live memory of realm {realm!r}")
            if old in batch:
                batch[old]["superseded_by"] = new_id
            else:
                marks[old] = new_id
        if subject:
            for old in live_by_subject.get(subject, ()):
                marks.setdefault(old, new_id)
            for record in records:
                if record["subject"] == subject and record["superseded_by"] == "":
                    record["superseded_by"] = new_id
        records.append({"id": new_id, "text": item.text, "kind": item.kind, "subject": subject, "superseded_by": "",
                        "seq": stored + index, "speaker": item.speaker or "", "timestamp": item.timestamp or "",
                        "session": item.session or ""})
    return records, marks


def hit_from_record(mem_id: str, text: str, meta: Mapping[str, Any], score: float, lanes: tuple[str, ...]) -> MemoryHit:
    """A MemoryHit from a record's text and stored metadata (missing or empty metadata = none)."""
    return MemoryHit(id=mem_id, text=text, score=float(score), lanes=lanes, kind=str(meta.get("kind") or "fact"),  # type: ignore[arg-type]
                     speaker=str(meta.get("speaker") or "") or None, timestamp=str(meta.get("timestamp") or "") or None,
                     session=str(meta.get("session") or "") or None)


def dir_size(path: Path) -> int:
    """Bytes of every file under `path` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


REALMS_FILE = "memtrial-realms.json"
"""Bookkeeping beside a system's own files: realm name -> {stored, embedder, ...}; never read by retrieval."""


def read_realms(folder: Path) -> dict[str, dict[str, Any]]:
    """The realm book of an adapter folder (empty when none was written)."""
    file = folder / REALMS_FILE
    return json.loads(file.read_text()) if file.exists() else {}


def write_realms(folder: Path, book: Mapping[str, Mapping[str, Any]]) -> None:
    """Replace the realm book atomically (write a temporary file, then rename)."""
    file = folder / REALMS_FILE
    temporary = file.with_suffix(".tmp")
    temporary.write_text(json.dumps(book, indent=2, sort_keys=True) + "\n")
    temporary.replace(file)


def realm_entry(folder: Path, realm: str, embedder: str) -> dict[str, Any]:
    """The realm book's entry of `realm`; raises UnknownRealmError, or EmbedderMismatchError when it was built with another embedder."""
    entry = read_realms(folder).get(realm)
    if entry is None:
        raise UnknownRealmError(f"realm: {realm!r} was never created in {folder}; create it (no default realm is used)")
    embedder_matches(realm, folder, entry["embedder"], embedder)
    return entry


def book_realm(folder: Path, realm: str, embedder: str, **extra: Any) -> None:
    """Add `realm` to the realm book (stored count 0); raises RealmExistsError when it is there already."""
    book = read_realms(folder)
    if realm in book:
        raise RealmExistsError(f"realm: {realm!r} already exists in {folder}; realms are unique per trial, name a new one")
    book[realm] = {"stored": 0, "embedder": embedder, **extra}
    write_realms(folder, book)


def count_stored(folder: Path, realm: str, added: int) -> None:
    """Add `added` to the realm's stored-memories counter (the id counter) in the realm book."""
    book = read_realms(folder)
    book[realm]["stored"] = int(book[realm]["stored"]) + added
    write_realms(folder, book)


def embedder_matches(realm: str, folder: Path, recorded: str, embedder: str) -> None:
    """Raise EmbedderMismatchError when a realm built with `recorded` is opened with another embedder."""
    if recorded != embedder:
        raise EmbedderMismatchError(
            f"embedder: realm {realm!r} in {folder} was built with {recorded!r}, not {embedder!r}; "
            f"open it with {recorded!r} or use a new store"
        )


class CountingEmbedder:
    """memtrial's embedder in a third-party system's embedding slot, counting calls, texts and tokens."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self.calls = self.texts = self.tokens = 0

    def __call__(self, texts: Sequence[str]) -> Any:
        """Vectors (rows of norm 1) for `texts`."""
        texts = list(texts)
        self.calls += 1
        self.texts += len(texts)
        self.tokens += self.embedder.count_tokens(texts)
        return self.embedder.embed(texts)
