"""Third-party memory systems behind the adapter interface: the conformance suite for every registered
system, plus what each adapter promises on top (offline embedding, realm isolation, no orphan servers).

A system whose optional package is missing is skipped with the reason printed; under CI (CI=true)
it fails instead, since CI installs every extra (`pip install -e '.[chroma]'`,
`bash scripts/install_mcp_memory.sh`).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tasks_lib.memory.adapter import MemoryItem
from tasks_lib.memory.adapters.common import AdapterUnavailableError, memory_id
from tasks_lib.memory.conformance import (
    CONFORMANCE_CHECKS,
    FACTS,
    UNRELATED_QUERIES,
    AdapterFactory,
    ConformanceFailure,
    ConformanceNotApplicable,
    check_unrelated_query_serves_no_planted_id_above_abstention,
    switched,
)
from tasks_lib.memory.embeddings import HashedEmbedder
from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV
from tasks_lib.memory.errors import (
    EmbedderMismatchError,
    MemoryStoreError,
    RealmExistsError,
    UnknownRealmError,
)
from tasks_lib.memory.registry import (
    MEMORY_SYSTEMS,
    UnknownMemorySystemError,
    get_memory_system,
    memory_system_unavailable,
    open_memory_system,
)

pytestmark = pytest.mark.integration  # every third-party memory system, each loaded for real

SYSTEMS = tuple(MEMORY_SYSTEMS)
REALM = "adapters:realm-a"
OTHER = "adapters:realm-b"


def require(name: str) -> None:
    """Skip (printing why) when system `name` cannot run here; under CI, fail instead."""
    reason = memory_system_unavailable(name)
    if reason is None:
        return
    print(f"memory system {name!r} unavailable: {reason}")
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(f"CI must install every memory system: {reason}")
    pytest.skip(reason)


def factory(name: str, tmp_path: Path) -> AdapterFactory:
    require(name)
    counter = itertools.count()
    return lambda: open_memory_system(name, tmp_path / f"{name}-{next(counter)}")


def alive(pid: int) -> bool:
    """True while process `pid` exists and is not a zombie."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


# ---------------------------------------------------------------------- the shared suite

CASES = [(name, check) for name in SYSTEMS for check in CONFORMANCE_CHECKS]

AGENT_SEARCH = "search_nodes matches the whole query as one substring, so a question finds nothing"
KNOWN_FAILURES: dict[tuple[str, str], str] = {
    ("mcp-memory", check): AGENT_SEARCH
    for check in ("stored_facts_are_found", "realms_do_not_leak", "forget_removes_exactly_given_ids", "every_lane_serves",
                  "superseded_facts_are_not_served", "bad_input_changes_nothing")
}
"""Checks a system as shipped fails, and why: each must keep failing (strict), so a change shows here."""


@pytest.mark.parametrize(("name", "check"), CASES, ids=[f"{n}-{c.__name__.removeprefix('check_')}" for n, c in CASES])
def test_conformance(name: str, check: Callable[[AdapterFactory], None], tmp_path: Path) -> None:
    """Every check passes; the abstention check instead reports a system that declares no abstention rule;
    a known failure of a system as shipped (KNOWN_FAILURES) must fail."""
    known = KNOWN_FAILURES.get((name, check.__name__.removeprefix("check_")))
    if known:
        with pytest.raises(ConformanceFailure):
            check(factory(name, tmp_path))
        print(f"{name} fails {check.__name__} as shipped: {known}")
        return
    try:
        check(factory(name, tmp_path))
    except ConformanceNotApplicable as reason:
        assert check is check_unrelated_query_serves_no_planted_id_above_abstention, f"only the abstention check may not apply: {reason}"
        with get_memory_system(name).opener(tmp_path / "probe", "hashed") as probe:
            assert probe.ABSTENTION is None
        print(f"{name}: {reason}")


