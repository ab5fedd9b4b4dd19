"""LanceDB (embedded, `lancedb.connect(folder)`) behind the memory adapter interface, as its docs use it.

One table per realm (`realm_<sha256(realm)[:24]>`), rows: `id`, `text`, `vector`, the record
metadata of `common.METADATA_FIELDS` as columns, and the realm name. A native full-text index
(`FTS`, LanceDB's own BM25) is built on `text` when the realm is created; rows added later are
searched too (LanceDB scans what the index does not cover yet). The vectors are memtrial's
embedder (`minilm` = all-MiniLM-L6-v2, the model LanceDB's docs use with its sentence-transformers
registry; `hashed` is the labelled offline fallback), cosine distance.

Lanes, LanceDB's own queries, each with the prefilter `superseded_by = ''` (`prefilter=True`):
- `keyword`: `search(query, query_type="fts")`, LanceDB's BM25 score;
- `semantic`: `search(vector, query_type="vector").distance_type("cosine")`, nearest first.
With both lanes, the two result tables are fused by LanceDB's default hybrid reranker
(`RRFReranker().rerank_hybrid`), which is what `query_type="hybrid"` does, so each hit still
says which lane found it. LanceDB has no abstention rule: the vector query returns its k nearest.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
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
    METADATA_FIELDS,
    POOL,
    AdapterUnavailableError,
    CountingEmbedder,
    book_realm,
    count_stored,
    dir_size,
    hit_from_record,
    plan_records,
    read_realms,
    realm_entry,
    realm_key,
)
from tasks_lib.memory.embeddings import Embedder, get_embedder
from tasks_lib.memory.errors import (
    MemoryInputError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
)
from tasks_lib.memory.realms import validate_realm

LANCEDB_PACKAGE = "lancedb==0.40.0"
"""The distribution this adapter needs (the `lancedb` extra)."""

TABLE_PREFIX = "realm_"
"""Prefix of the table names this adapter makes."""

def lancedb_unavailable() -> str | None:
    """None when lancedb can be imported here, else why not."""
    try:
        import lancedb  # noqa: F401
    except ImportError as error:
        return f"memory system 'lancedb' needs {LANCEDB_PACKAGE} ({error}); install it with: pip install -e '.[lancedb]'"
    return None


def sql_text(value: str) -> str:
    """`value` as a LanceDB SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


