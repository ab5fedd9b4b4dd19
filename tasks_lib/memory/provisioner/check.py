"""Conformance checks any provisioner must pass before memtrial trusts its snapshots.

`check_provisioner(argv, fixture_root)` runs a third party's provisioner for real through the
strict client in `tasks_lib.memory.provisioner.client` and returns one `CheckResult` per check. Nothing passes
by default: a check whose prerequisite failed is reported as failed, with the reason.

The check fixture. Unless the caller passes its own cases, the check writes two tiny cases,
`alpha` and `beta`, under `<fixture_root>/memtrial-check/<case>/`:

    evidence.jsonl  JSON Lines, one {"id": str, "text": str} per line (two documents)
    graph.json      {"nodes": [{"id", "label", "text"}], "edges": [{"source", "target", "relation"}]}

and pins both by SHA-256, so restore gets artifacts the client has resolved and verified. Hit ids
are the ids written in these files. Each case plants one distinctive phrase ("saffron kestrel",
"cobalt marmot") reachable through all three lanes:

    fulltext  query the phrase's words, expect the document id
    semantic  query a paraphrase of the document, expect the phrase in a hit's text
    graph     query the node's name as written ("Saffron Kestrel"), expect the node and its neighbour

A provisioner for a system with its own artifact format converts these files on restore, or the
caller passes `cases` built from fixtures in that format.

Two trials of one task restore the same fixture and arm under two run identities, so
`restore-isolates-trials` does exactly that and requires two separate live states: different
projects; each snapshot reporting the case's state exactly (nothing accumulated from the other
restore); a memory written through the first (into its replica, when the restore names the reference
replica file) never found through the second; and the second intact after the first is destroyed.
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Awaitable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

from pydantic import Field

from tasks_lib.contracts import ArmArtifacts, ArtifactRef, ContractModel, Identifier, NonEmptyText
from tasks_lib.memory.provisioner.client import (
    DEFAULT_OUTPUT_LIMIT_BYTES,
    Probe,
    Provisioner,
    ProvisionerConfig,
    ProvisionerError,
    ProvisionerExitError,
    ProvisionerOutputError,
    ProvisionerOutputLimitError,
    ProvisionerSchemaError,
    RestoreResponse,
    SnapshotResponse,
)
from tasks_lib.trees import sha256_file

CHECK_DIR = "memtrial-check"
"""Folder under the fixture root that the built-in check fixture is written to."""

CHECK_NAMES = (
    "restore-valid-artifacts",
    "snapshot-finds-planted-probes",
    "snapshot-misses-absent-memory",
    "restore-isolates-run-identity",
    "restore-isolates-trials",
    "destroy-ok",
    "snapshot-after-destroy-shows-nothing",
    "destroy-is-scoped",
    "destroy-is-idempotent",
    "responses-are-strict-json",
)
"""Every check, in the order they run and are reported."""

ABSENT_PROBES = tuple(Probe(name=f"absent-memory-{lane}", lane=lane, query="vermilion axolotl", expect_text="vermilion axolotl")
                      for lane in ("fulltext", "semantic", "graph"))
"""Probes, one per lane, for something no case plants; a provisioner that finds it is answering from nowhere."""


class CheckResult(ContractModel):
    """Outcome of one conformance check."""

    name: NonEmptyText
    """Name of the check (one of CHECK_NAMES)."""
    passed: bool
    """Whether the provisioner behaved as the protocol requires."""
    why: NonEmptyText
    """What was observed, in one line."""


class CheckCase(ContractModel):
    """One arm the check restores, with the probes its live state must answer."""

    fixture: Identifier
    """Fixture id sent in the restore request."""
    arm: ArmArtifacts
    """Artifacts to restore, relative to the fixture root."""
    run_identity: Identifier
    """Run identity sent in the restore request; differs between the two cases."""
    probes: tuple[Probe, ...] = Field(min_length=1)
    """Probes that must be found once the case is live, and only in this case's project."""
    evidence_documents: int = Field(ge=0)
    """Evidence documents the snapshot must report."""
    graph_nodes: int = Field(ge=0)
    """Graph nodes the snapshot must report."""
    graph_edges: int = Field(ge=0)
    """Graph edges the snapshot must report."""