def test_a_system_claiming_an_abstention_rule_it_lacks_fails_conformance(tmp_path: Path) -> None:
    """Declaring an abstention rule is checked, not believed: plain nearest neighbours that claim one fail."""
    require("lancedb")
    from tasks_lib.memory.adapters.lancedb import LanceDbMemoryAdapter

    class Boastful(LanceDbMemoryAdapter):
        ABSTENTION = "claims to drop unrelated memories"

    counter = itertools.count()
    with pytest.raises(ConformanceFailure, match="unrelated query"):
        check_unrelated_query_serves_no_planted_id_above_abstention(lambda: Boastful(tmp_path / f"b-{next(counter)}", "hashed"))
    assert UNRELATED_QUERIES


@pytest.mark.parametrize("name", SYSTEMS)
def test_forgetting_a_correction_does_not_revive_what_it_replaced(name: str, tmp_path: Path) -> None:
    """Forgetting the memory that superseded another must not make the stale one servable again."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory(name, tmp_path)() as adapter:
        adapter.create_realm(REALM)
        (old,) = adapter.remember(REALM, [MemoryItem(text="The staging database listens on port 5433.", subject="staging port")])
        (new,) = adapter.remember(
            REALM, [MemoryItem(text="The staging database now listens on port 6543.", kind="correction", subject="staging port")]
        )
        adapter.forget([new])
        served = [h.id for h in adapter.recall(REALM, "staging database port", 10)]
        assert old not in served and new not in served


@pytest.mark.parametrize("name", SYSTEMS)
def test_memories_and_realms_survive_reopening(name: str, tmp_path: Path) -> None:
    """A store closed and opened again on the same folder serves the same memories and knows its realms."""
    require(name)
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}):
        with open_memory_system(name, tmp_path / "store") as adapter:
            adapter.create_realm(REALM)
            ids = adapter.remember(REALM, [fact for fact, _ in FACTS])
        with open_memory_system(name, tmp_path / "store") as adapter:
            assert ids[3] in [h.id for h in adapter.recall(REALM, FACTS[3][0], 3)]  # by its own text: every system finds that
            with pytest.raises(RealmExistsError):
                adapter.create_realm(REALM)
            with pytest.raises(UnknownRealmError):
                adapter.recall(OTHER, "anything at all")
            (later,) = adapter.remember(REALM, ["A later memory about zeppelin hangars."])
            assert later not in ids


@pytest.mark.parametrize("name", [n for n in SYSTEMS if "keyword" in MEMORY_SYSTEMS[n].lanes and n != "mcp-memory"])  # AGENT_SEARCH
def test_keyword_lane_alone_finds_every_fact(name: str, tmp_path: Path) -> None:
    """The keyword lane is a real search of the system, not a pass-through: alone it finds each fact in the top 3."""
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), factory(name, tmp_path)() as adapter:
        adapter.create_realm(REALM)
        ids = adapter.remember(REALM, [fact for fact, _ in FACTS] + ["Unrelated: the office closes at six."])
        for (fact, query), fact_id in zip(FACTS, ids):
            hits = adapter.recall(REALM, query, 3, lanes=["keyword"])
            assert fact_id in [h.id for h in hits], f"keyword lane missed {fact!r} for {query!r}"
            assert all(h.lanes == ("keyword",) for h in hits)


# ---------------------------------------------------------------------- Chroma


def test_chroma_embeds_with_memtrial_embedder_offline(tmp_path: Path) -> None:
    """Chroma's default ONNX embedder downloads a model; the collections must use memtrial's embedder, telemetry off."""
    require("chroma")
    from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter

    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), ChromaMemoryAdapter(tmp_path / "c") as adapter:
        adapter.create_realm(REALM)
        adapter.remember(REALM, [fact for fact, _ in FACTS])
        stored = adapter.accounting()
        assert stored.embedding_calls == 1 and stored.embedding_texts == len(FACTS)
        assert adapter.recall(REALM, FACTS[0][1], 3, lanes=["semantic"])
        assert adapter.accounting().embedding_calls == 2
        collection = adapter._collection(REALM)
        assert collection.configuration["embedding_function"].name() == "memtrial"
        assert collection.configuration["hnsw"]["space"] == "cosine"
        assert adapter._client.get_settings().anonymized_telemetry is False


def test_chroma_refuses_a_store_built_with_another_embedder(tmp_path: Path) -> None:
    """Vectors of two embedders are not comparable: reopening a realm with another embedder is an error."""
    require("chroma")
    from tasks_lib.memory.adapters.chroma import ChromaMemoryAdapter

    class OtherEmbedder(HashedEmbedder):
        name = "hashed-other"

    with ChromaMemoryAdapter(tmp_path / "c") as adapter:
        adapter.create_realm(REALM)
    with ChromaMemoryAdapter(tmp_path / "c", OtherEmbedder()) as adapter, pytest.raises(EmbedderMismatchError, match="hashed"):
        adapter.recall(REALM, "anything")


# ---------------------------------------------------------------------- sqlite-vec and Qdrant local mode

EXACT_COSINE = ("chroma", "sqlite-vec", "qdrant")
"""Systems whose one lane is plain cosine nearest neighbours: with one embedder they must agree."""


def test_exact_cosine_systems_score_every_memory_as_chroma_does(tmp_path: Path) -> None:
    """sqlite-vec and Qdrant are cosine nearest neighbours, as Chroma is: with the same embedder each hit
    has Chroma's score (1 - cosine distance) and the same ranking up to exact ties. A wrong metric (vec0's
    default L2, Qdrant's EUCLID) or a wrong distance-to-score turn changes the scores, and this fails."""
    for name in EXACT_COSINE:
        require(name)
    notes = [fact for fact, _ in FACTS] + ["The office closes at six.", "Lunch is served in the atrium on Fridays."]
    scored: dict[str, list[list[tuple[str, float]]]] = {}
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}):
        for name in EXACT_COSINE:
            with open_memory_system(name, tmp_path / name) as adapter:
                adapter.create_realm(REALM)
                adapter.remember(REALM, notes)
                scored[name] = [[(h.id, h.score) for h in adapter.recall(REALM, query, len(notes))] for _, query in FACTS]
    for name in ("sqlite-vec", "qdrant"):
        for query_index, (want, got) in enumerate(zip(scored["chroma"], scored[name])):
            assert {i for i, _ in got} == {i for i, _ in want}, f"{name} served other memories for query {query_index}"
            chroma_score = dict(want)
            assert all(abs(score - chroma_score[i]) < 1e-5 for i, score in got), f"{name} scores differ from chroma's: {got} vs {want}"
            assert [round(s, 5) for _, s in got] == [round(s, 5) for _, s in want], f"{name} ranks differently from chroma"


