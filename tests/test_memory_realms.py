"""Realm names, the kill switch and lane ablation switches, and the embedder registry."""

from __future__ import annotations

import re

import numpy as np
import pytest

from tasks_lib.memory.embeddings import EMBEDDERS, HashedEmbedder, embedder_available, get_embedder
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV
from tasks_lib.memory.errors import (
    InvalidRealmError,
    SwitchError,
    UnknownEmbedderError,
    UnknownLaneError,
)
from tasks_lib.memory.realms import new_run_secret, trial_realm, validate_realm
from tasks_lib.memory.switches import active_lanes

LANES = ("keyword", "semantic", "graph", "corrections")


@pytest.mark.parametrize(
    "name",
    ["trial:run-1.task_a.on.t0", "a:b", "team-x:proj.v2"],
    ids=["trial", "shortest", "namespace-with-dash"],
)
def test_valid_realms(name: str) -> None:
    assert validate_realm(name) == name


@pytest.mark.parametrize(
    "name",
    ["norealm", "Trial:x", ":x", "x:", "a:b:c", "a b:c", "-a:b", "a:_b", "a:" + "b" * 200, 7],
    ids=["no-colon", "uppercase", "empty-namespace", "empty-name", "two-colons", "space", "leading-dash", "leading-underscore", "too-long", "not-a-string"],
)
def test_invalid_realms_name_the_field(name: object) -> None:
    with pytest.raises(InvalidRealmError, match="^realm: "):
        validate_realm(name)


SECRET = bytes(range(32))
"""A fixed run secret, so the names below are repeatable."""


def test_trial_realms_are_canonical_and_unique_per_trial() -> None:
    names = {trial_realm(SECRET, "run-7", "fix_exit.code", c, t) for c in ("on", "ablate:graph", "off") for t in range(3)}
    assert len(names) == 9 and all(validate_realm(n) for n in names)
    assert trial_realm(SECRET, "Run 7", "Task", "ablate:all", 2) == trial_realm(SECRET, "Run 7", "Task", "ablate:all", 2), "deterministic"
    assert trial_realm(new_run_secret(), "Run 7", "Task", "ablate:all", 2) != trial_realm(SECRET, "Run 7", "Task", "ablate:all", 2)


def test_a_trial_realm_names_no_condition_task_or_run() -> None:
    """Regression: the realm was `trial:<run>.<task>.<condition>.t0`, so an agent could read its arm
    (and the task corpus) off its memory realm and play the condition."""
    realms = [trial_realm(SECRET, "paired-20261203-101010-abc123", "logship-partial-exit", c, 0) for c in ("off", "on", "ablate:all", "ablate:graph")]
    assert len(set(realms)) == 4
    assert all(re.fullmatch(r"project:[0-9a-f]{16}", realm) for realm in realms), realms


@pytest.mark.parametrize(
    ("env", "requested", "expected"),
    [
        ({}, None, LANES),
        ({MEMORY_OFF_ENV: "0"}, None, LANES),
        ({MEMORY_OFF_ENV: "1"}, None, ()),
        ({ABLATE_LANES_ENV: "keyword, graph"}, None, ("semantic", "corrections")),
        ({ABLATE_LANES_ENV: "all"}, None, ()),
        ({ABLATE_LANES_ENV: "graph"}, ["graph", "keyword"], ("keyword",)),
    ],
    ids=["unset", "off-zero", "kill-switch", "ablate-two", "ablate-all", "ablate-requested"],
)
def test_active_lanes(env: dict[str, str], requested: list[str] | None, expected: tuple[str, ...]) -> None:
    assert active_lanes(LANES, requested, env) == expected


@pytest.mark.parametrize(
    ("env", "error", "message"),
    [
        ({MEMORY_OFF_ENV: "true"}, SwitchError, f"{MEMORY_OFF_ENV}='true'"),
        ({ABLATE_LANES_ENV: "keyword,vector"}, UnknownLaneError, "unknown lane(s) vector"),
        ({ABLATE_LANES_ENV: "all,graph"}, UnknownLaneError, "unknown lane(s) all"),
    ],
    ids=["kill-switch-typo", "lane-typo", "all-mixed"],
)
def test_malformed_switches_are_errors_not_ignored(env: dict[str, str], error: type[Exception], message: str) -> None:
    with pytest.raises(error) as caught:
        active_lanes(LANES, None, env)
    assert message in str(caught.value)


def test_hashed_embedder_is_deterministic_normalized_and_semantic_enough() -> None:
    embedder = get_embedder("hashed")
    texts = ["The release branch is called trunk.", "What is the release branch named?", "Otters hold hands while sleeping."]
    vectors = embedder.embed(texts)
    assert vectors.shape == (3, HashedEmbedder.dim) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    assert np.array_equal(vectors, HashedEmbedder().embed(texts))
    sims = vectors @ vectors.T
    assert sims[0, 1] > embedder.min_similarity > sims[0, 2]
    assert embedder.count_tokens(texts) == 17


def test_unknown_embedder_lists_the_known_ones() -> None:
    with pytest.raises(UnknownEmbedderError, match="known embedders are hashed, minilm"):
        get_embedder("word2vec")
    assert set(EMBEDDERS) == {"hashed", "minilm"}
    assert embedder_available("word2vec") == "unknown embedder 'word2vec'"
