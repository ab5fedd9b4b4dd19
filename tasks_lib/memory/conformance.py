"""The conformance suite every memory adapter must pass, as plain functions.

Each check takes a factory that returns a fresh, empty adapter, runs one behaviour end to end
and raises ConformanceFailure saying what went wrong. Run them all with `run_conformance`, or
parametrize a test over CONFORMANCE_CHECKS (see tests/test_memory_conformance.py). The checks
set the switches (`env.SWITCHES`) themselves and restore the environment after.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from tasks_lib.contracts import Turn
from tasks_lib.memory.adapter import MemoryAdapter, MemoryItem
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV
from tasks_lib.memory.errors import (
    InvalidRealmError,
    MemoryInputError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)

AdapterFactory = Callable[[], MemoryAdapter]

REALM_A = "conformance:realm-a"
REALM_B = "conformance:realm-b"

FACTS: tuple[tuple[str, str], ...] = (
    ("The deploy script refuses to run unless DEPLOY_TOKEN is exported.", "what must be exported before the deploy script runs?"),
    ("Exit code 75 from the uploader means the disk quota is full.", "uploader exit code 75 meaning"),
    ("Integration tests need the --with-postgres flag on the runner.", "which flag do the integration tests need?"),
    ("Ravi Kumar owns the billing_service module and reviews its changes.", "who owns billing_service?"),
    ("Release branches are named after the year and month of the release.", "how are release branches named?"),
)
"""(fact, query) pairs: each query must find its fact."""

STALE = MemoryItem(text="The staging database listens on port 5433.", subject="staging database port")
FRESH = MemoryItem(text="The staging database now listens on port 6543.", kind="correction", subject="staging database port")
STALE_QUERY = "which port does the staging database listen on?"


class ConformanceFailure(AssertionError):
    """An adapter broke a rule of the memory adapter interface."""


class ConformanceNotApplicable(Exception):  # noqa: N818 - an outcome, not an error
    """A check does not apply to this system (e.g. it declares no abstention rule); reported, never a pass."""


UNRELATED_QUERIES: tuple[str, ...] = (
    "migratory habits of arctic terns",
    "best sourdough bread recipe",
)
"""Queries that share no word and no topic with FACTS: a system that abstains must serve none of them."""


def _require(condition: bool, message: str) -> None:
    if not condition:
        raise ConformanceFailure(message)


@contextmanager
def switched(**values: str | None) -> Iterator[None]:
    """Set (or with None, unset) environment variables for the block, then restore them."""
    saved = {name: os.environ.get(name) for name in values}
    try:
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _raises(error: type[Exception], action: Callable[[], object], what: str) -> None:
    try:
        action()
    except error:
        return
    except Exception as other:  # noqa: BLE001 - a wrong error type is the failure being reported
        raise ConformanceFailure(f"{what}: raised {type(other).__name__} ({other}), expected {error.__name__}") from other
    raise ConformanceFailure(f"{what}: raised nothing, expected {error.__name__}")


def _seed(adapter: MemoryAdapter, realm: str = REALM_A) -> list[str]:
    adapter.create_realm(realm)
    return list(adapter.remember(realm, [fact for fact, _ in FACTS]))


def _ids(adapter: MemoryAdapter, realm: str, query: str, k: int = 5) -> list[str]:
    return [hit.id for hit in adapter.recall(realm, query, k)]


def check_remember_returns_one_id_per_item(factory: AdapterFactory) -> None:
    """remember returns one distinct id per item, in order."""
    with factory() as adapter:
        ids = _seed(adapter)
        _require(len(ids) == len(FACTS) and len(set(ids)) == len(ids), f"expected {len(FACTS)} distinct ids, got {ids}")


def check_stored_facts_are_found(factory: AdapterFactory) -> None:
    """Every stored fact is in the top 3 for a query that shares its key words."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        ids = _seed(adapter)
        for (fact, query), fact_id in zip(FACTS, ids):
            _require(fact_id in _ids(adapter, REALM_A, query, 3), f"query {query!r} did not find {fact!r} in the top 3")