def test_sqlite_vec_stores_in_a_cosine_vec0_table_with_memtrial_embedder(tmp_path: Path) -> None:
    """The store is sqlite-vec's own vec0 virtual table, cosine metric, and every vector comes from memtrial's embedder."""
    require("sqlite-vec")
    from tasks_lib.memory.adapters.sqlite_vec import SqliteVecMemoryAdapter

    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), SqliteVecMemoryAdapter(tmp_path / "s", "hashed") as adapter:
        adapter.create_realm(REALM)
        adapter.remember(REALM, [fact for fact, _ in FACTS])
        assert adapter.recall(REALM, FACTS[0][1], 3)
        spent = adapter.accounting()
        assert (spent.embedding_calls, spent.embedding_texts) == (2, len(FACTS) + 1) and spent.storage_bytes > 0
        (sql,) = [r[0] for r in adapter._conn.execute("SELECT sql FROM sqlite_master WHERE name LIKE 'realm_%' AND sql LIKE '%VIRTUAL%'")]
        assert "USING vec0(" in sql and "distance_metric=cosine" in sql and f"float[{adapter.embedder.dim}]" in sql


@pytest.mark.parametrize(("name", "package"), [("sqlite-vec", "sqlite_vec"), ("qdrant", "qdrant_client")])
def test_missing_package_names_the_extra_to_install(name: str, package: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without its package the system is an error naming its extra, never a silent fallback to another store."""
    monkeypatch.setitem(sys.modules, package, None)  # what `import` sees when the package is not installed
    reason = memory_system_unavailable(name)
    assert reason is not None and f"pip install -e '.[{name}]'" in reason
    with pytest.raises(AdapterUnavailableError, match=re.escape(f".[{name}]")):
        open_memory_system(name, tmp_path / name)
    assert not (tmp_path / name).exists()


@pytest.mark.parametrize("name", ["sqlite-vec", "qdrant"])
def test_sqlite_vec_and_qdrant_refuse_a_realm_built_with_another_embedder(name: str, tmp_path: Path) -> None:
    """Vectors of two embedders are not comparable: reopening a realm with another embedder is an error."""
    require(name)

    class OtherEmbedder(HashedEmbedder):
        name = "hashed-other"

    opener = get_memory_system(name).opener
    with opener(tmp_path / "s", "hashed") as adapter:
        adapter.create_realm(REALM)
    with type(adapter)(tmp_path / "s", OtherEmbedder()) as other, pytest.raises(EmbedderMismatchError, match="hashed"):  # type: ignore[call-arg]
        other.recall(REALM, "anything")


@pytest.mark.parametrize("name", ["sqlite-vec", "qdrant"])
def test_a_write_failing_midway_leaves_nothing_half_written(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store call that fails after part of a batch is written (sqlite-vec: vec0 refuses the second row's
    vector, cut short; Qdrant: the call marking the superseded memory fails, injected) leaves the realm as it was: no new memory served, the superseded one still live, ids unchanged."""
    require(name)
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), open_memory_system(name, tmp_path / "s") as adapter:
        adapter.create_realm(REALM)
        (stale,) = adapter.remember(REALM, [MemoryItem(text="The staging database listens on port 5433.", subject="staging port")])
        calls = itertools.count()
        if name == "sqlite-vec":
            real_serialize = adapter._serialize  # type: ignore[attr-defined]

            def serialize(vector: list[float]) -> bytes:  # the second row's vector is cut short: vec0 refuses it
                blob: bytes = real_serialize(vector)  # after the first row is in
                return blob[:-4] if next(calls) == 1 else blob

            monkeypatch.setattr(adapter, "_serialize", serialize)
        else:
            client = adapter._client  # type: ignore[attr-defined]
            real_set_payload = client.set_payload

            def set_payload(*args: object, **kwargs: object) -> object:
                if next(calls) == 0:
                    raise OSError("injected: disk full while marking the superseded memory")
                return real_set_payload(*args, **kwargs)

            monkeypatch.setattr(client, "set_payload", set_payload)
        batch = [MemoryItem(text="The staging database now listens on port 6543.", kind="correction", subject="staging port"),
                 MemoryItem(text="The staging database password rotates monthly.")]
        with pytest.raises(MemoryStoreError, match="nothing was stored"):
            adapter.remember(REALM, batch)
        monkeypatch.undo()
        served = [h.id for h in adapter.recall(REALM, "staging database port", 10)]
        assert served == [stale]
        (later,) = adapter.remember(REALM, ["A later memory about zeppelin hangars."])
        assert later == memory_id(REALM, 1, "fact", "A later memory about zeppelin hangars.")