class LanceDbMemoryAdapter(MemoryAdapter):
    """LanceDB as shipped: one table per realm, its FTS, vector and hybrid (RRF) queries (lanes: keyword, semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("keyword", "semantic")
    ABSTENTION: ClassVar[str | None] = None  # the vector query returns its k nearest, however far

    def __init__(self, path: Path | str, embedder: Embedder | str = "minilm") -> None:
        """Open (or create) a LanceDB database in folder `path`; raises AdapterUnavailableError, the embedder's errors, MemoryStoreError."""
        reason = lancedb_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        os.environ.setdefault("LANCE_LOG", "error")  # lance logs a WARN line per new table on stderr
        import lancedb

        self.path = Path(path)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counter = CountingEmbedder(self.embedder)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._db = lancedb.connect(str(self.path))
        except Exception as error:  # noqa: BLE001 - lancedb raises many types; report them as one
            raise MemoryStoreError(f"lancedb path: cannot open a LanceDB database at {self.path} ({type(error).__name__}: {error})") from error
        self._tables: dict[str, Any] = {}

    def _book(self) -> dict[str, dict[str, Any]]:
        return read_realms(self.path)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._counter(texts)]

    def _table(self, realm: str) -> Any:
        if realm in self._tables:
            return self._tables[realm]
        entry = realm_entry(self.path, realm, self.embedder.name)
        self._tables[realm] = self._db.open_table(entry["table"])
        return self._tables[realm]

    # ------------------------------------------------------------------ realms

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        import pyarrow as pa
        from lancedb.index import FTS

        if realm in self._book():
            raise RealmExistsError(f"realm: {realm!r} already exists in {self.path}; realms are unique per trial, name a new one")
        name = TABLE_PREFIX + realm_key(realm)
        fields = [pa.field("id", pa.string()), pa.field("text", pa.string()), pa.field("vector", pa.list_(pa.float32(), self.embedder.dim))]
        fields += [pa.field(f, pa.int64() if f == "seq" else pa.string()) for f in METADATA_FIELDS]
        table = self._db.create_table(name, schema=pa.schema(fields), mode="overwrite")
        table.create_index("text", config=FTS(), replace=True)
        book_realm(self.path, realm, self.embedder.name, table=name)
        self._tables[realm] = table

    def check_realm(self, realm: str) -> None:
        self._table(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the database, sorted."""
        return tuple(sorted(self._book()))

    # ------------------------------------------------------------------ writes

    def _rows(self, table: Any, where: str) -> list[dict[str, Any]]:
        return table.search().where(where).select(["id", "superseded_by"]).limit(None).to_list()

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        table = self._table(realm)
        stored = int(realm_entry(self.path, realm, self.embedder.name)["stored"])
        wanted = sorted({old for item in checked for old in item.supersedes})
        named = {r["id"]: r["superseded_by"] for r in self._rows(table, f"id IN ({', '.join(map(sql_text, wanted))})")} if wanted else {}
        by_subject = {
            subject: [r["id"] for r in self._rows(table, f"subject = {sql_text(subject)} AND superseded_by = ''")]
            for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject})
        }
        records, marks = plan_records(realm, checked, stored, named, by_subject)
        vectors = self._embed([r["text"] for r in records])
        ids = [r["id"] for r in records]
        added = False
        try:
            table.add([{**r, "vector": v} for r, v in zip(records, vectors)])
            added = True
            for old, new in sorted(marks.items()):
                table.update(where=f"id = {sql_text(old)}", values={"superseded_by": new})
            count_stored(self.path, realm, len(records))
        except Exception as error:  # noqa: BLE001 - undo, then report the LanceDB failure with context
            for old in marks:
                table.update(where=f"id = {sql_text(old)}", values={"superseded_by": ""})
            if added:
                table.delete(f"id IN ({', '.join(map(sql_text, ids))})")
            raise MemoryStoreError(f"lancedb: storing {len(ids)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(ids)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        where = f"id IN ({', '.join(map(sql_text, wanted))})"
        holders = []
        for realm in self._book():
            table = self._table(realm)
            found = [r["id"] for r in self._rows(table, where)]
            if found:
                holders.append((table, found))
        present = {i for _, found in holders for i in found}
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for table, found in holders:
            table.delete(f"id IN ({', '.join(map(sql_text, found))})")
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """LanceDB's FTS and/or vector query with the live prefilter; both lanes fused by its RRFReranker."""
        from lancedb.rerankers import RRFReranker

        table = self._table(realm)
        live = "superseded_by = ''"
        results: dict[str, Any] = {}
        if "keyword" in lanes:
            results["keyword"] = table.search(query, query_type="fts", fts_columns="text").where(live, prefilter=True).with_row_id(True).limit(POOL).to_arrow()
        if "semantic" in lanes:
            (vector,) = self._embed([query])
            results["semantic"] = (
                table.search(vector, query_type="vector").distance_type("cosine").where(live, prefilter=True).with_row_id(True).limit(POOL).to_arrow()
            )
        found = {lane: set(r.column("id").to_pylist()) for lane, r in results.items()}
        if len(results) == 2:
            fused, score = RRFReranker().rerank_hybrid(query, results["semantic"], results["keyword"]), "_relevance_score"
        elif "keyword" in results:
            fused, score = results["keyword"], "_score"
        else:
            fused, score = results["semantic"], "_distance"
        hits = []
        for row in fused.to_pylist()[:k]:
            value = 1.0 - float(row[score]) if score == "_distance" else float(row[score])
            hit_lanes = tuple(lane for lane in self.LANES if row["id"] in found.get(lane, ()))
            hits.append(hit_from_record(row["id"], row["text"], row, value, hit_lanes))
        return hits

    def accounting(self) -> Accounting:
        return Accounting(embedding_calls=self._counter.calls, embedding_texts=self._counter.texts,
                          embedding_tokens=self._counter.tokens, storage_bytes=dir_size(self.path))

    def close(self) -> None:
        """Drop the open tables (LanceDB holds no server or lock)."""
        self._tables.clear()