# --------------------------------------------------------------------------- built-in fixture

_PLANTS = {
    "alpha": ("saffron kestrel", "release checklist", "tagging"),
    "beta": ("cobalt marmot", "deploy runbook", "rollback"),
}


def _case_files(case: str) -> tuple[list[dict[str, str]], dict[str, Any]]:
    phrase, topic, step = _PLANTS[case]
    evidence = [
        {"id": f"{case}-doc-1", "text": f"The {topic} requires the {phrase} signoff before {step}."},
        {"id": f"{case}-doc-2", "text": f"Schema changes in {case} go through the migration tool, never by hand."},
    ]
    graph = {
        "nodes": [
            {"id": f"{case}-node-owner", "label": phrase, "text": f"{phrase.title()} owns the {topic} signoff."},
            {"id": f"{case}-node-topic", "label": topic, "text": f"The {topic} ends with {step}."},
        ],
        "edges": [{"source": f"{case}-node-owner", "target": f"{case}-node-topic", "relation": "owns"}],
    }
    return evidence, graph


def _case_probes(case: str) -> tuple[Probe, ...]:
    phrase, topic, step = _PLANTS[case]
    return (
        Probe(name=f"{case}-fulltext", lane="fulltext", query=f"{phrase} signoff", expect_ids=(f"{case}-doc-1",)),
        Probe(name=f"{case}-semantic", lane="semantic", query=f"who must sign off on the {topic} before {step}",
              expect_text=f"{phrase} signoff"),
        Probe(name=f"{case}-graph", lane="graph", query=phrase.title(),
              expect_ids=(f"{case}-node-owner", f"{case}-node-topic")),
    )


def _write(fixture_root: Path, relative: str, data: bytes) -> ArtifactRef:
    path = fixture_root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return ArtifactRef(path=relative, sha256=sha256_file(path))


def write_check_fixture(fixture_root: Path) -> tuple[CheckCase, CheckCase]:
    """Write the built-in `alpha` and `beta` cases under `fixture_root/memtrial-check/` and return them pinned."""
    cases = []
    for case in _PLANTS:
        evidence, graph = _case_files(case)
        evidence_bytes = "".join(json.dumps(doc, sort_keys=True) + "\n" for doc in evidence).encode()
        graph_bytes = (json.dumps(graph, indent=2, sort_keys=True) + "\n").encode()
        refs = [_write(fixture_root, f"{CHECK_DIR}/{case}/{name}", data) for name, data in
                (("evidence.jsonl", evidence_bytes), ("graph.json", graph_bytes))]
        cases.append(CheckCase(
            fixture=f"memtrial-check-{case}",
            arm=ArmArtifacts(arm="on", evidence=refs[0], graph=refs[1]),
            run_identity=f"check-{case}-{secrets.token_hex(4)}",
            probes=_case_probes(case),
            evidence_documents=len(evidence), graph_nodes=len(graph["nodes"]), graph_edges=len(graph["edges"]),
        ))
    return cases[0], cases[1]


# --------------------------------------------------------------------------- running the checks

WRITTEN_TEXT = "indigo pelican migrates through the quarry"
"""What the trials check writes through one project's replica (no case plants it)."""


def _write_through(restored: RestoreResponse) -> Probe | None:
    """Write one memory into the restored project's reference replica file, when its env names one, and
    return the probe that finds it; None when the project is reachable only through a server."""
    from tasks_lib.memory.delivery.hook import REALM_ENV, STORE_ENV
    from tasks_lib.memory.reference.store import SqliteMemoryStore

    path, realm = restored.env.get(STORE_ENV), restored.env.get(REALM_ENV)
    if not path or not realm or not Path(path).is_file():
        return None
    store = SqliteMemoryStore(Path(path), create=False)
    try:
        store.remember(realm, [WRITTEN_TEXT])
    finally:
        store.close()
    return Probe(name="written-through-another-trial", lane="fulltext", query="indigo pelican quarry", expect_text="indigo pelican")

