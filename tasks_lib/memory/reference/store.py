"""The reference memory system: one SQLite file with FTS5, embeddings and an entity graph.

Rows live in `memories` (text, kind, subject, speaker, timestamp, session, embedding,
`superseded_by`), `memories_fts` (FTS5, same rowid; column `text` is speaker, text and timestamp,
column `context` the text of the live neighbours in the same session), `sessions` and
`sessions_fts` (one pooled document per session: its live memories' text) and `entities`
(casefolded entity per memory). Realms are rows of `realms`;
a realm must be created before use. Ids are the first 16 hex digits of
sha256(realm, per-realm counter, kind, text), so the same plan gives the same ids. Every write
is one transaction: an error leaves the file as it was. See `adapter` for the supersession rule
and `lanes` for what each lane returns.
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import ClassVar, TypeVar

from tasks_lib.memory.adapter import (
    Accounting,
    MemoryAdapter,
    MemoryHit,
    MemoryItem,
    coerce_items,
    normalize_subject,
)
from tasks_lib.memory.embeddings import DEFAULT_EMBEDDER, Embedder, get_embedder
from tasks_lib.memory.entities import extract_entities
from tasks_lib.memory.errors import (
    EmbedderMismatchError,
    MemoryInputError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)
from tasks_lib.memory.realms import validate_realm
from tasks_lib.memory.reference.dates import query_period
from tasks_lib.memory.reference.lanes import (
    LANES,
    corrections_lane,
    date_focus,
    fuse,
    graph_lane,
    keyword_lane,
    live_entities,
    live_vectors,
    named_speaker,
    semantic_lane,
    speaker_focus,
)

T = TypeVar("T")

STORE_SCHEMA_VERSION = "2"
"""Version of the store's table layout, kept in its `meta` table."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS realms(name TEXT PRIMARY KEY, stored INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS memories(
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    realm TEXT NOT NULL REFERENCES realms(name),
    text TEXT NOT NULL,
    kind TEXT NOT NULL,
    subject TEXT,
    speaker TEXT,
    timestamp TEXT,
    session_id INTEGER REFERENCES sessions(id),
    superseded_by TEXT,
    vector BLOB NOT NULL
);
CREATE TABLE IF NOT EXISTS sessions(id INTEGER PRIMARY KEY, realm TEXT NOT NULL, name TEXT NOT NULL, UNIQUE(realm, name));
CREATE VIRTUAL TABLE IF NOT EXISTS sessions_fts USING fts5(text, tokenize='porter unicode61 remove_diacritics 2');
CREATE INDEX IF NOT EXISTS memories_session ON memories(session_id, seq);
CREATE INDEX IF NOT EXISTS memories_live ON memories(realm, superseded_by);
CREATE INDEX IF NOT EXISTS memories_subject ON memories(realm, subject);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(text, context, tokenize='porter unicode61 remove_diacritics 2');
CREATE TABLE IF NOT EXISTS entities(entity TEXT NOT NULL, seq INTEGER NOT NULL, PRIMARY KEY(entity, seq)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS entities_seq ON entities(seq);
"""


NEIGHBOURS = 1
"""Memories on each side, in the same session, whose text forms a memory's keyword context."""


def indexed_text(item: MemoryItem) -> str:
    """What the keyword lane indexes for `item`: `speaker: text (timestamp)`."""
    said = f"{item.speaker}: {item.text}" if item.speaker else item.text
    return f"{said} ({item.timestamp})" if item.timestamp else said


def said_text(item: MemoryItem) -> str:
    """`speaker: text`, or the text alone when the item has no speaker."""
    return f"{item.speaker}: {item.text}" if item.speaker else item.text


def embedded_text(item: MemoryItem, previous: str | None) -> str:
    """What the semantic lane embeds for `item`: the previous memory of its session (if any), then `speaker: text`."""
    return f"{previous}\n{said_text(item)}" if previous else said_text(item)


def memory_id(realm: str, counter: int, kind: str, text: str) -> str:
    """The id of the `counter`-th memory stored in `realm`."""
    return hashlib.sha256(f"{realm}\n{counter}\n{kind}\n{text}".encode()).hexdigest()[:16]


class SqliteMemoryStore(MemoryAdapter):
    """memtrial's embedded reference memory system (lanes: keyword, semantic, graph, corrections)."""

    LANES: ClassVar[tuple[str, ...]] = LANES
    ABSTENTION: ClassVar[str | None] = "keyword and graph lanes need a shared term or entity; semantic drops cosine below the embedder's min_similarity"

    def __init__(
        self, path: Path | str, embedder: Embedder | str | None = None, *, create: bool = True, read_only: bool = False,
        durable: bool = True,
    ) -> None:
        """Open (or with `create`, make) the store at `path`.

        `embedder` defaults to the one the store was built with, or DEFAULT_EMBEDDER for a new
        store. With `read_only` the file is opened by SQLite in read-only mode (it must exist;
        nothing is ever written, so it can sit on a read-only mount) and every write raises
        MemoryStoreError. Without `durable` (a disposable store: a suite's scratch store, an arm's
        per-attempt store) a commit is not synced to disk and the rollback journal stays in memory, so
        a crash of the machine may lose or damage the file; what it stores and serves is the same. Raises MemoryStoreError when `path` is missing (create=False or
        read_only) or is not a store, EmbedderMismatchError when the store was built with another
        embedder, and UnknownEmbedderError / EmbedderUnavailableError from the embedder registry.
        """
        self.path = Path(path)
        self.read_only = read_only
        if (read_only or not create) and not self.path.is_file():
            raise MemoryStoreError(f"store path: no memory store at {self.path}; snapshot or restore one first")
        if read_only:
            self._conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True, isolation_level=None, check_same_thread=False)
        else:
            self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        if not durable and not read_only:  # the sync per commit was most of a scratch store's cost on ext4
            self._conn.execute("PRAGMA synchronous=OFF")
            self._conn.execute("PRAGMA journal_mode=MEMORY")
        self._counts = {"calls": 0, "texts": 0, "tokens": 0}
        self._cache: dict[tuple[str, str], object] = {}  # (what, realm) -> value; cleared on every write
        existing_only = read_only or not create
        try:
            if not existing_only:
                self._conn.executescript(_SCHEMA)
            meta = dict(self._conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError as error:
            self._conn.close()
            raise MemoryStoreError(f"store path: {self.path} is not a memtrial memory store ({error})") from None
        if meta.get("schema_version", STORE_SCHEMA_VERSION) != STORE_SCHEMA_VERSION:
            self._conn.close()
            raise MemoryStoreError(
                f"store path: {self.path} has store schema {meta['schema_version']}; this memtrial reads {STORE_SCHEMA_VERSION}"
            )
        recorded = meta.get("embedder")
        if existing_only and recorded is None:
            self._conn.close()
            raise MemoryStoreError(f"store path: {self.path} is not a memtrial memory store (no embedder recorded); build it first")
        if existing_only and not read_only:
            self._conn.executescript(_SCHEMA)  # a store of this schema version: only indexes it may lack are added
        wanted = embedder.name if isinstance(embedder, Embedder) else (embedder or recorded or DEFAULT_EMBEDDER)
        if recorded is not None and recorded != wanted:
            self._conn.close()
            raise EmbedderMismatchError(
                f"embedder: store {self.path} was built with {recorded!r}, not {wanted!r}; open it with {recorded!r} or build a new store"
            )
        try:
            self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(wanted)
        except MemoryStoreError:
            self._conn.close()
            raise
        if recorded is None:
            with self._transaction():
                self._conn.executemany(
                    "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)",
                    [("schema_version", STORE_SCHEMA_VERSION), ("embedder", self.embedder.name), ("dim", str(self.embedder.dim))],
                )

    # ------------------------------------------------------------------ plumbing

    @contextmanager
    def _transaction(self) -> Iterator[sqlite3.Connection]:
        if self.read_only:
            raise MemoryStoreError(f"store path: {self.path} was opened read-only; open it without read_only to change it")
        self._cache.clear()
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield self._conn
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    def _embed(self, texts: Sequence[str]) -> list[bytes]:
        vectors = self.embedder.embed(texts)
        self._counts["calls"] += 1
        self._counts["texts"] += len(texts)
        self._counts["tokens"] += self.embedder.count_tokens(texts)
        return [row.astype("float32").tobytes() for row in vectors]

    def close(self) -> None:
        """Close the SQLite connection."""
        self._conn.close()

    # ------------------------------------------------------------------ realms

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        try:
            with self._transaction() as conn:
                conn.execute("INSERT INTO realms(name) VALUES (?)", (realm,))
        except sqlite3.IntegrityError:
            raise RealmExistsError(f"realm: {realm!r} already exists; realms are unique per trial, name a new one") from None

    def check_realm(self, realm: str) -> None:
        if self._conn.execute("SELECT 1 FROM realms WHERE name = ?", (realm,)).fetchone() is None:
            raise UnknownRealmError(f"realm: {realm!r} was never created in {self.path}; create it (no default realm is used)")

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(r[0] for r in self._conn.execute("SELECT name FROM realms ORDER BY name"))

    def live_ids(self, realm: str) -> tuple[str, ...]:
        """Ids of the memories of `realm` that may be served (not superseded), oldest first."""
        validate_realm(realm)
        self.check_realm(realm)
        rows = self._conn.execute("SELECT id FROM memories WHERE realm = ? AND superseded_by IS NULL ORDER BY seq", (realm,))
        return tuple(r[0] for r in rows)

    # ------------------------------------------------------------------ writes

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        self.check_realm(realm)
        vectors = self._embed([embedded_text(item, prev) for item, prev in zip(checked, self._previous_texts(realm, checked))])
        ids: list[str] = []
        with self._transaction() as conn:
            (stored,) = conn.execute("SELECT stored FROM realms WHERE name = ?", (realm,)).fetchone()
            touched: set[int] = set()
            for index, (item, vector) in enumerate(zip(checked, vectors)):
                new_id = memory_id(realm, stored + index, item.kind, item.text)
                touched |= self._supersede(conn, realm, index, item, new_id)
                subject = normalize_subject(item.subject) if item.subject else None
                session_id = self._session_id(conn, realm, item.session) if item.session else None
                cur = conn.execute(
                    """INSERT INTO memories(id, realm, text, kind, subject, speaker, timestamp, session_id, vector)
                       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)""",
                    (new_id, realm, item.text, item.kind, subject, item.speaker, item.timestamp, session_id, vector),
                )
                seq = cur.lastrowid
                conn.execute(
                    "INSERT INTO memories_fts(rowid, text, context) VALUES (?, ?, '')", (seq, indexed_text(item))
                )
                conn.executemany(
                    "INSERT INTO entities(entity, seq) VALUES (?, ?)", [(e, seq) for e in sorted(extract_entities(item.text))]
                )
                if session_id is not None:
                    touched.add(session_id)
                ids.append(new_id)
            conn.execute("UPDATE realms SET stored = stored + ? WHERE name = ?", (len(checked), realm))
            self._refresh_sessions(conn, touched)
        return tuple(ids)

    def _previous_texts(self, realm: str, items: Sequence[MemoryItem]) -> list[str | None]:
        """For each item with a session, `speaker: text` of the memory stored just before it in that session."""
        last: dict[str, str | None] = {}
        out: list[str | None] = []
        for item in items:
            if item.session is None:
                out.append(None)
                continue
            if item.session not in last:
                row = self._conn.execute(
                    """SELECT m.text, m.speaker FROM memories m JOIN sessions s ON s.id = m.session_id
                       WHERE s.realm = ? AND s.name = ? AND m.superseded_by IS NULL ORDER BY m.seq DESC LIMIT 1""",
                    (realm, item.session),
                ).fetchone()
                last[item.session] = (f"{row[1]}: {row[0]}" if row[1] else row[0]) if row else None
            out.append(last[item.session])
            last[item.session] = said_text(item)
        return out

    @staticmethod
    def _session_id(conn: sqlite3.Connection, realm: str, name: str) -> int:
        """The row id of session `name` of `realm`, created on first use."""
        conn.execute("INSERT OR IGNORE INTO sessions(realm, name) VALUES (?, ?)", (realm, name))
        (sid,) = conn.execute("SELECT id FROM sessions WHERE realm = ? AND name = ?", (realm, name)).fetchone()
        return int(sid)

    @staticmethod
    def _refresh_sessions(conn: sqlite3.Connection, session_ids: set[int]) -> None:
        """Rebuild the neighbour context of every live memory, and the pooled document, of these sessions."""
        for sid in sorted(session_ids):
            rows = conn.execute(
                "SELECT seq, text, speaker, timestamp FROM memories WHERE session_id = ? AND superseded_by IS NULL ORDER BY seq",
                (sid,),
            ).fetchall()
            said = [f"{speaker}: {text}" if speaker else text for _, text, speaker, _ in rows]
            for i, (seq, *_rest) in enumerate(rows):
                context = " ".join(said[j] for j in range(max(0, i - NEIGHBOURS), min(len(rows), i + NEIGHBOURS + 1)) if j != i)
                conn.execute("UPDATE memories_fts SET context = ? WHERE rowid = ?", (context, seq))
            conn.execute("DELETE FROM sessions_fts WHERE rowid = ?", (sid,))
            if rows:
                stamps = " ".join(dict.fromkeys(r[3] for r in rows if r[3]))
                conn.execute("INSERT INTO sessions_fts(rowid, text) VALUES (?, ?)", (sid, " ".join(said) + " " + stamps))

    def _supersede(self, conn: sqlite3.Connection, realm: str, index: int, item: MemoryItem, new_id: str) -> set[int]:
        """Mark what `item` replaces and return the sessions it touched.

        Raises UnknownMemoryIdError if a supersedes id is not live in `realm`.
        """
        for old in item.supersedes:
            row = conn.execute("SELECT realm, superseded_by FROM memories WHERE id = ?", (old,)).fetchone()
            if row is None or row[0] != realm or row[1] is not None:
                why = "is not stored" if row is None else ("is in another realm" if row[0] != realm else "is already superseded")
                raise UnknownMemoryIdError(f"items[{index}].supersedes: id {old!r} {why}; name a live memory of realm {realm!r}")
            conn.execute("UPDATE memories SET superseded_by = ? WHERE id = ?", (new_id, old))
        if item.subject:
            conn.execute(
                "UPDATE memories SET superseded_by = ? WHERE realm = ? AND subject = ? AND superseded_by IS NULL",
                (new_id, realm, normalize_subject(item.subject)),
            )
        rows = conn.execute(  # realm first: the memories_live index answers it without a table scan
            "SELECT DISTINCT session_id FROM memories WHERE realm = ? AND superseded_by = ? AND session_id IS NOT NULL", (realm, new_id)
        )
        return {r[0] for r in rows}

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        with self._transaction() as conn:
            marks = ",".join("?" * len(wanted))
            found = dict(conn.execute(f"SELECT id, seq FROM memories WHERE id IN ({marks})", wanted).fetchall())
            missing = [i for i in wanted if i not in found]
            if missing:
                raise UnknownMemoryIdError(
                    f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten"
                )
            seqs = [(found[i],) for i in wanted]
            touched = {
                r[0] for r in conn.execute(f"SELECT DISTINCT session_id FROM memories WHERE seq IN ({marks})", [s for (s,) in seqs])
            } - {None}
            conn.executemany("DELETE FROM memories_fts WHERE rowid = ?", seqs)
            conn.executemany("DELETE FROM entities WHERE seq = ?", seqs)
            conn.executemany("DELETE FROM memories WHERE seq = ?", seqs)
            self._refresh_sessions(conn, touched)
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        (version,) = self._conn.execute("PRAGMA data_version").fetchone()
        if self._cache.get(("data_version", "")) != version:  # another connection wrote: drop cached reads
            self._cache.clear()
            self._cache[("data_version", "")] = version
        ranked: dict[str, list[tuple[int, float]]] = {}
        if "keyword" in lanes:
            ranked["keyword"] = keyword_lane(self._conn, realm, query)
        if "semantic" in lanes:
            (vector,) = self.embedder.embed([query])
            self._counts["calls"] += 1
            self._counts["texts"] += 1
            self._counts["tokens"] += self.embedder.count_tokens([query])
            vectors = self._cached(("vectors", realm), lambda: live_vectors(self._conn, realm, self.embedder))
            ranked["semantic"] = semantic_lane(vectors, vector, self.embedder)
        if "graph" in lanes:
            ranked["graph"] = graph_lane(self._cached(("entities", realm), lambda: live_entities(self._conn, realm)), query)
        if "corrections" in lanes and self._cached(("corrections", realm), lambda: self._has_corrections(realm)):
            ranked["corrections"] = corrections_lane(self._conn, realm, query)
        fused = fuse(ranked)
        speakers: list[str] = self._cached(("speakers", realm), lambda: self._speakers(realm))
        speaker = named_speaker(query, speakers) if speakers else None
        period = query_period(query)
        if fused and (speaker is not None or period is not None):
            marks = ",".join("?" * len(fused))
            stamps = self._conn.execute(f"SELECT seq, speaker, timestamp FROM memories WHERE seq IN ({marks})", [f[0] for f in fused])
            meta = {seq: (spk, stamp) for seq, spk, stamp in stamps}
            if speaker is not None:
                fused = speaker_focus(fused, {seq: m[0] for seq, m in meta.items()}, speaker)
            if period is not None:
                fused = date_focus(fused, {seq: m[1] for seq, m in meta.items()}, period)
        top = fused[:k]
        marks = ",".join("?" * len(top))
        rows = self._conn.execute(
            f"""SELECT m.seq, m.id, m.text, m.kind, m.speaker, m.timestamp, s.name
                FROM memories m LEFT JOIN sessions s ON s.id = m.session_id WHERE m.seq IN ({marks})""",
            [seq for seq, _, _ in top],
        ).fetchall() if top else []
        by_seq = {row[0]: row[1:] for row in rows}
        hits = []
        for seq, score, hit_lanes in top:
            mem_id, text, kind, spk, stamp, session = by_seq[seq]
            hits.append(
                MemoryHit(id=mem_id, text=text, score=score, lanes=hit_lanes, kind=kind, speaker=spk, timestamp=stamp, session=session)
            )
        return hits

    def _cached(self, key: tuple[str, str], compute: Callable[[], T]) -> T:
        """The value cached under `key` since the last write, computed on first use."""
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]  # type: ignore[return-value]

    def _speakers(self, realm: str) -> list[str]:
        rows = self._conn.execute("SELECT DISTINCT speaker FROM memories WHERE realm = ? AND speaker IS NOT NULL", (realm,))
        return [r[0] for r in rows]

    def _has_corrections(self, realm: str) -> bool:
        """Whether `realm` holds anything the corrections lane can serve (a superseded memory or a correction)."""
        row = self._conn.execute(
            "SELECT 1 FROM memories WHERE realm = ? AND (superseded_by IS NOT NULL OR kind = 'correction') LIMIT 1", (realm,)
        ).fetchone()
        return row is not None

    def accounting(self) -> Accounting:
        (pages,) = self._conn.execute("PRAGMA page_count").fetchone()
        (size,) = self._conn.execute("PRAGMA page_size").fetchone()
        return Accounting(
            embedding_calls=self._counts["calls"],
            embedding_texts=self._counts["texts"],
            embedding_tokens=self._counts["tokens"],
            storage_bytes=pages * size,
        )
