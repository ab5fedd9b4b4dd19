"""sqlite-vec (the `vec0` virtual table, loaded into SQLite) behind the memory adapter interface, as its docs use it.

One SQLite database `memory.sqlite` in the adapter's folder. One `vec0` table per realm
(`realm_<sha256(realm)[:24]>`): `id text primary key`, `embedding float[dim] distance_metric=cosine`,
metadata columns `superseded_by` and `subject` (the ones filtered on), auxiliary columns (`+text`,
`+kind`, `+seq`, `+speaker`, `+timestamp`, `+session`) returned with each hit. A plain table
`memtrial_realms` in the same database is the realm book (realm -> table, embedder, stored count), so
a `remember` or `forget` is one SQLite transaction over the book and the vectors: all or nothing.

One lane, `semantic`: sqlite-vec's KNN query, `embedding MATCH :vector AND k = :k AND
superseded_by = ''`, ordered by its exact cosine distance, score = 1 - distance. sqlite-vec has no
floor, so it never abstains. The vectors are memtrial's embedder (`minilm`, or the labelled offline
fallback `hashed`), serialised with `sqlite_vec.serialize_float32`.

Python's own sqlite3 loads extensions only when it was built to; where it was not (this project's
interpreter), `pysqlite3` (the `pysqlite3-binary` wheel, a newer SQLite built with extension loading)
is used: the `sqlite-vec` extra installs both.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar

from tasks_lib.memory.adapter import (
    Accounting,
    MemoryAdapter,
    MemoryHit,
    MemoryItem,
    coerce_items,
    normalize_subject,
)
from tasks_lib.memory.adapters.common import (
    AdapterUnavailableError,
    CountingEmbedder,
    dir_size,
    embedder_matches,
    hit_from_record,
    plan_records,
    realm_key,
)
from tasks_lib.memory.embeddings import Embedder, get_embedder
from tasks_lib.memory.errors import (
    MemoryInputError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)
from tasks_lib.memory.realms import validate_realm

SQLITE_VEC_PACKAGE = "sqlite-vec==0.1.9"
"""The distribution this adapter needs (the `sqlite-vec` extra, with pysqlite3-binary where sqlite3 cannot load extensions)."""

TABLE_PREFIX = "realm_"
"""Prefix of the vec0 tables this adapter makes."""

DATABASE = "memory.sqlite"
"""The database file inside the adapter's folder."""

AUXILIARY = ("text", "kind", "seq", "speaker", "timestamp", "session")
"""Columns stored beside each vector and returned with it (not filterable)."""


def sqlite_module() -> ModuleType:
    """A DB-API sqlite module that can load extensions: the standard library's if it can, else pysqlite3.

    Raises ImportError saying so when neither can.
    """
    if hasattr(sqlite3.Connection, "enable_load_extension"):
        return sqlite3
    try:
        from pysqlite3 import dbapi2
    except ImportError as error:
        raise ImportError(f"this Python's sqlite3 cannot load extensions and pysqlite3 is not installed ({error})") from None
    return dbapi2


def sqlite_vec_unavailable() -> str | None:
    """None when sqlite-vec can be loaded into an SQLite connection here, else why not."""
    try:
        import sqlite_vec  # noqa: F401

        sqlite_module()
    except ImportError as error:
        return f"memory system 'sqlite-vec' needs {SQLITE_VEC_PACKAGE} ({error}); install it with: pip install -e '.[sqlite-vec]'"
    return None


def placeholders(count: int) -> str:
    """`?, ?, ...` for `count` parameters."""
    return ", ".join("?" * count)


