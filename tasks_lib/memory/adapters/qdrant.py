"""Qdrant in its embedded local mode (`QdrantClient(path=...)`, on disk, no server) behind the memory adapter interface.

One Qdrant collection per realm (`realm_<sha256(realm)[:24]>`), `VectorParams(size=dim,
distance=COSINE)`, in the folder `<store>/qdrant` that the local client owns (it locks it: one client
per folder). Each point's id is its memtrial id read as a 64-bit unsigned integer (memtrial ids are
16 hex digits); its payload holds `id`, `text` and `common.METADATA_FIELDS`. The realm book
(`memtrial-realms.json`, realm -> collection, embedder, stored count) sits beside the Qdrant folder.

One lane, `semantic`: `client.query_points(collection, query=vector, limit=k, query_filter=
superseded_by == "")`, Qdrant's order and its cosine score; no `score_threshold` (Qdrant's default is
none, so it never abstains). Local mode scores every stored vector exactly (numpy), as its docs say;
the server's HNSW index is not used. The vectors are memtrial's embedder (`minilm`, or the labelled
offline fallback `hashed`).

`remember` checks every item and every `supersedes` id before it writes; if a Qdrant call fails
midway, the points it added are deleted and superseded marks are put back.
"""

from __future__ import annotations

import re
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

QDRANT_PACKAGE = "qdrant-client==1.20.0"
"""The distribution this adapter needs (the `qdrant` extra)."""

COLLECTION_PREFIX = "realm_"
"""Prefix of the collections this adapter makes."""

QDRANT_FOLDER = "qdrant"
"""The folder of the local Qdrant client inside the adapter's folder."""


def qdrant_unavailable() -> str | None:
    """None when qdrant-client can be imported here, else why not."""
    try:
        import qdrant_client  # noqa: F401
    except ImportError as error:
        return f"memory system 'qdrant' needs {QDRANT_PACKAGE} ({error}); install it with: pip install -e '.[qdrant]'"
    return None


def point_id(mem_id: str) -> int:
    """The Qdrant point id of memtrial id `mem_id` (16 hex digits as an unsigned 64-bit integer)."""
    return int(mem_id, 16)


def point_ids(ids: Sequence[str]) -> list[int]:
    """The point ids of those of `ids` that are memtrial ids (anything else cannot be stored, so is not looked up)."""
    return [point_id(i) for i in ids if isinstance(i, str) and re.fullmatch("[0-9a-f]{16}", i)]


def payload(point: Any) -> dict[str, Any]:
    """A retrieved point's payload (every point this adapter stores has one)."""
    return dict(point.payload or {})