T = TypeVar("T")

_STRICTNESS_ERRORS = (ProvisionerOutputError, ProvisionerSchemaError, ProvisionerOutputLimitError)


class _RecordingProvisioner(Provisioner):
    """A Provisioner that remembers how every call's output turned out."""

    def __init__(self, config: ProvisionerConfig) -> None:
        super().__init__(config)
        self.parsed: list[str] = []
        self.malformed: list[str] = []

    async def call(self, verb: Any, request: Any, response_model: Any) -> Any:
        try:
            response = await super().call(verb, request, response_model)
        except _STRICTNESS_ERRORS as error:
            self.malformed.append(f"{verb}: {error}")
            raise
        self.parsed.append(verb)
        return response


async def _attempt(awaitable: Awaitable[T]) -> tuple[T | None, ProvisionerError | None]:
    try:
        return await awaitable, None
    except ProvisionerError as error:
        return None, error


def _found(response: SnapshotResponse, names: Sequence[str]) -> list[str]:
    wanted = set(names)
    return [r.name for r in response.probes if r.name in wanted and r.found]


def _missing(response: SnapshotResponse, names: Sequence[str]) -> list[str]:
    wanted = set(names)
    return [r.name for r in response.probes if r.name in wanted and not r.found]


def _names(case: CheckCase) -> list[str]:
    return [probe.name for probe in case.probes]


def _state_matches(response: SnapshotResponse, case: CheckCase) -> str | None:
    """Return why the reported state differs from the case, or None when it matches."""
    s = response.state
    expected = (True, case.evidence_documents, case.graph_nodes, case.graph_edges)
    actual = (s.exists, s.evidence_documents, s.graph_nodes, s.graph_edges)
    if actual == expected:
        return None
    return (f"state reports exists={s.exists}, {s.evidence_documents} documents, {s.graph_nodes} nodes, "
            f"{s.graph_edges} edges; expected {case.evidence_documents}/{case.graph_nodes}/{case.graph_edges}")