def check_realms_do_not_leak(factory: AdapterFactory) -> None:
    """A realm serves only its own memories; unknown and malformed realms are errors, never a fallback."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        adapter.create_realm(REALM_A)
        adapter.create_realm(REALM_B)
        a_ids = set(adapter.remember(REALM_A, [f for f, _ in FACTS[:3]]))
        b_ids = set(adapter.remember(REALM_B, [f for f, _ in FACTS[3:]]))
        for _, query in FACTS:
            _require(set(_ids(adapter, REALM_B, query)) <= b_ids, f"realm B served realm A memories for {query!r}")
            _require(set(_ids(adapter, REALM_A, query)) <= a_ids, f"realm A served realm B memories for {query!r}")
        _raises(UnknownRealmError, lambda: adapter.recall("conformance:never-made", FACTS[0][1]), "recall in an unknown realm")
        _raises(UnknownRealmError, lambda: adapter.remember("conformance:never-made", ["x"]), "remember in an unknown realm")
        _raises(InvalidRealmError, lambda: adapter.recall("no-colon-realm", FACTS[0][1]), "recall in a malformed realm")
        _raises(InvalidRealmError, lambda: adapter.remember("no-colon-realm", ["x"]), "remember in a malformed realm")
        _raises(InvalidRealmError, lambda: adapter.create_realm("no-colon-realm"), "creating a malformed realm")
        _raises(RealmExistsError, lambda: adapter.create_realm(REALM_A), "creating a realm twice")
        for _, query in FACTS[:3]:
            _require(bool(set(_ids(adapter, REALM_A, query)) & a_ids), f"after the refused calls, realm A lost {query!r}")


def check_hits_are_ranked_and_bounded(factory: AdapterFactory) -> None:
    """recall returns at most k distinct stored memories, each with its text, best (highest score) first."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        ids = set(_seed(adapter))
        texts = {fact for fact, _ in FACTS}
        for _, query in FACTS:
            for k in (1, 2, 5):
                hits = adapter.recall(REALM_A, query, k)
                _require(len(hits) <= k, f"recall(k={k}) of {query!r} returned {len(hits)} hits")
                _require(len({h.id for h in hits}) == len(hits), f"recall of {query!r} returned an id twice")
                _require(all(h.id in ids and h.text in texts for h in hits), f"recall of {query!r} returned a memory it was not given")
                scores = [h.score for h in hits]
                _require(scores == sorted(scores, reverse=True), f"recall of {query!r} is not best first: scores {scores}")


def check_forget_removes_exactly_given_ids(factory: AdapterFactory) -> None:
    """forget removes the given ids and nothing else; an unknown id removes nothing."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        ids = _seed(adapter)
        _require(adapter.forget([ids[1]]) == (ids[1],), "forget did not return the id it removed")
        for index, (fact, query) in enumerate(FACTS):
            found = ids[index] in _ids(adapter, REALM_A, query)
            _require(found == (index != 1), f"after forgetting {ids[1]}, {fact!r} found={found}")
        _raises(UnknownMemoryIdError, lambda: adapter.forget([ids[1]]), "forgetting an id twice")
        _raises(UnknownMemoryIdError, lambda: adapter.forget([ids[2], "not-a-stored-id"]), "forgetting an unknown id")
        _require(ids[2] in _ids(adapter, REALM_A, FACTS[2][1]), "a failed forget removed a known id")


def check_every_lane_serves(factory: AdapterFactory) -> None:
    """Each declared lane, alone, returns something on the standard corpus (so ablation checks are not vacuous)."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        _seed(adapter)
        adapter.remember(REALM_A, [STALE])
        adapter.remember(REALM_A, [FRESH])
        queries = [q for _, q in FACTS] + [STALE_QUERY]
        for lane in adapter.LANES:
            served = any(adapter.recall(REALM_A, q, 5, lanes=[lane]) for q in queries)
            _require(served, f"lane {lane!r} returned nothing for any standard query")


def check_ablated_lane_returns_nothing_from_it(factory: AdapterFactory) -> None:
    """With ABLATE_LANES_ENV naming a lane, no hit comes from it; `all` returns nothing."""
    with factory() as adapter:
        _seed(adapter)
        adapter.remember(REALM_A, [STALE])
        adapter.remember(REALM_A, [FRESH])
        queries = [q for _, q in FACTS] + [STALE_QUERY]
        for lane in adapter.LANES:
            with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: lane}):
                for query in queries:
                    lanes = {name for hit in adapter.recall(REALM_A, query, 5) for name in hit.lanes}
                    _require(lane not in lanes, f"lane {lane!r} was ablated but served a hit for {query!r}")
                _require(not adapter.recall(REALM_A, queries[0], 5, lanes=[lane]), f"ablated lane {lane!r} served when asked alone")
        with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: "all"}):
            for query in queries:
                _require(not adapter.recall(REALM_A, query, 5), f"{ABLATE_LANES_ENV}=all still served {query!r}")


def check_kill_switch_returns_nothing(factory: AdapterFactory) -> None:
    """With MEMORY_OFF_ENV=1, recall returns nothing and spends nothing."""
    with factory() as adapter:
        _seed(adapter)
        before = adapter.accounting()
        with switched(**{MEMORY_OFF_ENV: "1", ABLATE_LANES_ENV: None}):
            for _, query in FACTS:
                _require(not adapter.recall(REALM_A, query, 5), f"kill switch on, yet {query!r} returned memories")
        after = adapter.accounting()
        _require(
            (after.embedding_calls, after.llm_calls) == (before.embedding_calls, before.llm_calls),
            "kill switch on, yet recall called a model",
        )


