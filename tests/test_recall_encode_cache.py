"""MiniLM encodes each distinct text once per process (the recall sweep re-plants the same filler in every realm)."""

from __future__ import annotations

import numpy as np
import pytest

from tasks_lib.memory import embeddings

pytestmark = pytest.mark.skipif(embeddings.embedder_available("minilm") is not None,
                                reason=str(embeddings.embedder_available("minilm")))


@pytest.fixture()
def minilm_counting(monkeypatch: pytest.MonkeyPatch) -> tuple[embeddings.Embedder, list[list[str]]]:
    embedder = embeddings.get_embedder("minilm")
    model = embeddings._MODEL_CACHE["minilm"]
    sent: list[list[str]] = []
    encode = model.encode

    def counting(texts: list[str], **kwargs: object) -> object:
        sent.append(list(texts))
        return encode(texts, **kwargs)

    monkeypatch.setattr(model, "encode", counting)
    monkeypatch.setattr(embeddings, "_VECTORS", {})
    return embedder, sent


def test_a_cached_vector_is_the_vector_of_that_exact_text(minilm_counting: tuple[embeddings.Embedder, list[list[str]]]) -> None:
    """The cache must never hand one text another text's vector, nor drift from a fresh encode."""
    embedder, sent = minilm_counting
    first = embedder.embed(["My standup moved to 9:15.", "The dog is called Biscuit."])
    again = embedder.embed(["The dog is called Biscuit.", "Something new entirely.", "My standup moved to 9:15."])
    assert sent == [["My standup moved to 9:15.", "The dog is called Biscuit."], ["Something new entirely."]]
    np.testing.assert_allclose(again[0], first[1], atol=1e-6)
    np.testing.assert_allclose(again[2], first[0], atol=1e-6)
    fresh = embeddings._MODEL_CACHE["minilm"].encode(["Something new entirely."], normalize_embeddings=True)
    np.testing.assert_allclose(again[1], np.asarray(fresh[0], dtype=np.float32), atol=1e-5)
    assert embedder.embed([]).shape == (0, embedder.dim)


def test_the_cache_is_bounded_and_can_be_turned_off(minilm_counting: tuple[embeddings.Embedder, list[list[str]]],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    embedder, sent = minilm_counting
    monkeypatch.setattr(embeddings, "ENCODE_CACHE_TEXTS", 2)
    embedder.embed(["a one", "b two", "c three"])
    assert list(embeddings._VECTORS) == ["b two", "c three"]  # the oldest is dropped first
    monkeypatch.setattr(embeddings, "ENCODE_CACHE_TEXTS", 0)
    embedder.embed(["d four", "d four"])
    embedder.embed(["d four"])
    assert sent[-2:] == [["d four"], ["d four"]] and "d four" not in embeddings._VECTORS
