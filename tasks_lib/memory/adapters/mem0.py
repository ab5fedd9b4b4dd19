"""mem0 (open-source `mem0ai`, `Memory`) behind the memory adapter interface, offline, `infer=False`.

One `mem0.Memory` per adapter folder, configured the way mem0's docs set up a local store: the
`qdrant` vector store embedded on disk (`<path>/qdrant`), the history database in
`<path>/history.db`, telemetry off (MEM0_TELEMETRY=False, set before mem0 is imported). Every
write is `Memory.add(..., infer=False)`: the text is stored as given and no LLM is called (the
LLM slot points at an unreachable loopback address, so a call would fail loudly, and the
accounting reports none). A realm is a mem0 `user_id`; a memory's session is its `run_id`, its
speaker the message `name` (mem0's actor); the rest of its record (`common.METADATA_FIELDS`,
and memtrial's id as `memtrial_id`) goes into mem0's metadata.

The embedder: mem0's `huggingface` provider would load all-MiniLM-L6-v2 with
sentence-transformers; the adapter puts memtrial's bundled copy of that model (`minilm`, labelled
"local embedder = the bundled MiniLM") in mem0's embedding slot instead, so the weights come from
the wheel and are loaded once per process; `hashed` is memtrial's labelled offline fallback.

One lane, `semantic`: `Memory.search(query, filters={"user_id": realm, "superseded_by": ""})`,
mem0's ranking and score, with mem0's own abstention rule: its default `threshold=0.1`. The base
`mem0ai` install has no spaCy and no fastembed, so mem0's entity boost and BM25 keyword scoring
are off (mem0 logs this); that is the system as installed by the `mem0` extra.
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
)
from tasks_lib.memory.embeddings import Embedder, get_embedder
from tasks_lib.memory.errors import MemoryInputError, MemoryStoreError, UnknownMemoryIdError
from tasks_lib.memory.realms import validate_realm

MEM0_PACKAGE = "mem0ai==2.2.1"
"""The distribution this adapter needs (the `mem0` extra)."""

THRESHOLD = 0.1
"""mem0's default search threshold (`Memory.search(threshold=0.1)`): its abstention rule."""

OFFLINE_LLM_URL = "http://127.0.0.1:9/v1"
"""Where mem0's LLM slot points: nothing listens there, and `infer=False` never calls it."""

COLLECTION = "memtrial"
"""The qdrant collection of one adapter folder (realms are user ids inside it)."""

SCAN = 10_000
"""Most records one `get_all` reads (a realm's supersession lookups)."""


def mem0_unavailable() -> str | None:
    """None when mem0ai can be imported here, else why not."""
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    try:
        import mem0  # noqa: F401
    except ImportError as error:
        return f"memory system 'mem0' needs {MEM0_PACKAGE} ({error}); install it with: pip install -e '.[mem0]'"
    return None


def _slot(counter: CountingEmbedder) -> Any:
    """memtrial's embedder as a mem0 EmbeddingBase (the methods mem0 calls: embed, embed_batch)."""
    from mem0.embeddings.base import EmbeddingBase

    class MemtrialEmbedding(EmbeddingBase):
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return [float(x) for x in counter([text])[0]]

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [[float(x) for x in row] for row in counter(texts)]

    return MemtrialEmbedding()