class SqliteVecMemoryAdapter(MemoryAdapter):
    """sqlite-vec as shipped: one vec0 table per realm, its exact cosine KNN query with a metadata filter (lane: semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("semantic",)
    ABSTENTION: ClassVar[str | None] = None  # the KNN query returns its k nearest, however far

    def __init__(self, path: Path | str, embedder: Embedder | str = "minilm") -> None:
        """Open (or create) a store in folder `path`; raises AdapterUnavailableError, the embedder's errors, MemoryStoreError."""
        reason = sqlite_vec_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        import sqlite_vec

        self.path = Path(path)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counter = CountingEmbedder(self.embedder)
        self._serialize = sqlite_vec.serialize_float32
        module = sqlite_module()
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._conn: Any = module.connect(str(self.path / DATABASE), isolation_level=None, check_same_thread=False)
            self._conn.enable_load_extension(True)
            sqlite_vec.load(self._conn)
            self._conn.enable_load_extension(False)
            self._conn.execute("CREATE TABLE IF NOT EXISTS memtrial_realms (realm TEXT PRIMARY KEY, tbl TEXT NOT NULL, "
                               "embedder TEXT NOT NULL, stored INTEGER NOT NULL)")
        except Exception as error:  # noqa: BLE001 - sqlite and the extension loader raise many types; report them as one
            raise MemoryStoreError(f"sqlite-vec path: cannot open a store at {self.path} ({type(error).__name__}: {error})") from error

    # ------------------------------------------------------------------ realms

    def _entry(self, realm: str) -> tuple[str, int]:
        """(table, stored count) of `realm`; raises UnknownRealmError / EmbedderMismatchError."""
        row = self._conn.execute("SELECT tbl, embedder, stored FROM memtrial_realms WHERE realm = ?", (realm,)).fetchone()
        if row is None:
            raise UnknownRealmError(f"realm: {realm!r} was never created in {self.path}; create it (no default realm is used)")
        embedder_matches(realm, self.path, row[1], self.embedder.name)
        return str(row[0]), int(row[2])

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        if self._conn.execute("SELECT 1 FROM memtrial_realms WHERE realm = ?", (realm,)).fetchone():
            raise RealmExistsError(f"realm: {realm!r} already exists in {self.path}; realms are unique per trial, name a new one")
        table = TABLE_PREFIX + realm_key(realm)
        columns = ", ".join(f"+{c} {'integer' if c == 'seq' else 'text'}" for c in AUXILIARY)
        with self._transaction():
            self._conn.execute(f"CREATE VIRTUAL TABLE {table} USING vec0(id text primary key, "
                               f"embedding float[{self.embedder.dim}] distance_metric=cosine, superseded_by text, subject text, {columns})")
            self._conn.execute("INSERT INTO memtrial_realms VALUES (?, ?, ?, 0)", (realm, table, self.embedder.name))

    def check_realm(self, realm: str) -> None:
        self._entry(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(sorted(r[0] for r in self._conn.execute("SELECT realm FROM memtrial_realms")))

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """The block as one immediate transaction: committed on success, rolled back on any error."""
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise
        self._conn.execute("COMMIT")

    # ------------------------------------------------------------------ writes

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        table, stored = self._entry(realm)
        wanted = sorted({old for item in checked for old in item.supersedes})
        named = dict(self._conn.execute(f"SELECT id, superseded_by FROM {table} WHERE id IN ({placeholders(len(wanted))})", wanted).fetchall()) if wanted else {}
        by_subject = {
            subject: [r[0] for r in self._conn.execute(f"SELECT id FROM {table} WHERE subject = ? AND superseded_by = ''", (subject,))]
            for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject})
        }
        records, marks = plan_records(realm, checked, stored, named, by_subject)
        vectors = self._counter([r["text"] for r in records])
        columns = ("id", "embedding", "superseded_by", "subject", *AUXILIARY)
        try:
            with self._transaction():
                self._conn.executemany(
                    f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({placeholders(len(columns))})",
                    [(r["id"], self._serialize(list(map(float, v))), r["superseded_by"], r["subject"], *(r[c] for c in AUXILIARY))
                     for r, v in zip(records, vectors)],
                )
                self._conn.executemany(f"UPDATE {table} SET superseded_by = ? WHERE id = ?", [(new, old) for old, new in sorted(marks.items())])
                self._conn.execute("UPDATE memtrial_realms SET stored = stored + ? WHERE realm = ?", (len(records), realm))
        except Exception as error:  # noqa: BLE001 - rolled back; report the sqlite failure with context
            raise MemoryStoreError(f"sqlite-vec: storing {len(records)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(r["id"] for r in records)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        tables = [r[0] for r in self._conn.execute("SELECT tbl FROM memtrial_realms ORDER BY realm")]
        holders = []
        for table in tables:
            found = [r[0] for r in self._conn.execute(f"SELECT id FROM {table} WHERE id IN ({placeholders(len(wanted))})", wanted)]
            if found:
                holders.append((table, found))
        present = {i for _, found in holders for i in found}
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        with self._transaction():
            for table, found in holders:
                self._conn.execute(f"DELETE FROM {table} WHERE id IN ({placeholders(len(found))})", found)
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """sqlite-vec's KNN query over the live rows, nearest first, score = 1 - cosine distance, no floor."""
        table, _ = self._entry(realm)
        (vector,) = self._counter([query])
        rows = self._conn.execute(
            f"SELECT id, distance, {', '.join(AUXILIARY)} FROM {table} "
            "WHERE embedding MATCH ? AND k = ? AND superseded_by = '' ORDER BY distance",
            (self._serialize(list(map(float, vector))), k),
        ).fetchall()
        hits = []
        for mem_id, distance, *values in rows:
            meta = dict(zip(AUXILIARY, values))
            hits.append(hit_from_record(mem_id, meta["text"], meta, 1.0 - float(distance), ("semantic",)))
        return hits

    def accounting(self) -> Accounting:
        return Accounting(embedding_calls=self._counter.calls, embedding_texts=self._counter.texts,
                          embedding_tokens=self._counter.tokens, storage_bytes=dir_size(self.path))

    def close(self) -> None:
        """Close the SQLite connection."""
        self._conn.close()