def test_qdrant_folder_held_by_another_client_is_one_clear_error(tmp_path: Path) -> None:
    """Qdrant's local mode locks its folder: a second adapter on it is a MemoryStoreError naming the folder,
    and closing the first releases it."""
    require("qdrant")
    with open_memory_system("qdrant", tmp_path / "q") as first:
        first.create_realm(REALM)
        with pytest.raises(MemoryStoreError, match=re.escape(str(tmp_path / "q"))):
            open_memory_system("qdrant", tmp_path / "q")
    with open_memory_system("qdrant", tmp_path / "q") as again:
        again.check_realm(REALM)


# ---------------------------------------------------------------------- MCP knowledge-graph memory server


def test_mcp_realms_use_separate_servers_and_memory_files(tmp_path: Path) -> None:
    """Each realm has its own server process and memory file, so one realm's file never holds another's text."""
    require("mcp-memory")
    from tasks_lib.memory.adapters.mcp_memory import McpMemoryAdapter

    with McpMemoryAdapter(tmp_path / "m") as adapter:
        adapter.create_realm(REALM)
        adapter.create_realm(OTHER)
        adapter.remember(REALM, ["Alpha realm secret: the vault code is 1234."])
        adapter.remember(OTHER, ["Beta realm note: lunch is at noon."])
        assert len(set(adapter.server_pids())) == 2
        files = sorted((tmp_path / "m" / "realms").glob("*/memory.jsonl"))
        assert len(files) == 2
        texts = [f.read_text() for f in files]
        assert sum("vault code" in t for t in texts) == 1 and sum("lunch" in t for t in texts) == 1
        assert not any("vault code" in t and "lunch" in t for t in texts)
        assert adapter.realms() == (REALM, OTHER)


