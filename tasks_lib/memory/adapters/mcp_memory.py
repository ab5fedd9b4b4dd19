"""The MCP knowledge-graph memory server (`@modelcontextprotocol/server-memory`) with memtrial's helping layer.

Registered as the variant `mcp-memory+memtrial-terms`: the retrieval below is memtrial's, not
the server's (the server as an agent calls it is `mcp_search_nodes.McpSearchNodesAdapter`,
registered as `mcp-memory`, which shares this write path).

The server is the npm package, run with node over stdio through `mcp_client.McpStdioClient`.
Each realm has its own folder `<path>/realms/<sha256(realm)[:24]>/` holding `REALM` (the name)
and `memory.jsonl`, and its own server process started with `MEMORY_FILE_PATH` pointing there,
so one realm's server cannot see another's memories. At most MAX_SERVERS run at once (least
recently used are stopped); `close` stops them all.

How memories live in the knowledge graph (all state is in the server's file):
- a memory is an entity named by its id, `entityType` = its kind, one observation = its text;
- `memtrial:realm` holds the realm name and the count of memories ever stored (`stored=N`);
- a superseded memory has a relation `<old> -> memtrial:superseded` of type `superseded_by:<new>`
  (forgetting `<new>` leaves it, so a forgotten correction does not revive what it replaced);
- a subject is an entity `subject:<normalised subject>`, linked by `is_about`;
- each entity of the text (`tasks_lib.memory.entities.extract_entities`) is an entity
  `entity:<name>`, linked by `mentions`.

Lanes:
- `keyword`: one `search_nodes` call per query term (the server matches substrings of names,
  types and observations); a memory counts for a term when a word of its text starts with the
  term; ranked by summed IDF.
- `graph`: `open_nodes` on the query's entities, the memories that mention them, then memories
  one hop away through a shared entity (half weight).

Ties are broken by the server's file order (newer first) within one term's results, then by id.
"""

from __future__ import annotations

import os
import re
import shutil
from collections import OrderedDict
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
    POOL,
    AdapterUnavailableError,
    fuse,
    memory_id,
    query_terms,
    rank_by_terms,
    realm_key,
    text_has_term,
)
from tasks_lib.memory.adapters.mcp_client import McpError, McpStdioClient
from tasks_lib.memory.entities import extract_entities
from tasks_lib.memory.errors import (
    MemoryInputError,
    MemoryStoreError,
    RealmExistsError,
    UnknownMemoryIdError,
    UnknownRealmError,
)
from tasks_lib.memory.realms import validate_realm
from tasks_lib.settings import CHECKOUT_ROOT, MCP_MEMORY_SERVER

SERVER_PACKAGE = "@modelcontextprotocol/server-memory"
"""The npm package this adapter runs."""

SERVER_ENV = MCP_MEMORY_SERVER.name

DEFAULT_SERVER = CHECKOUT_ROOT / ".memtrial" / "npm" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
"""Where `scripts/install_mcp_memory.sh` puts the server's entry script."""

MAX_SERVERS = 8
"""Most realm servers kept running at once by one adapter."""

REQUEST_TIMEOUT = 30.0
"""Seconds one MCP request may take."""

META = "memtrial:realm"
"""The entity holding the realm name and the stored-memories counter."""

MARKER = "memtrial:superseded"
"""The entity superseded memories point to."""

SUPERSEDED_BY = "superseded_by:"
"""Prefix of the relation type from a superseded memory to MARKER; the successor's id follows."""

_MEMORY_NAME = re.compile(r"^[0-9a-f]{16}$")


def server_script() -> Path:
    """The server's entry script as configured ($MEMTRIAL_MCP_MEMORY_SERVER, else DEFAULT_SERVER), installed or not."""
    return Path(MCP_MEMORY_SERVER.text() or DEFAULT_SERVER)


def mcp_memory_server() -> Path:
    """The server's entry script: $MEMTRIAL_MCP_MEMORY_SERVER, else DEFAULT_SERVER.

    Raises AdapterUnavailableError (saying how to install it) when it or `node` is missing.
    """
    reason = mcp_memory_unavailable()
    if reason:
        raise AdapterUnavailableError(reason)
    return server_script()