def check_superseded_facts_are_not_served(factory: AdapterFactory) -> None:
    """A newer memory with the same subject, or naming the id in supersedes, hides the old one everywhere."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        adapter.create_realm(REALM_A)
        adapter.create_realm(REALM_B)
        (old,) = adapter.remember(REALM_A, [STALE])
        (new,) = adapter.remember(REALM_A, [FRESH])
        served = _ids(adapter, REALM_A, STALE_QUERY, 10) + _ids(adapter, REALM_A, STALE.text, 10)
        _require(old not in served, "a memory superseded by subject was served")
        _require(new in served, "the correction that superseded a memory was not served")
        (lint_old,) = adapter.remember(REALM_A, ["Lint the code with flake8 before committing."])
        (lint_new,) = adapter.remember(
            REALM_A, [MemoryItem(text="Lint the code with ruff before committing.", kind="correction", supersedes=(lint_old,))]
        )
        served = _ids(adapter, REALM_A, "lint with flake8 before committing", 10)
        _require(lint_old not in served and lint_new in served, "a memory superseded by id was served, or its successor was not")
        _raises(
            UnknownMemoryIdError,
            lambda: adapter.remember(REALM_B, [MemoryItem(text="x y z", supersedes=(lint_new,))]),
            "superseding an id of another realm",
        )


def check_bad_input_changes_nothing(factory: AdapterFactory) -> None:
    """A batch with one bad item is rejected whole, naming the field, and stored memories survive."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        ids = _seed(adapter)
        for bad in ("", b"\xff\xfe not utf-8", "x" * 100_000):
            try:
                adapter.remember(REALM_A, ["Canary memory about zeppelin hangars.", bad])
            except MemoryInputError as error:
                _require("items[1].text" in str(error), f"error does not name the field items[1].text: {error}")
            else:
                raise ConformanceFailure(f"bad item {bad[:20]!r} was accepted")
        served = [hit.text for hit in adapter.recall(REALM_A, "zeppelin hangars", 10)]
        _require(not any("zeppelin" in text for text in served), "a rejected batch left a memory behind")
        for (_, query), fact_id in zip(FACTS, ids):
            _require(fact_id in _ids(adapter, REALM_A, query), f"a rejected batch lost a stored memory ({query!r})")


def check_unrelated_query_serves_no_planted_id_above_abstention(factory: AdapterFactory) -> None:
    """An unrelated query serves none of the planted ids when the system declares an abstention rule
    (`ABSTENTION`); a system without one (plain nearest neighbours) is reported as such, not failed."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        ids = set(_seed(adapter))
        if adapter.ABSTENTION is None:
            raise ConformanceNotApplicable(f"{type(adapter).__name__} declares no abstention rule: it returns its nearest memories for any query")
        for query in UNRELATED_QUERIES:
            served = set(_ids(adapter, REALM_A, query, 5)) & ids
            _require(not served, f"unrelated query {query!r} served {len(served)} planted memories despite the rule: {adapter.ABSTENTION}")


SESSION = (
    Turn(role="user", text="The nightly export to the warehouse keeps failing; can you look?"),
    Turn(role="assistant", text="The export job times out. Ops said the warehouse closes its loading window at 04:30 UTC, so I moved the job to 03:10."),
    Turn(role="tool", text="$ export --dry-run\nok: 1200 rows"),
)


def check_ingest_keeps_only_what_it_returns(factory: AdapterFactory) -> None:
    """ingest goes through the adapter's own write path: the ids it returns are distinct stored ids of
    that realm (forgettable by exact id), no other realm gains anything, and an empty transcript is
    refused with nothing stored. It need not keep every turn: what it keeps is what is measured."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory() as adapter:
        adapter.create_realm(REALM_A)
        adapter.create_realm(REALM_B)
        _raises(MemoryInputError, lambda: adapter.ingest(REALM_A, (), session="empty"), "an empty transcript")
        ids = adapter.ingest(REALM_A, SESSION, session="export-fix")
        _require(len(set(ids)) == len(ids), f"ingest returned repeated ids {ids}")
        _require(not _ids(adapter, REALM_B, "warehouse loading window export job"), "ingest into one realm reached another")
        if ids:
            _require(set(adapter.forget(ids)) == set(ids), "the ids ingest returned could not be forgotten by exact id")
        _require(not _ids(adapter, REALM_A, "warehouse loading window export job"), "ingest stored memories it did not return")


CONFORMANCE_CHECKS: tuple[Callable[[AdapterFactory], None], ...] = (
    check_remember_returns_one_id_per_item,
    check_stored_facts_are_found,
    check_realms_do_not_leak,
    check_hits_are_ranked_and_bounded,
    check_forget_removes_exactly_given_ids,
    check_every_lane_serves,
    check_ablated_lane_returns_nothing_from_it,
    check_kill_switch_returns_nothing,
    check_superseded_facts_are_not_served,
    check_bad_input_changes_nothing,
    check_unrelated_query_serves_no_planted_id_above_abstention,
    check_ingest_keeps_only_what_it_returns,
)
"""Every check, in a stable order."""


NOT_APPLICABLE = "not applicable: "
"""Prefix of a `run_conformance` outcome for a check that does not apply to the system."""


def run_conformance(factory: AdapterFactory) -> dict[str, str | None]:
    """Run every check; map its name to None (passed), the failure message, or NOT_APPLICABLE + why."""
    results: dict[str, str | None] = {}
    for check in CONFORMANCE_CHECKS:
        try:
            check(factory)
            results[check.__name__] = None
        except ConformanceFailure as failure:
            results[check.__name__] = str(failure)
        except ConformanceNotApplicable as reason:
            results[check.__name__] = NOT_APPLICABLE + str(reason)
    return results
