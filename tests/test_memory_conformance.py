"""The memory adapter conformance suite, run against the reference store (fallback and real embedder)."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from tasks_lib.memory.conformance import CONFORMANCE_CHECKS, AdapterFactory
from tasks_lib.memory.embeddings import embedder_available, get_embedder
from tasks_lib.memory.reference.store import SqliteMemoryStore


def _factory(tmp_path: Path, embedder: object = "hashed") -> AdapterFactory:
    counter = itertools.count()
    return lambda: SqliteMemoryStore(tmp_path / f"store-{next(counter)}.sqlite", embedder)  # type: ignore[arg-type]


@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=[c.__name__.removeprefix("check_") for c in CONFORMANCE_CHECKS])
def test_reference_store_with_hashed_embedder(check: Callable[[AdapterFactory], None], tmp_path: Path) -> None:
    check(_factory(tmp_path))


MINILM_MISSING = embedder_available("minilm")


@pytest.fixture(scope="module")
def minilm() -> object:
    if MINILM_MISSING:
        print(f"skipping real-model conformance: {MINILM_MISSING}")
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI installs the embeddings extra, so the real model must run: {MINILM_MISSING}")
        pytest.skip(MINILM_MISSING)
    return get_embedder("minilm")


@pytest.mark.slow
@pytest.mark.parametrize("check", CONFORMANCE_CHECKS, ids=[c.__name__.removeprefix("check_") for c in CONFORMANCE_CHECKS])
def test_reference_store_with_minilm(check: Callable[[AdapterFactory], None], minilm: object, tmp_path: Path) -> None:
    check(_factory(tmp_path, minilm))


@pytest.mark.slow
def test_minilm_semantic_lane_bridges_a_paraphrase_that_keywords_miss(minilm: object, tmp_path: Path) -> None:
    """The real model finds 'allergic to peanuts' for 'food allergies', where BM25 has no shared word."""
    with SqliteMemoryStore(tmp_path / "m.sqlite", minilm) as store:  # type: ignore[arg-type]
        store.create_realm("test:minilm")
        ids = store.remember("test:minilm", ["I am allergic to peanuts, never suggest recipes with them.", "The office closes at six."])
        assert store.recall("test:minilm", "do I have any food allergies?", 2, lanes=["keyword"]) == ()
        hits = store.recall("test:minilm", "do I have any food allergies?", 2, lanes=["semantic"])
        assert [h.id for h in hits][:1] == [ids[0]]


@pytest.mark.slow
def test_single_query_encode_does_not_wait_on_a_two_thread_pool_under_load(minilm: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """A recall's one-query encode runs on one torch thread: a two-thread pool stalled it up to 143 ms
    when other jobs held the cores (issue 17). A batch still gets torch's default pool."""
    import torch

    from tasks_lib.memory.embeddings import SMALL_ENCODE_TEXTS, MiniLMEmbedder

    model = minilm._model  # type: ignore[attr-defined]
    real = model.encode
    seen: list[tuple[int, int]] = []

    def spy(texts: list[str], **kwargs: object) -> object:
        seen.append((len(texts), torch.get_num_threads()))
        return real(texts, **kwargs)

    monkeypatch.setattr(model, "encode", spy)
    batch = SMALL_ENCODE_TEXTS + 1
    minilm.embed(["where did I park the car?"])  # type: ignore[attr-defined]
    minilm.embed([f"turn {i} of a session" for i in range(batch)])  # type: ignore[attr-defined]
    minilm.embed(["and the bike?"])  # type: ignore[attr-defined]
    default = MiniLMEmbedder.encode_threads(batch)
    assert default >= 1 and seen == [(1, 1), (batch, default), (1, 1)]
