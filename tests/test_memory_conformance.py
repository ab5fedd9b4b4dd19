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