def test_mcp_close_leaves_no_server_process(tmp_path: Path) -> None:
    """Closing the adapter stops every realm server it started (no orphan node processes)."""
    require("mcp-memory")
    from tasks_lib.memory.adapters.mcp_memory import McpMemoryAdapter

    adapter = McpMemoryAdapter(tmp_path / "m")
    adapter.create_realm(REALM)
    adapter.create_realm(OTHER)
    pids = adapter.server_pids()
    assert len(pids) == 2 and all(alive(p) for p in pids)
    adapter.close()
    assert not any(alive(p) for p in pids)
    assert adapter.server_pids() == ()


def test_mcp_memories_are_plain_graph_entities_other_clients_can_read(tmp_path: Path) -> None:
    """The state lives in the server's own file format: a second MCP client on the same file sees the memory."""
    require("mcp-memory")
    from tasks_lib.memory.adapters.mcp_client import McpStdioClient
    from tasks_lib.memory.adapters.mcp_memory import McpMemoryAdapter, mcp_memory_server

    with McpMemoryAdapter(tmp_path / "m") as adapter:
        adapter.create_realm(REALM)
        (mem_id,) = adapter.remember(REALM, [MemoryItem(text="Ravi Kumar owns billing_service.", kind="fact")])
    (memory_file,) = (tmp_path / "m" / "realms").glob("*/memory.jsonl")
    env = {"PATH": os.environ["PATH"], "MEMORY_FILE_PATH": str(memory_file)}
    with McpStdioClient(["node", str(mcp_memory_server())], env=env, timeout=30) as client:
        graph = client.call_tool_json("open_nodes", {"names": [mem_id]})
    assert graph["entities"] == [{"name": mem_id, "entityType": "fact", "observations": ["Ravi Kumar owns billing_service."]}]
    assert {"from": mem_id, "to": "entity:billing_service", "relationType": "mentions"} in graph["relations"]
    assert all(json.loads(line)["type"] in ("entity", "relation") for line in memory_file.read_text().splitlines())


# ---------------------------------------------------------------------- registry


def test_unknown_memory_system_lists_the_known_ones() -> None:
    with pytest.raises(UnknownMemorySystemError, match="chroma, chroma\\+memtrial-keyword, lancedb, mcp-memory, mcp-memory\\+memtrial-terms, mem0, qdrant, reference, sqlite-vec, txtai"):
        get_memory_system("mem-zero")


def test_registered_lanes_are_the_adapters_lanes(tmp_path: Path) -> None:
    for name in ("reference", "chroma", "mcp-memory"):
        assert name in MEMORY_SYSTEMS
    for name, system in MEMORY_SYSTEMS.items():
        if system.unavailable() is None:
            with system.opener(tmp_path / name, "hashed") as adapter:
                assert adapter.LANES == system.lanes