class _Checks:
    """The check sequence against one provisioner; fills `results` in CHECK_NAMES order."""

    def __init__(self, provisioner: _RecordingProvisioner, a: CheckCase, b: CheckCase) -> None:
        self.p = provisioner
        self.a, self.b = a, b
        self.results: dict[str, CheckResult] = {}

    def record(self, name: str, passed: bool, why: str) -> None:
        self.results[name] = CheckResult(name=name, passed=passed, why=why)

    def fail_unrun(self, names: Sequence[str], reason: str) -> None:
        for name in names:
            if name not in self.results:
                self.record(name, False, f"not run: {reason}")

    async def restore(self, case: CheckCase) -> tuple[RestoreResponse | None, ProvisionerError | None]:
        return await _attempt(self.p.restore(case.fixture, case.arm, case.run_identity))

    async def run(self) -> list[CheckResult]:
        restored_a, error = await self.restore(self.a)
        self.record("restore-valid-artifacts", restored_a is not None,
                    f"restored project {restored_a.project!r}" if restored_a else f"restore failed: {error}")
        if restored_a is None:
            self.fail_unrun(CHECK_NAMES, "restore of a valid artifact set failed")
        else:
            restored_b = await self.check_live(restored_a)
            await self.check_destroy(restored_a, restored_b)
            if restored_b is not None:
                await _attempt(self.p.destroy(restored_b.project))
        self.check_strict_json()
        return [self.results[name] for name in CHECK_NAMES]

    async def check_live(self, restored_a: RestoreResponse) -> RestoreResponse | None:
        a, b = self.a, self.b
        snap, error = await _attempt(self.p.snapshot(restored_a.project, (*a.probes, *ABSENT_PROBES)))
        if snap is None:
            self.record("snapshot-finds-planted-probes", False, f"snapshot failed: {error}")
            self.record("snapshot-misses-absent-memory", False, f"snapshot failed: {error}")
        else:
            missing, state = _missing(snap, _names(a)), _state_matches(snap, a)
            self.record("snapshot-finds-planted-probes", not missing and state is None,
                        state or (f"probes not found: {missing}" if missing else f"found all {len(a.probes)} planted probes"))
            absent_found = _found(snap, [probe.name for probe in ABSENT_PROBES])
            self.record("snapshot-misses-absent-memory", not absent_found,
                        f"probes for unplanted memory were found: {', '.join(absent_found)}" if absent_found
                        else "unplanted memory was not found on any lane")
        restored_b, error = await self.restore(b)
        if restored_b is None:
            self.record("restore-isolates-run-identity", False, f"second restore failed: {error}")
            return None
        self.record("restore-isolates-run-identity", *await self.isolation(restored_a, restored_b))
        self.record("restore-isolates-trials", *await self.trials_isolated())
        return restored_b

    async def trials_isolated(self) -> tuple[bool, str]:
        """Case `a` restored twice more, under two fresh run identities, as two trials of one task are."""
        first, error = await _attempt(self.p.restore(self.a.fixture, self.a.arm, f"{self.a.run_identity}-trial1"))
        if first is None:
            return False, f"restore of a second trial failed: {error}"
        second, error = await _attempt(self.p.restore(self.a.fixture, self.a.arm, f"{self.a.run_identity}-trial2"))
        try:
            if second is None:
                return False, f"restore of a third trial failed: {error}"
            return await self._separate(first, second)
        finally:
            for restored in (first, second):
                if restored is not None:
                    await _attempt(self.p.destroy(restored.project))

    async def _separate(self, first: RestoreResponse, second: RestoreResponse) -> tuple[bool, str]:
        if first.project == second.project:
            return False, f"two run identities of one fixture and arm got the same project {first.project!r}"
        names = _names(self.a)
        for restored in (first, second):
            snap, error = await _attempt(self.p.snapshot(restored.project, self.a.probes))
            if snap is None:
                return False, f"snapshot of {restored.project!r} failed: {error}"
            problem = _state_matches(snap, self.a)
            if problem:
                return False, f"project {restored.project!r}: {problem} (live state shared or accumulated across trials?)"
        written = _write_through(first)
        if written is not None:
            snap, error = await _attempt(self.p.snapshot(second.project, (written,)))
            if snap is None:
                return False, f"snapshot of {second.project!r} failed: {error}"
            if _found(snap, [written.name]):
                return False, f"a memory written through {first.project!r} was found through {second.project!r}: one live state"
        _, error = await _attempt(self.p.destroy(first.project))
        if error is not None:
            return False, f"destroy of {first.project!r} failed: {error}"
        snap, error = await _attempt(self.p.snapshot(second.project, self.a.probes))
        missing = _missing(snap, names) if snap else None
        changed = _state_matches(snap, self.a) if snap is not None and not missing else None
        if snap is None or missing or changed:
            return False, f"destroying {first.project!r} changed {second.project!r}: {error or missing or changed}"
        how = "a write through one was not seen by the other, " if written else ""
        return True, f"two trials got {first.project!r} and {second.project!r}: {how}each kept exactly its own state"

    async def isolation(self, restored_a: RestoreResponse, restored_b: RestoreResponse) -> tuple[bool, str]:
        if restored_a.project == restored_b.project:
            return False, f"both run identities got project {restored_a.project!r}"
        for mine, other, project in ((self.a, self.b, restored_a.project), (self.b, self.a, restored_b.project)):
            snap, error = await _attempt(self.p.snapshot(project, (*mine.probes, *other.probes)))
            if snap is None:
                return False, f"snapshot of {project!r} failed: {error}"
            missing, leaked = _missing(snap, _names(mine)), _found(snap, _names(other))
            if missing or leaked:
                return False, f"project {project!r}: own probes missing {missing}, other run's probes found {leaked}"
        return True, f"projects {restored_a.project!r} and {restored_b.project!r} each hold only their own memory"

    async def check_destroy(self, restored_a: RestoreResponse, restored_b: RestoreResponse | None) -> None:
        project = restored_a.project
        _, error = await _attempt(self.p.destroy(project))
        self.record("destroy-ok", error is None, f"destroy failed: {error}" if error else f"destroyed {project!r}")
        self.record("snapshot-after-destroy-shows-nothing", *await self.after_destroy(project))
        if restored_b is None:
            self.record("destroy-is-scoped", False, "not run: the second restore failed")
        else:
            snap, error = await _attempt(self.p.snapshot(restored_b.project, self.b.probes))
            missing = _missing(snap, _names(self.b)) if snap else None
            self.record("destroy-is-scoped", snap is not None and not missing,
                        f"snapshot of the other project failed: {error}" if snap is None else
                        f"other project lost probes {missing}" if missing else "the other project is intact")
        _, error = await _attempt(self.p.destroy(project))
        self.record("destroy-is-idempotent", error is None,
                    f"second destroy failed: {error}" if error else "second destroy of the same project succeeded")

    async def after_destroy(self, project: str) -> tuple[bool, str]:
        snap, error = await _attempt(self.p.snapshot(project, self.a.probes))
        if isinstance(error, ProvisionerExitError):
            return True, "snapshot of a destroyed project was refused with a non-zero exit"
        if snap is None:
            return False, f"snapshot of a destroyed project failed uncleanly: {error}"
        s = snap.state
        leftovers = s.exists or s.evidence_documents or s.graph_nodes or s.graph_edges or _found(snap, _names(self.a))
        if leftovers:
            return False, (f"destroyed project still shows exists={s.exists}, {s.evidence_documents} documents, "
                           f"{s.graph_nodes} nodes, found {_found(snap, _names(self.a))}")
        return True, "snapshot of a destroyed project shows nothing"

    def check_strict_json(self) -> None:
        if self.p.malformed:
            self.record("responses-are-strict-json", False, "; ".join(self.p.malformed)[:2000])
        elif not self.p.parsed:
            self.record("responses-are-strict-json", False, "no response was parsed, so nothing was checked")
        else:
            self.record("responses-are-strict-json", True, f"all {len(self.p.parsed)} responses were single strict JSON objects")


