#!/usr/bin/env python3
"""A minimal memtrial provisioner: copy it and replace the storage with your memory system.

Standard library only. It keeps each project as JSON files under the folder named by the
environment variable MINIMAL_PROVISIONER_STATE and speaks the three verbs of the protocol:

    minimal_provisioner.py restore    < {"fixture", "graph_arm", "run_identity", "artifacts": {...}}
    minimal_provisioner.py snapshot   < {"project", "probes": [...]}
    minimal_provisioner.py destroy    < {"project"}

Each verb reads one JSON object on stdin and prints exactly one JSON object on stdout.
Diagnostics go to stderr; a bad request exits 2, any other failure exits 1.

Artifacts it understands (the format memtrial's conformance check writes):
    evidence corpus  JSON Lines, one {"id": str, "text": str} per line
    graph            {"nodes": [{"id", "label", "text"}], "edges": [{"source", "target", "relation"}]}

Lanes: `fulltext` returns items containing every query word; `semantic` ranks items by word-count
cosine similarity; `graph` returns the node whose id or label equals the query plus its neighbours.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import shutil
import sys
import time
from collections import Counter
from pathlib import Path

STATE_ENV = "MINIMAL_PROVISIONER_STATE"
LANES = ("fulltext", "semantic", "graph")
SEMANTIC_THRESHOLD = 0.2
SEMANTIC_TOP = 5


class BadRequest(Exception):
    """The request on stdin does not follow the protocol."""


def read_request(required: set[str]) -> dict:
    """Read one JSON object from stdin with exactly the `required` keys."""
    try:
        request = json.loads(sys.stdin.read())
    except json.JSONDecodeError as error:
        raise BadRequest(f"stdin is not JSON: {error}") from None
    if not isinstance(request, dict):
        raise BadRequest("stdin is not a JSON object")
    missing, unknown = required - request.keys(), request.keys() - required
    if missing or unknown:
        raise BadRequest(f"missing keys {sorted(missing)}, unknown keys {sorted(unknown)}")
    return request


def state_root() -> Path:
    """The folder holding every project, from the environment."""
    value = os.environ.get(STATE_ENV)
    if not value:
        raise BadRequest(f"set {STATE_ENV} to the folder where projects are kept")
    return Path(value)


def project_dir(project: str) -> Path:
    """The folder of one project; refuses names that could leave the state root."""
    if not isinstance(project, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,255}", project):
        raise BadRequest(f"invalid project name {project!r}")
    return state_root() / project


def write_json(path: Path, value: object) -> None:
    """Write JSON atomically: a reader never sees half a file."""
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(value, sort_keys=True), encoding="utf-8")
    os.replace(temporary, path)


def load_evidence(path: str | None) -> list[dict]:
    """Read the evidence corpus (JSON Lines of {id, text})."""
    if path is None:
        return []
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def load_graph(path: str | None) -> dict:
    """Read the graph ({nodes, edges})."""
    if path is None:
        return {"nodes": [], "edges": []}
    return json.loads(Path(path).read_text(encoding="utf-8"))


def restore() -> dict:
    """Load the artifacts into a fresh project named after the fixture, arm and run identity."""
    started = time.monotonic()
    request = read_request({"fixture", "graph_arm", "run_identity", "artifacts"})
    artifacts = request["artifacts"]
    if not isinstance(artifacts, dict) or set(artifacts) != {"evidence_corpus", "graph"}:
        raise BadRequest("artifacts must have exactly the keys evidence_corpus and graph")
    identity = "\0".join((request["fixture"], request["graph_arm"], request["run_identity"]))
    project = "p-" + hashlib.sha256(identity.encode()).hexdigest()[:16]
    folder = project_dir(project)
    if folder.exists():
        shutil.rmtree(folder)  # restoring again starts from the frozen state, never from leftovers
    folder.mkdir(parents=True)
    write_json(folder / "evidence.json", load_evidence(artifacts["evidence_corpus"]))
    write_json(folder / "graph.json", load_graph(artifacts["graph"]))
    return {"project": project, "queue_before_count": 0, "restore_seconds": time.monotonic() - started}


def words(text: str) -> list[str]:
    """Lowercase words of `text`."""
    return re.findall(r"[a-z0-9]+", text.lower())


def cosine(a: Counter, b: Counter) -> float:
    """Cosine similarity of two word counts."""
    dot = sum(count * b[word] for word, count in a.items())
    norm = math.sqrt(sum(v * v for v in a.values())) * math.sqrt(sum(v * v for v in b.values()))
    return dot / norm if norm else 0.0


def search(lane: str, query: str, items: list[dict], graph: dict) -> list[dict]:
    """Run one probe query on one lane; returns hits as {id, text}."""
    if lane == "fulltext":
        wanted = set(words(query))
        return [{"id": i["id"], "text": i["text"]} for i in items if wanted and wanted <= set(words(i["text"]))]
    if lane == "semantic":
        q = Counter(words(query))
        scored = sorted(((cosine(q, Counter(words(i["text"]))), i) for i in items), key=lambda pair: -pair[0])
        return [{"id": i["id"], "text": i["text"]} for s, i in scored[:SEMANTIC_TOP] if s >= SEMANTIC_THRESHOLD]
    nodes = {n["id"]: n for n in graph["nodes"]}
    seeds = [n["id"] for n in graph["nodes"] if query == n["id"] or query.lower() == n["label"].lower()]
    found = list(seeds)
    for edge in graph["edges"]:
        for a, b in ((edge["source"], edge["target"]), (edge["target"], edge["source"])):
            if a in seeds and b not in found and b in nodes:
                found.append(b)
    return [{"id": n, "text": nodes[n]["text"]} for n in found]


def run_probe(probe: dict, items: list[dict], graph: dict) -> dict:
    """Run a probe and judge it: all expected ids among the hits, or the expected text in some hit."""
    if not isinstance(probe, dict) or probe.get("lane") not in LANES:
        raise BadRequest(f"invalid probe {probe!r}")
    hits = search(probe["lane"], probe["query"], items, graph)
    if probe.get("expect_ids") is not None:
        found = set(probe["expect_ids"]) <= {h["id"] for h in hits}
    else:
        found = any(probe["expect_text"] in h["text"] for h in hits)
    return {"name": probe["name"], "hits": hits, "found": found}


def snapshot() -> dict:
    """Re-read the project from disk and run the probes; an absent project is reported as empty."""
    started = time.monotonic()
    request = read_request({"project", "probes"})
    folder = project_dir(request["project"])
    exists = folder.is_dir()
    evidence = json.loads((folder / "evidence.json").read_text(encoding="utf-8")) if exists else []
    graph = json.loads((folder / "graph.json").read_text(encoding="utf-8")) if exists else {"nodes": [], "edges": []}
    items = evidence + [{"id": n["id"], "text": n["text"]} for n in graph["nodes"]]
    return {
        "state": {"exists": exists, "evidence_documents": len(evidence),
                  "graph_nodes": len(graph["nodes"]), "graph_edges": len(graph["edges"])},
        "probes": [run_probe(probe, items, graph) for probe in request["probes"]],
        "queue_after_count": 0,
        "snapshot_seconds": time.monotonic() - started,
    }


def destroy() -> dict:
    """Remove the project; removing an absent project succeeds (destroy is idempotent)."""
    request = read_request({"project"})
    shutil.rmtree(project_dir(request["project"]), ignore_errors=True)
    return {"ok": True}


VERBS = {"restore": restore, "snapshot": snapshot, "destroy": destroy}


def main(argv: list[str]) -> int:
    """Dispatch the verb; print the one response object or a diagnostic on stderr."""
    if len(argv) != 1 or argv[0] not in VERBS:
        print(f"usage: minimal_provisioner.py {{{'|'.join(VERBS)}}}", file=sys.stderr)
        return 2
    try:
        response = VERBS[argv[0]]()
    except BadRequest as error:
        print(f"{argv[0]}: bad request: {error}", file=sys.stderr)
        return 2
    except (OSError, ValueError, KeyError, TypeError) as error:
        print(f"{argv[0]}: failed: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    sys.stdout.write(json.dumps(response, separators=(",", ":")) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