class QdrantMemoryAdapter(MemoryAdapter):
    """Qdrant local mode as shipped: one collection per realm, `query_points` with a payload filter (lane: semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("semantic",)
    ABSTENTION: ClassVar[str | None] = None  # query_points returns its `limit` nearest, however far, without score_threshold

    def __init__(self, path: Path | str, embedder: Embedder | str = "minilm") -> None:
        """Open (or create) a local Qdrant store in folder `path`; raises AdapterUnavailableError, the embedder's errors,
        MemoryStoreError (also when another client holds the folder)."""
        reason = qdrant_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        from qdrant_client import QdrantClient

        self.path = Path(path)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counter = CountingEmbedder(self.embedder)
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._client = QdrantClient(path=str(self.path / QDRANT_FOLDER))
        except Exception as error:  # noqa: BLE001 - qdrant-client raises many types; report them as one
            raise MemoryStoreError(f"qdrant path: cannot open a local Qdrant store at {self.path} ({type(error).__name__}: {error})") from error

    def _collection(self, realm: str) -> str:
        """The realm's collection name; raises UnknownRealmError / EmbedderMismatchError."""
        return str(realm_entry(self.path, realm, self.embedder.name)["collection"])

    def _embed(self, texts: list[str]) -> list[list[float]]:
        return [list(map(float, v)) for v in self._counter(texts)]

    @staticmethod
    def _match(**values: str) -> Any:
        """A Qdrant filter: every payload key equals its value."""
        from qdrant_client import models

        return models.Filter(must=[models.FieldCondition(key=k, match=models.MatchValue(value=v)) for k, v in values.items()])

    # ------------------------------------------------------------------ realms

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        from qdrant_client import models

        if realm in read_realms(self.path):
            raise RealmExistsError(f"realm: {realm!r} already exists in {self.path}; realms are unique per trial, name a new one")
        name = COLLECTION_PREFIX + realm_key(realm)
        self._client.create_collection(name, vectors_config=models.VectorParams(size=self.embedder.dim, distance=models.Distance.COSINE))
        book_realm(self.path, realm, self.embedder.name, collection=name)

    def check_realm(self, realm: str) -> None:
        self._collection(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(sorted(read_realms(self.path)))

    # ------------------------------------------------------------------ writes

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        from qdrant_client import models

        checked = coerce_items(items)
        collection = self._collection(realm)
        stored = int(realm_entry(self.path, realm, self.embedder.name)["stored"])
        wanted = point_ids(sorted({old for item in checked for old in item.supersedes}))
        named = {str(payload(p)["id"]): str(payload(p)["superseded_by"])
                 for p in self._client.retrieve(collection, wanted, with_payload=["id", "superseded_by"])} if wanted else {}
        by_subject = {}
        for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject}):
            points, _ = self._client.scroll(collection, scroll_filter=self._match(subject=subject, superseded_by=""), limit=10_000, with_payload=["id"])
            by_subject[subject] = [str(payload(p)["id"]) for p in points]
        records, marks = plan_records(realm, checked, stored, named, by_subject)
        vectors = self._embed([r["text"] for r in records])
        ids = [r["id"] for r in records]
        added = False
        marked: list[str] = []
        try:
            self._client.upsert(collection, [models.PointStruct(id=point_id(r["id"]), vector=v, payload={"id": r["id"], "text": r["text"],
                                                                                                     **{f: r[f] for f in METADATA_FIELDS}})
                                             for r, v in zip(records, vectors)])
            added = True
            for old, new in sorted(marks.items()):
                self._client.set_payload(collection, {"superseded_by": new}, points=[point_id(old)])
                marked.append(old)
            count_stored(self.path, realm, len(records))
        except Exception as error:  # noqa: BLE001 - undo, then report the Qdrant failure with context
            for old in marked:
                self._client.set_payload(collection, {"superseded_by": ""}, points=[point_id(old)])
            if added:
                self._client.delete(collection, models.PointIdsList(points=[point_id(i) for i in ids]))
            raise MemoryStoreError(f"qdrant: storing {len(ids)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(ids)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        from qdrant_client import models

        wanted = list(dict.fromkeys(ids))
        points = point_ids(wanted)
        holders = []
        for realm in sorted(read_realms(self.path)):
            collection = self._collection(realm)
            found = [str(payload(p)["id"]) for p in self._client.retrieve(collection, points, with_payload=["id"])] if points else []
            if found:
                holders.append((collection, found))
        present = {i for _, found in holders for i in found}
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for collection, found in holders:
            self._client.delete(collection, models.PointIdsList(points=[point_id(i) for i in found]))
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """Qdrant's `query_points` over the live points, its order and cosine score, no threshold."""
        collection = self._collection(realm)
        (vector,) = self._embed([query])
        result = self._client.query_points(collection, query=vector, limit=k, query_filter=self._match(superseded_by=""), with_payload=True)
        return [hit_from_record(str(meta["id"]), str(meta["text"]), meta, float(p.score), ("semantic",))
                for p in result.points for meta in [payload(p)]]

    def accounting(self) -> Accounting:
        return Accounting(embedding_calls=self._counter.calls, embedding_texts=self._counter.texts,
                          embedding_tokens=self._counter.tokens, storage_bytes=dir_size(self.path))

    def close(self) -> None:
        """Close the local client, releasing its lock on the folder."""
        self._client.close()