async def run_checks(config: ProvisionerConfig, cases: tuple[CheckCase, CheckCase]) -> list[CheckResult]:
    """Run every conformance check against the provisioner `config` describes, restoring `cases`; see `check_provisioner`."""
    return await _Checks(_RecordingProvisioner(config), *cases).run()


def check_provisioner(
    argv: Sequence[str],
    fixture_root: Path,
    *,
    env: Mapping[str, str] | None = None,
    cases: tuple[CheckCase, CheckCase] | None = None,
    timeout_seconds: float = 60.0,
    output_limit_bytes: int = DEFAULT_OUTPUT_LIMIT_BYTES,
) -> list[CheckResult]:
    """Run every conformance check against the provisioner `argv` and return one result per check.

    Without `cases` the built-in fixture is written under `fixture_root/memtrial-check/`. `env`
    is added to the provisioner's environment. Only a `ProvisionerError` counts as the
    provisioner's failure; anything else is a bug here and propagates. Inside a running event
    loop, await `run_checks` instead.
    """
    fixture_root.mkdir(parents=True, exist_ok=True)
    config = ProvisionerConfig(argv=tuple(argv), fixture_root=fixture_root, env=dict(env or {}),
                               timeout_seconds=timeout_seconds, output_limit_bytes=output_limit_bytes)
    return asyncio.run(run_checks(config, cases if cases is not None else write_check_fixture(fixture_root)))


def format_results(results: Sequence[CheckResult]) -> str:
    """One line per check and a summary line; the summary says FAILED unless every check passed."""
    lines = [f"{'PASS' if r.passed else 'FAIL'}  {r.name}: {r.why}" for r in results]
    passed = sum(r.passed for r in results)
    verdict = "ok" if results and passed == len(results) else "FAILED"
    lines.append(f"{passed}/{len(results)} checks passed: {verdict}")
    return "\n".join(lines)