def mcp_memory_unavailable() -> str | None:
    """None when node and the server package are installed here, else why not (for skip messages)."""
    if shutil.which("node") is None:
        return f"memory system 'mcp-memory' needs node (Node.js >= 18) on PATH to run {SERVER_PACKAGE}; install nodejs"
    script = server_script()
    if not script.is_file():
        return (
            f"memory system 'mcp-memory' needs {SERVER_PACKAGE}: {script} is missing; "
            f"run scripts/install_mcp_memory.sh (or set {SERVER_ENV} to the server's dist/index.js)"
        )
    return None


def is_memory(entity: dict[str, Any]) -> bool:
    return bool(_MEMORY_NAME.match(str(entity.get("name", "")))) and bool(entity.get("observations"))


def _stored(meta: dict[str, Any] | None) -> int:
    """The largest `stored=N` observation of the META entity (0 when there is none)."""
    counts = [int(o[7:]) for o in (meta or {}).get("observations", []) if str(o).startswith("stored=") and o[7:].isdigit()]
    return max(counts, default=0)


class McpMemoryAdapter(MemoryAdapter):
    """The MCP knowledge-graph memory server, one server process and memory file per realm (lanes: keyword, graph)."""

    LANES: ClassVar[tuple[str, ...]] = ("keyword", "graph")
    ABSTENTION: ClassVar[str | None] = "keyword needs a memory word starting with a query term; graph needs a shared entity"

    def __init__(self, path: Path | str, *, server: Path | str | None = None, timeout: float = REQUEST_TIMEOUT) -> None:
        """Use folder `path` for the realms' memory files; `server` overrides the entry script.

        Raises AdapterUnavailableError when node or the server package is missing.
        """
        self.script = Path(server) if server is not None else mcp_memory_server()
        if not self.script.is_file():
            raise AdapterUnavailableError(f"mcp-memory server script {self.script} is missing; run scripts/install_mcp_memory.sh")
        self.path = Path(path)
        self.timeout = timeout
        self._servers: OrderedDict[str, McpStdioClient] = OrderedDict()
        (self.path / "realms").mkdir(parents=True, exist_ok=True)

    # ------------------------------------------------------------------ servers and realms

    def _folder(self, realm: str) -> Path:
        return self.path / "realms" / realm_key(realm)

    def _server(self, realm: str) -> McpStdioClient:
        """The running server of `realm`, started if needed (the least recently used beyond MAX_SERVERS stop)."""
        client = self._servers.get(realm)
        if client is not None and client.running:
            self._servers.move_to_end(realm)
            return client
        if client is not None:
            client.close()
        folder = self._folder(realm)
        env = {"PATH": os.environ.get("PATH", ""), "MEMORY_FILE_PATH": str(folder / "memory.jsonl")}
        client = McpStdioClient(["node", str(self.script)], env=env, cwd=folder, timeout=self.timeout, name=f"mcp-memory[{realm}]")
        self._servers[realm] = client
        while len(self._servers) > MAX_SERVERS:
            _, oldest = self._servers.popitem(last=False)
            oldest.close()
        return client

    def _call(self, realm: str, tool: str, arguments: dict[str, Any]) -> Any:
        try:
            return self._server(realm).call_tool_json(tool, arguments)
        except McpError as error:
            raise MemoryStoreError(f"mcp-memory: {tool} in realm {realm!r} failed: {error}") from error

    def create_realm(self, realm: str) -> None:
        validate_realm(realm)
        folder = self._folder(realm)
        if (folder / "REALM").is_file():
            raise RealmExistsError(f"realm: {realm!r} already exists in {self.path}; realms are unique per trial, name a new one")
        folder.mkdir(parents=True, exist_ok=True)
        self._call(
            realm,
            "create_entities",
            {
                "entities": [
                    {"name": META, "entityType": "memtrial-realm", "observations": [f"realm={realm}", "stored=0"]},
                    {"name": MARKER, "entityType": "memtrial-marker", "observations": []},
                ]
            },
        )
        (folder / "REALM").write_text(realm + "\n", encoding="utf-8")

    def check_realm(self, realm: str) -> None:
        if not (self._folder(realm) / "REALM").is_file():
            raise UnknownRealmError(f"realm: {realm!r} was never created in {self.path}; create it (no default realm is used)")

    def realms(self) -> tuple[str, ...]:
        """Every realm of the store, sorted."""
        return tuple(sorted(p.read_text(encoding="utf-8").strip() for p in (self.path / "realms").glob("*/REALM")))

    # ------------------------------------------------------------------ writes

    def remember(self, realm: str, items: Sequence[MemoryItem | str | bytes]) -> tuple[str, ...]:
        validate_realm(realm)
        checked = coerce_items(items)
        self.check_realm(realm)
        graph = self._call(realm, "read_graph", {})
        entities = {e["name"]: e for e in graph["entities"]}
        memories = {name for name, e in entities.items() if is_memory(e)}
        dead = {r["from"] for r in graph["relations"] if r["to"] == MARKER}
        about: dict[str, list[str]] = {}
        for rel in graph["relations"]:
            if rel["relationType"] == "is_about":
                about.setdefault(rel["to"], []).append(rel["from"])
        stored = _stored(entities.get(META))

        ids: list[str] = []
        new_entities: list[dict[str, Any]] = []
        nodes: dict[str, str] = {}  # subject/entity node name -> entityType, for nodes not yet in the graph
        relations: list[dict[str, str]] = []
        marks: dict[str, str] = {}  # memory id -> the new id that supersedes it
        for index, item in enumerate(checked):
            new_id = memory_id(realm, stored + index, item.kind, item.text)
            for old in item.supersedes:
                if old not in memories and old not in ids:
                    raise UnknownMemoryIdError(f"items[{index}].supersedes: id {old!r} is not a memory of realm {realm!r}; name a live memory of it")
                if old in dead or old in marks:
                    raise UnknownMemoryIdError(f"items[{index}].supersedes: id {old!r} is already superseded; name a live memory of realm {realm!r}")
                marks[old] = new_id
            if item.subject:
                subject = "subject:" + normalize_subject(item.subject)
                for old in about.get(subject, []):
                    if old in memories or old in ids:
                        if old not in dead and old not in marks:
                            marks[old] = new_id
                about.setdefault(subject, []).append(new_id)
                if subject not in entities:
                    nodes[subject] = "memtrial-subject"
                relations.append({"from": new_id, "to": subject, "relationType": "is_about"})
            for name in sorted(extract_entities(item.text)):
                node = "entity:" + name
                if node not in entities:
                    nodes[node] = "memtrial-entity"
                relations.append({"from": new_id, "to": node, "relationType": "mentions"})
            new_entities.append({"name": new_id, "entityType": item.kind, "observations": [item.text]})
            ids.append(new_id)
        relations += [{"from": old, "to": MARKER, "relationType": SUPERSEDED_BY + new} for old, new in marks.items()]
        new_entities += [{"name": name, "entityType": kind, "observations": []} for name, kind in nodes.items()]

        created = self._call(realm, "create_entities", {"entities": new_entities})
        made = {e["name"] for e in created.get("entities", [])}
        if not set(ids) <= made:
            self._undo(realm, [i for i in ids if i in made], [])
            raise MemoryStoreError(f"mcp-memory: realm {realm!r} already holds an entity named like a new memory id; nothing was stored")
        try:
            self._call(realm, "create_relations", {"relations": relations})
            self._call(realm, "add_observations", {"observations": [{"entityName": META, "contents": [f"stored={stored + len(ids)}"]}]})
            self._call(realm, "delete_observations", {"deletions": [{"entityName": META, "observations": [f"stored={stored}"]}]})
        except MemoryStoreError:
            self._undo(realm, ids, [r for r in relations if r["to"] == MARKER])
            raise
        return tuple(ids)

    def _undo(self, realm: str, ids: list[str], marks: list[dict[str, str]]) -> None:
        """Best effort: remove memories and supersession marks a failed remember had written."""
        try:
            if marks:
                self._call(realm, "delete_relations", {"relations": marks})
            if ids:
                self._call(realm, "delete_entities", {"entityNames": ids})
        except MemoryStoreError:
            pass  # the server is gone; the original error is the one to report

    def forget(self, ids: Sequence[str]) -> tuple[str, ...]:
        if isinstance(ids, str) or not ids:
            raise MemoryInputError("ids: give a non-empty list of memory ids to forget")
        wanted = list(dict.fromkeys(ids))
        holders: dict[str, list[str]] = {}
        present: set[str] = set()
        # Realms whose server is already running first; stop starting servers once every id is found.
        for realm in sorted(self.realms(), key=lambda r: r not in self._servers):
            if present >= set(wanted):
                break
            graph = self._call(realm, "open_nodes", {"names": wanted})
            found = [e["name"] for e in graph["entities"] if is_memory(e)]
            if found:
                holders[realm] = found
                present.update(found)
        missing = [i for i in wanted if i not in present]
        if missing:
            raise UnknownMemoryIdError(f"ids: {len(missing)} id(s) are not stored (e.g. {missing[0]!r}); nothing was forgotten")
        for realm, found in holders.items():
            self._call(realm, "delete_entities", {"entityNames": found})
        return tuple(wanted)

    # ------------------------------------------------------------------ reads

    def _keyword(self, realm: str, query: str, seen: dict[str, tuple[str, str]], newer: dict[str, int]) -> list[str]:
        terms = query_terms(query)
        if not terms:
            return []
        matches: dict[str, list[str]] = {}
        for term in terms:
            result = self._call(realm, "search_nodes", {"query": term})
            dead = {r["from"] for r in result["relations"] if r["to"] == MARKER}
            hits = []
            for position, entity in enumerate(result["entities"]):
                if is_memory(entity) and entity["name"] not in dead and text_has_term(entity["observations"][0], term):
                    seen[entity["name"]] = (entity["observations"][0], entity["entityType"])
                    newer.setdefault(entity["name"], position)
                    hits.append(entity["name"])
            matches[term] = hits
        meta = self._call(realm, "open_nodes", {"names": [META]})
        total = max(_stored(next(iter(meta["entities"]), None)), len(seen))
        return rank_by_terms(matches, total, newer)

    def _live_memories(self, realm: str, names: list[str], seen: dict[str, tuple[str, str]]) -> tuple[set[str], list[dict[str, str]]]:
        """open_nodes on memory `names`: the live ones (recorded in `seen`) and every relation touching them."""
        result = self._call(realm, "open_nodes", {"names": names})
        dead = {r["from"] for r in result["relations"] if r["to"] == MARKER}
        live = set()
        for entity in result["entities"]:
            if is_memory(entity) and entity["name"] not in dead:
                seen[entity["name"]] = (entity["observations"][0], entity["entityType"])
                live.add(entity["name"])
        return live, result["relations"]

    def _mentioning(self, realm: str, nodes: list[str]) -> dict[str, int]:
        """Memory id -> how many of the entity `nodes` it mentions."""
        if not nodes:
            return {}
        result = self._call(realm, "open_nodes", {"names": nodes})
        wanted = set(nodes)
        counts: dict[str, int] = {}
        for rel in result["relations"]:
            if rel["relationType"] == "mentions" and rel["to"] in wanted:
                counts[rel["from"]] = counts.get(rel["from"], 0) + 1
        return counts

    def _graph(self, realm: str, query: str, seen: dict[str, tuple[str, str]]) -> list[str]:
        seeds = ["entity:" + e for e in sorted(extract_entities(query))]
        direct = self._mentioning(realm, seeds)
        if not direct:
            return []
        live, relations = self._live_memories(realm, sorted(direct), seen)
        scores = {m: float(n) for m, n in direct.items() if m in live}
        linked = sorted({r["to"] for r in relations if r["relationType"] == "mentions" and r["from"] in live} - set(seeds))
        hop = {m: n for m, n in self._mentioning(realm, linked).items() if m not in direct}
        if hop:
            hop_live, _ = self._live_memories(realm, sorted(hop), seen)
            scores.update({m: 0.5 * n for m, n in hop.items() if m in hop_live})
        return sorted(scores, key=lambda m: (-scores[m], m))[:POOL]

    def search(self, realm: str, query: str, k: int, lanes: tuple[str, ...]) -> list[MemoryHit]:
        seen: dict[str, tuple[str, str]] = {}  # id -> (text, kind)
        newer: dict[str, int] = {}
        ranked: dict[str, list[str]] = {}
        if "keyword" in lanes:
            ranked["keyword"] = self._keyword(realm, query, seen, newer)
        if "graph" in lanes:
            ranked["graph"] = self._graph(realm, query, seen)
        return [
            MemoryHit(id=mem_id, text=seen[mem_id][0], score=score, lanes=hit_lanes, kind=seen[mem_id][1])  # type: ignore[arg-type]
            for mem_id, score, hit_lanes in fuse(ranked, self.LANES, newer)[:k]
        ]

    def accounting(self) -> Accounting:
        size = sum(p.stat().st_size for p in (self.path / "realms").glob("*/memory.jsonl"))
        return Accounting(storage_bytes=size)

    def server_pids(self) -> tuple[int, ...]:
        """Process ids of the realm servers running now (for tests that check nothing is left behind)."""
        return tuple(c.pid for c in self._servers.values() if c.running)

    def close(self) -> None:
        """Stop every realm server this adapter started."""
        while self._servers:
            _, client = self._servers.popitem()
            client.close()