class Mem0MemoryAdapter(MemoryAdapter):
    """mem0 as shipped with `infer=False`: realms are user ids, its search and threshold (lane: semantic)."""

    LANES: ClassVar[tuple[str, ...]] = ("semantic",)
    ABSTENTION: ClassVar[str | None] = f"mem0 drops memories scoring below its default search threshold ({THRESHOLD})"

    def __init__(self, path: Path | str, embedder: Embedder | str = "minilm") -> None:
        """Open (or create) a mem0 store in folder `path`; raises AdapterUnavailableError, the embedder's errors, MemoryStoreError."""
        reason = mem0_unavailable()
        if reason:
            raise AdapterUnavailableError(reason)
        from mem0 import Memory

        self.path = Path(path)
        self.path.mkdir(parents=True, exist_ok=True)
        self.embedder = embedder if isinstance(embedder, Embedder) else get_embedder(embedder)
        self._counter = CountingEmbedder(self.embedder)
        config = {
            "vector_store": {"provider": "qdrant", "config": {"path": str(self.path / "qdrant"), "collection_name": COLLECTION,
                                                              "embedding_model_dims": self.embedder.dim, "on_disk": True}},
            "embedder": {"provider": "huggingface", "config": {"huggingface_base_url": OFFLINE_LLM_URL, "embedding_dims": self.embedder.dim}},
            "llm": {"provider": "openai", "config": {"api_key": "offline-unused", "openai_base_url": OFFLINE_LLM_URL}},
            "history_db_path": str(self.path / "history.db"),
        }
        try:
            self._memory = Memory.from_config(config)
        except Exception as error:  # noqa: BLE001 - mem0 raises many types; report them as one
            raise MemoryStoreError(f"mem0 path: cannot open a mem0 store at {self.path} ({type(error).__name__}: {error})") from error
        self._memory.embedding_model = _slot(self._counter)

    # ------------------------------------------------------------------ realms

    def _entry(self, realm: str) -> dict[str, Any]:
        return realm_entry(self.path, realm, self.embedder.name)

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        book_realm(self.path, realm, self.embedder.name)

    def check_realm(self, realm: str) -> None:
        self._entry(realm)

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(sorted(read_realms(self.path)))

    # ------------------------------------------------------------------ writes

    def _records(self, realm: str, **where: str) -> list[dict[str, Any]]:
        """mem0's records of `realm` whose metadata match `where`."""
        return list(self._memory.get_all(filters={"user_id": realm, **where}, top_k=SCAN)["results"])

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        entry = self._entry(realm)
        stored = int(entry["stored"])
        named = {}
        for old in sorted({old for item in checked for old in item.supersedes}):
            named.update({r["metadata"]["memtrial_id"]: r["metadata"]["superseded_by"] for r in self._records(realm, memtrial_id=old)})
        by_subject = {
            subject: [r["metadata"]["memtrial_id"] for r in self._records(realm, subject=subject, superseded_by="")]
            for subject in sorted({normalize_subject(i.subject) for i in checked if i.subject})
        }
        records, marks = plan_records(realm, checked, stored, named, by_subject)
        added: list[str] = []
        marked: list[tuple[str, dict[str, Any]]] = []
        try:
            for record in records:
                message: dict[str, str] = {"role": "user", "content": record["text"]}
                if record["speaker"]:
                    message["name"] = record["speaker"]
                result = self._memory.add([message], user_id=realm, run_id=record["session"] or None, infer=False,
                                          metadata={"memtrial_id": record["id"], **{k: record[k] for k in METADATA_FIELDS}})
                added += [r["id"] for r in result["results"]]
            for old, new in sorted(marks.items()):
                for r in self._records(realm, memtrial_id=old):
                    self._memory.update(r["id"], metadata={**r["metadata"], "superseded_by": new})
                    marked.append((r["id"], r["metadata"]))
            count_stored(self.path, realm, len(records))
        except Exception as error:  # noqa: BLE001 - undo, then report the mem0 failure with context
            for mem0_id, metadata in marked:
                self._memory.update(mem0_id, metadata=metadata)
            for mem0_id in added:
                self._memory.delete(mem0_id)
            raise MemoryStoreError(f"mem0: storing {len(records)} memories in realm {realm!r} failed ({type(error).__name__}: {error}); nothing was stored") from error
        return tuple(r["id"] for r in records)

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        found: dict[str, list[str]] = {}
        for realm in read_realms(self.path):
            for mem_id in wanted:
                found.setdefault(mem_id, []).extend(r["id"] for r in self._records(realm, memtrial_id=mem_id))
        missing = [i for i in wanted if not found.get(i)]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for mem0_ids in found.values():
            for mem0_id in mem0_ids:
                self._memory.delete(mem0_id)
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        """mem0's search of the realm's live memories, its score and default threshold, best first."""
        result = self._memory.search(query, filters={"user_id": realm, "superseded_by": ""}, top_k=min(POOL, max(k, 1)), threshold=THRESHOLD)
        return [hit_from_record(r["metadata"]["memtrial_id"], r["memory"], r["metadata"], r["score"], ("semantic",))
                for r in result["results"][:k]]

    def accounting(self) -> Accounting:
        return Accounting(embedding_calls=self._counter.calls, embedding_texts=self._counter.texts,
                          embedding_tokens=self._counter.tokens, storage_bytes=dir_size(self.path))

    def close(self) -> None:
        """Close mem0's qdrant client (its on-disk lock) and history database."""
        client = getattr(self._memory.vector_store, "client", None)
        if client is not None:
            client.close()
        closer = getattr(self._memory.db, "close", None)
        if callable(closer):
            closer()
