"""The reference SQLite store: lanes, supersession, bad input, persistence and accounting."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tasks_lib.contracts import MemorySpec
from tasks_lib.memory.adapter import MAX_TEXT_BYTES, MemoryItem
from tasks_lib.memory.entities import extract_entities
from tasks_lib.memory.errors import (
    EmbedderMismatchError,
    MemoryInputError,
    MemoryStoreError,
    UnknownLaneError,
    UnknownMemoryIdError,
)
from tasks_lib.memory.planting import plant
from tasks_lib.memory.reference.store import SqliteMemoryStore

REALM = "test:store"


@pytest.fixture
def store(tmp_path: Path) -> SqliteMemoryStore:
    s = SqliteMemoryStore(tmp_path / "memory.sqlite")
    s.create_realm(REALM)
    yield s
    s.close()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Ravi works at Infosys in New York.", {"ravi", "infosys", "new york"}),
        ("Always run make_release with --dry-run first.", {"make_release", "--dry-run"}),
        ("See tasks_lib.memory and config.yaml.", {"tasks_lib.memory", "config.yaml"}),
        ('The error says "disk full" in ExitCodes and parseArgs.', {"disk full", "exitcodes", "parseargs"}),
        ("MAX_RETRIES is read by `retry loop`.", {"max_retries", "retry loop"}),
        ("Owned by billing_service.", {"billing_service"}),
        ("the quick brown fox.", set()),
    ],
    ids=["capitalised-names", "snake-and-flag", "dotted-names", "quoted-and-camel", "screaming-and-backtick", "snake-at-sentence-end", "none"],
)
def test_entity_extraction(text: str, expected: set[str]) -> None:
    assert extract_entities(text) == expected


def test_each_lane_finds_what_it_is_for(store: SqliteMemoryStore) -> None:
    ids = store.remember(
        REALM,
        [
            "Ravi Kumar owns billing_service.",
            "billing_service retries failed charges three times via ChargeRetrier.",
            "Use pnpm for every install.",
        ],
    )
    keyword = store.recall(REALM, "pnpm install", 3, lanes=["keyword"])
    assert [h.id for h in keyword][:1] == [ids[2]] and keyword[0].lanes == ("keyword",)
    graph = store.recall(REALM, "What does Ravi Kumar look after?", 5, lanes=["graph"])
    assert [h.id for h in graph] == [ids[0], ids[1]], "one hop from Ravi Kumar through billing_service"
    semantic = store.recall(REALM, "installing packages", 3, lanes=["semantic"])
    assert ids[2] in [h.id for h in semantic]


def test_corrections_lane_serves_the_replacement_when_the_query_matches_the_stale_fact(store: SqliteMemoryStore) -> None:
    (old,) = store.remember(REALM, [MemoryItem(text="Deploys go out from the ci-legacy runner.", subject="deploy runner")])
    (new,) = store.remember(REALM, [MemoryItem(text="Use the buildkite pool now.", kind="correction", subject="deploy runner")])
    hits = store.recall(REALM, "ci-legacy runner", 5, lanes=["corrections"])
    assert [h.id for h in hits] == [new]
    assert old not in [h.id for h in store.recall(REALM, "ci-legacy runner", 10)]
    assert store.live_ids(REALM) == (new,)


def test_subject_supersession_is_case_and_space_insensitive_and_chains(store: SqliteMemoryStore) -> None:
    a = store.remember(REALM, [MemoryItem(text="Port is 1.", subject="Staging  Port")])
    b = store.remember(REALM, [MemoryItem(text="Port is 2.", subject="staging port")])
    c = store.remember(REALM, [MemoryItem(text="Port is 3.", kind="correction", supersedes=b)])
    assert store.live_ids(REALM) == c
    assert [h.id for h in store.recall(REALM, "Port is 1", 5, lanes=["corrections"])] == list(c), "chain a -> b -> c"
    assert a[0] not in [h.id for h in store.recall(REALM, "port", 10)]


def test_forgetting_a_correction_does_not_resurrect_what_it_superseded(store: SqliteMemoryStore) -> None:
    (old,) = store.remember(REALM, [MemoryItem(text="Timeout is 30 seconds.", subject="timeout")])
    (new,) = store.remember(REALM, [MemoryItem(text="Timeout is 90 seconds.", kind="correction", subject="timeout")])
    store.forget([new])
    assert store.live_ids(REALM) == ()
    assert store.recall(REALM, "timeout seconds", 5) == ()


BAD_ITEMS = [
    ("", "items[0].text", "empty"),
    ("   \n", "items[0].text", "empty"),
    (b"\xc3\x28 broken", "items[0].text", "not valid UTF-8"),
    ("bad \udcff surrogate", "items[0].text", "not valid UTF-8"),
    ("nul \x00 inside", "items[0].text", "NUL"),
    ("é" * (MAX_TEXT_BYTES // 2 + 1), "items[0].text", "limit is 16384"),
    (MemoryItem(text="fix", kind="correction"), "items[0].subject", "must say what it corrects"),
    (42, "items[0].text", "must be text"),
]


@pytest.mark.parametrize(
    ("item", "field", "problem"),
    BAD_ITEMS,
    ids=["empty", "blank", "non-utf8-bytes", "lone-surrogate", "nul", "huge", "correction-without-target", "not-text"],
)
def test_bad_item_names_the_field_and_changes_nothing(store: SqliteMemoryStore, item: object, field: str, problem: str) -> None:
    (kept,) = store.remember(REALM, ["The canary memory mentions walruses."])
    before = store.path.read_bytes()
    with pytest.raises(MemoryInputError) as caught:
        store.remember(REALM, [item])  # type: ignore[list-item]
    assert field in str(caught.value) and problem in str(caught.value)
    assert store.path.read_bytes() == before
    assert [h.id for h in store.recall(REALM, "walruses", 1)] == [kept]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda s: s.recall(REALM, "", 5), "query is empty"),
        (lambda s: s.recall(REALM, b"\xff", 5), "query is not valid UTF-8"),
        (lambda s: s.recall(REALM, "x", 0), "k: must be an integer"),
        (lambda s: s.recall(REALM, "x", 5, lanes=["telepathy"]), "unknown lane(s) telepathy"),
        (lambda s: s.remember(REALM, "a single string"), "items: expected a list"),
        (lambda s: s.remember(REALM, []), "items: the list is empty"),
        (lambda s: s.forget([]), "ids: give a non-empty list"),
        (lambda s: s.remember(REALM, [MemoryItem(text="x", supersedes=("0000000000000000",))]), "items[0].supersedes"),
    ],
    ids=["empty-query", "non-utf8-query", "k-zero", "unknown-lane", "items-not-a-list", "no-items", "forget-nothing", "supersedes-unknown"],
)
def test_bad_arguments_are_clear_errors(store: SqliteMemoryStore, call, message: str) -> None:
    with pytest.raises((MemoryInputError, UnknownLaneError, UnknownMemoryIdError)) as caught:
        call(store)
    assert message in str(caught.value)


def test_store_persists_and_keeps_its_embedder(tmp_path: Path) -> None:
    path = tmp_path / "m.sqlite"
    with SqliteMemoryStore(path) as first:
        first.create_realm(REALM)
        ids = first.remember(REALM, ["Persisted memory about lighthouses."])
    with SqliteMemoryStore(path, create=False) as again:
        assert again.embedder.name == "hashed"
        assert [h.id for h in again.recall(REALM, "lighthouses", 1)] == list(ids)
    with pytest.raises(EmbedderMismatchError, match="built with 'hashed'"):
        SqliteMemoryStore(path, "minilm")


def test_opening_a_missing_or_foreign_file_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="no memory store at"):
        SqliteMemoryStore(tmp_path / "absent.sqlite", create=False)
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite at all" * 100)
    with pytest.raises(MemoryStoreError, match="not a memtrial memory store"):
        SqliteMemoryStore(junk)


def test_ids_are_deterministic_for_the_same_plan(tmp_path: Path) -> None:
    def build(name: str) -> tuple[str, ...]:
        with SqliteMemoryStore(tmp_path / name) as s:
            s.create_realm(REALM)
            return s.remember(REALM, ["one", "two", "one"])

    first = build("a.sqlite")
    assert first == build("b.sqlite") and len(set(first)) == 3


def test_accounting_counts_embedding_work_and_no_llm(store: SqliteMemoryStore) -> None:
    store.remember(REALM, ["alpha beta", "gamma delta epsilon"])
    store.recall(REALM, "alpha", 2, lanes=["keyword"])
    after_keyword = store.accounting()
    store.recall(REALM, "alpha", 2)
    after_all = store.accounting()
    assert (after_keyword.embedding_calls, after_keyword.embedding_texts, after_keyword.embedding_tokens) == (1, 2, 5)
    assert after_all.embedding_calls == 2 and after_all.llm_calls == 0 and after_all.llm_tokens == 0
    assert after_all.storage_bytes > 0


def test_planting_specs_turns_a_correction_into_supersession(store: SqliteMemoryStore) -> None:
    specs = [
        MemorySpec(text="The CLI default for --retries is 3.", lane="keyword", kind="superseded"),
        MemorySpec(text="Exit code 4 means a bad config.", lane="keyword", kind="convention"),
        MemorySpec(text="The CLI default for --retries is now 5.", lane="corrections", kind="correction"),
    ]
    ids = plant(store, REALM, specs)
    assert len(ids) == 3 and store.live_ids(REALM) == (ids[1], ids[2])
    served = [h.id for h in store.recall(REALM, "default for --retries", 5)]
    assert ids[2] in served and ids[0] not in served


def test_a_correction_supersedes_the_superseded_memory_with_its_subject(tmp_path: Path) -> None:
    """Subjects are explicit: the correction replaces exactly the old value it names, not a neighbour."""
    from tasks_lib.contracts import MemorySpec
    from tasks_lib.memory.planting import plant
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    specs = [
        MemorySpec(text="Billing reads the tenant from X-Tenant-Id.", lane="keyword", kind="superseded", subject="tenant-header"),
        MemorySpec(text="Billing logs the tenant as tenant_id in every line.", lane="keyword", kind="superseded", subject="tenant-log-field"),
        MemorySpec(text="Correction: billing now reads the tenant from X-Org-Scope only.", lane="corrections", kind="correction", subject="tenant-header"),
    ]
    with SqliteMemoryStore(tmp_path / "m.sqlite") as store:
        store.create_realm("trial:t1")
        ids = plant(store, "trial:t1", specs)
        served = {hit.id for hit in store.recall("trial:t1", "which header carries the tenant for billing", k=10)}
        assert ids[0] not in served and ids[2] in served
        assert ids[1] in set(store.live_ids("trial:t1"))


def test_read_only_store_recalls_and_refuses_every_write(tmp_path: Path) -> None:
    path = tmp_path / "memory.sqlite"
    with SqliteMemoryStore(path) as writer:
        writer.create_realm(REALM)
        (kept,) = writer.remember(REALM, ["Use pnpm for every install."])
    before = path.read_bytes()
    reader = SqliteMemoryStore(path, read_only=True)
    assert [h.id for h in reader.recall(REALM, "pnpm install", 3)] == [kept]
    for write in (
        lambda: reader.remember(REALM, ["Use npm instead."]),
        lambda: reader.forget([kept]),
        lambda: reader.create_realm("test:other"),
    ):
        with pytest.raises(MemoryStoreError, match="opened read-only"):
            write()
    reader.close()
    assert path.read_bytes() == before and sorted(p.name for p in tmp_path.iterdir()) == ["memory.sqlite"]


def test_read_only_open_of_a_missing_or_foreign_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(MemoryStoreError, match="no memory store at"):
        SqliteMemoryStore(tmp_path / "absent.sqlite", read_only=True)
    assert not (tmp_path / "absent.sqlite").exists()
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t(x)").connection.close()
    with pytest.raises(MemoryStoreError, match="is not a memtrial memory store"):
        SqliteMemoryStore(foreign, read_only=True)


def test_opening_an_existing_store_never_changes_a_foreign_sqlite_file(tmp_path: Path) -> None:
    """create=False (as `memtrial memory recall --store` and the server open) must not add tables to another program's database."""
    foreign = tmp_path / "foreign.sqlite"
    sqlite3.connect(foreign).execute("CREATE TABLE t(x)").connection.close()
    before = foreign.read_bytes()
    with pytest.raises(MemoryStoreError, match="is not a memtrial memory store"):
        SqliteMemoryStore(foreign, create=False)
    assert foreign.read_bytes() == before
    tables = {row[0] for row in sqlite3.connect(foreign).execute("SELECT name FROM sqlite_master")}
    assert tables == {"t"}