def test_missing_mcp_server_names_the_install_script(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An uninstalled system is an error saying how to install it, never a silent fallback."""
    monkeypatch.setenv("MEMTRIAL_MCP_MEMORY_SERVER", str(tmp_path / "missing" / "index.js"))
    reason = memory_system_unavailable("mcp-memory")
    assert reason is not None and "install_mcp_memory.sh" in reason
    with pytest.raises(AdapterUnavailableError, match="install_mcp_memory.sh"):
        open_memory_system("mcp-memory", tmp_path / "m")


# ---------------------------------------------------------------------- systems as shipped


def test_mcp_memory_is_searched_as_an_agent_calls_it(tmp_path: Path) -> None:
    """`mcp-memory` makes one search_nodes call with the whole query: a phrase the memory contains finds
    it, a question about it finds nothing (memtrial's per-term ranking is only in the named variant)."""
    require("mcp-memory")
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}):
        with open_memory_system("mcp-memory", tmp_path / "m") as adapter:
            adapter.create_realm(REALM)
            ids = adapter.remember(REALM, [fact for fact, _ in FACTS])
            assert [h.id for h in adapter.recall(REALM, "billing_service", 5)] == [ids[3]]
            assert adapter.recall(REALM, FACTS[3][1], 5) == ()
        with open_memory_system("mcp-memory+memtrial-terms", tmp_path / "v") as variant:
            variant.create_realm(REALM)
            ids = variant.remember(REALM, [fact for fact, _ in FACTS])
            assert ids[3] in [h.id for h in variant.recall(REALM, FACTS[3][1], 3)]


def test_chroma_as_shipped_has_no_keyword_lane_and_no_floor(tmp_path: Path) -> None:
    """`chroma` is collection.query alone: an unrelated query still returns the nearest memories (Chroma
    has no floor); memtrial's floor and keyword lane exist only in `chroma+memtrial-keyword`."""
    require("chroma")
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}):
        with open_memory_system("chroma", tmp_path / "c") as adapter, open_memory_system("chroma+memtrial-keyword", tmp_path / "v") as variant:
            assert adapter.LANES == ("semantic",) and variant.LANES == ("keyword", "semantic")
            for store in (adapter, variant):
                store.create_realm(REALM)
                store.remember(REALM, [fact for fact, _ in FACTS])
            assert len(adapter.recall(REALM, UNRELATED_QUERIES[0], 5)) == len(FACTS)
            assert variant.recall(REALM, UNRELATED_QUERIES[0], 5) == ()


@pytest.mark.parametrize("name", ["chroma", "lancedb", "txtai", "mem0"])
def test_speaker_timestamp_and_session_are_stored_by_the_system(name: str, tmp_path: Path) -> None:
    """Metadata the memory was given is kept in the system's own metadata and comes back on the hit
    (the old Chroma adapter dropped it)."""
    require(name)
    item = MemoryItem(text="Caroline went to the LGBTQ support group yesterday.", speaker="Caroline",
                      timestamp="1:56 pm on 8 May, 2023", session="session_1")
    with switched(**{MEMORY_OFF_ENV: None, ABLATE_LANES_ENV: None}), open_memory_system(name, tmp_path / name) as adapter:
        adapter.create_realm(REALM)
        (mem_id,) = adapter.remember(REALM, [item, "The office closes at six."])[:1]
        hit = next(h for h in adapter.recall(REALM, "Caroline support group", 2) if h.id == mem_id)
        assert (hit.speaker, hit.timestamp, hit.session) == ("Caroline", "1:56 pm on 8 May, 2023", "session_1")


def test_every_memory_option_help_that_lists_systems_lists_every_registered_one() -> None:
    """A `--memory` help that names the systems names all of them: a system registered but left out of
    the help is one a user never learns to ask for (sqlite-vec and qdrant were missing when added)."""
    import typer

    from flows.cli.main import app

    helps: dict[str, str] = {}

    def walk(prefix: str, command: object) -> None:
        for param in getattr(command, "params", ()):
            help_text = getattr(param, "help", None) or ""
            if "--memory" in getattr(param, "opts", ()) and "chroma" in help_text:
                helps[prefix] = help_text
        for name, sub in getattr(command, "commands", {}).items():
            walk(f"{prefix} {name}".strip(), sub)

    walk("", typer.main.get_command(app))
    assert len(helps) >= 4, f"expected the suite commands' --memory helps, found {sorted(helps)}"
    for command, help_text in sorted(helps.items()):
        missing = [name for name in MEMORY_SYSTEMS if name.split("+")[0] not in help_text]
        assert not missing, f"'memtrial {command}' --memory help does not list {missing}"
