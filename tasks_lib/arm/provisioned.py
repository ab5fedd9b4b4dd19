"""An attempt's memory through a memory system's provisioner (restore, snapshot, destroy).

This is how a paired task measures a third party's memory system instead of the embedded store:

1. The task's memories become one graph artifact in the reference provisioner's format (one node
   `m<i>` per memory, by manifest position; corrections after the rest, naming the memories they
   supersede by the rule `planting` applies), written to a runner-owned fixture folder, pinned by
   SHA-256 and verified by the client before the provisioner sees it. Its realm is the trial's.
2. `restore`, with the trial's realm as run identity (`run_identity`), makes it live; the
   variables its response names (a socket, a store file) are exported to the agent CLI and its
   hooks, then memtrial's own (realm, ablated lanes), which a provisioner cannot override. A
   confined provisioner's store or socket must be its own, inside its grants (`check_exports`):
   the runner opens it. A replica file is copied (`replica_copy`) before it is stripped and served.
3. `snapshot`, before the agent starts, runs one full-text probe per memory that should be served
   (every one but the superseded) and must find each; otherwise the attempt stops before an
   agent is paid, since the arm would not have the memory it claims.
4. `destroy` runs after the agent, also after any failure (`release`), and then the provisioner's
   sandbox ends, taking along anything destroy missed.

Every verb runs in the provisioner's own sandbox (`tasks_lib.memory.provisioner.jail`) unless the run
config says `unconfined: true`.

The ids a memory system prints in its provenance marker are its own, not the artifact's, so such
an attempt expects no particular ids: delivery is confirmed by a marked block in a non-agent
step, which, from a replica holding only this arm's memories, can come from nowhere else.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.contracts import IDENTIFIER_PATTERN, ArmArtifacts, ArtifactRef, MemorySpec, Turn
from tasks_lib.errors import MemtrialError
from tasks_lib.memory.env import SOCKET_ENV, STORE_ENV
from tasks_lib.memory.planting import supersession_plan
from tasks_lib.memory.provisioner.client import (
    Probe,
    ProbeResult,
    Provisioner,
    ProvisionerSpec,
    RestoreResponse,
    destroy_after_failure_sync,
    destroy_sync,
    make_provisioner,
    restore_sync,
    snapshot_sync,
)
from tasks_lib.memory.provisioner.jail import ProvisionerJail
from tasks_lib.settings import PROVISIONER_STATE
from tasks_lib.trees import sha256_file

FIXTURE_DIR = "provisioner-fixture"
"""Folder (in the attempt's scratch root) holding the artifact handed to the provisioner."""
ARTIFACT_NAME = "memories.graph.json"
"""The graph artifact's file name inside that folder."""
_IDENTIFIER = re.compile(IDENTIFIER_PATTERN)
ARM_NAME = "memory"
"""`graph_arm` of every restore: the arms with memory share one state; ablation is the agent's switch."""


class ProvisionedArmError(MemtrialError):
    """The provisioner restored the arm but its snapshot does not show the memory the arm needs."""


class ProvisionerExportError(ProvisionedArmError):
    """A restore exported a store or socket path the runner must not open (outside the provisioner's grants, not its own)."""


EXPORT_KINDS = {STORE_ENV: (stat.S_ISREG, "regular file"), SOCKET_ENV: (stat.S_ISSOCK, "socket")}
"""The exported paths the runner itself opens, and what each must be."""


@dataclass(frozen=True)
class LiveArm:
    """One attempt's restored memory, proven present: the provisioner holding it, its project, the env reaching it."""

    provisioner: Provisioner
    project: str
    env: dict[str, str]


def run_identity(realm: str) -> str:
    """The restore's run identity for a trial realm: the realm without its `trial:` prefix, or a digest
    of the realm when that is not a protocol identifier."""
    name = realm.partition(":")[2]
    return name if _IDENTIFIER.fullmatch(name) else "r-" + hashlib.sha256(realm.encode()).hexdigest()[:32]


def node_id(index: int) -> str:
    """Artifact id of the task's `index`-th memory."""
    return f"m{index}"


def write_artifact(specs: Sequence[MemorySpec], realm: str, folder: Path) -> ArmArtifacts:
    """Write the graph artifact of `specs` in `realm` into `folder` and pin it by SHA-256."""
    plan = supersession_plan(specs)
    plain = [{"id": node_id(i), "text": s.text, "kind": s.kind} for i, s in enumerate(specs) if s.kind != "correction"]
    corrections = [{"id": node_id(i), "text": specs[i].text, "kind": "correction",
                    "supersedes": [node_id(t) for t in targets]} for i, targets in plan.items()]
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ARTIFACT_NAME
    path.write_text(json.dumps({"realm": realm, "nodes": plain + corrections, "edges": []}, indent=2) + "\n", encoding="utf-8")
    return ArmArtifacts(arm=ARM_NAME, graph=ArtifactRef(path=ARTIFACT_NAME, sha256=sha256_file(path)))


PRESENCE_LANES = ("fulltext", "semantic")
"""Lanes a presence probe asks: a memory is present when its own text brings it back on either (a
vector-only system such as Chroma or mem0 has no full-text lane)."""


def presence_probes(specs: Sequence[MemorySpec]) -> tuple[Probe, ...]:
    """Per memory that should be served, one probe per PRESENCE_LANES: its own text must bring it back."""
    return tuple(Probe(name=f"present-{node_id(i)}-{lane}", lane=lane, query=s.text, expect_ids=(node_id(i),))  # type: ignore[arg-type]
                 for i, s in enumerate(specs) if s.kind != "superseded" for lane in PRESENCE_LANES)


def missing_memories(probes: Sequence[ProbeResult]) -> list[str]:
    """Memory ids no presence probe found, in order."""
    found: dict[str, bool] = {}
    for probe in probes:
        memory = probe.name.removeprefix("present-").rsplit("-", 1)[0]
        found[memory] = found.get(memory, False) or probe.found
    return [memory for memory, hit in found.items() if not hit]


def granted_folders(jail: ProvisionerJail) -> list[str]:
    """The folders a confined provisioner may export a path in: its serving folder, its state folder and
    its `write_paths` (resolved)."""
    folders = [jail.serve_dir, jail.state, *jail.write_paths]
    return [os.path.realpath(folder) for folder in folders if folder is not None]


def export_problem(name: str, value: str, jail: ProvisionerJail) -> str | None:
    """Why the runner must not open the path `value` a restore exported as `name` (None when it may): it
    must be absolute, hold no symlink, lie inside `granted_folders`, and be a regular file (store) or
    socket (socket) owned by the provisioner's uid."""
    test, kind = EXPORT_KINDS[name]
    resolved = os.path.realpath(value)
    if not os.path.isabs(value) or resolved != os.path.normpath(value):
        return "is not an absolute path free of symlinks"
    if not any(resolved.startswith(folder.rstrip("/") + "/") for folder in granted_folders(jail)):
        return "lies outside the provisioner's serving folder, state folder and write_paths"
    try:
        info = os.lstat(resolved)
    except OSError as error:
        return f"cannot be read ({error.strerror})"
    if not test(info.st_mode):
        return f"is not a {kind}"
    if jail.identity is not None and info.st_uid != jail.identity.uid:
        return f"is owned by uid {info.st_uid}, not the provisioner's uid {jail.identity.uid}"
    return None


def check_exports(provisioner: Provisioner, env: dict[str, str]) -> None:
    """Raise ProvisionerExportError when a confined provisioner's restore exported a store or socket path the
    runner must not open (`export_problem`); an unconfined provisioner is trusted with the host by its config."""
    jail = provisioner.jail
    for name in EXPORT_KINDS:
        value = env.get(name)
        if jail is not None and value and (problem := export_problem(name, value, jail)) is not None:
            raise ProvisionerExportError(f"provisioner {' '.join(provisioner.config.argv)}: restore exported {name}={value}, which "
                                         f"{problem}; export a path inside the serving folder (TMPDIR), the state folder or write_paths")


def replica_copy(store: str, dest: Path, owner: int | None = None) -> Path:
    """Copy the replica file `store` (and its `-wal` journal, if any) to the runner-owned `dest`, never following a
    symlink in its last component, and return `dest`: the runner strips and serves the copy, never editing the
    provisioner's file. With `owner` (a confined provisioner's uid) the opened file must be owned by it, so a
    folder swapped for a symlink after `check_exports` cannot hand the runner another file. Raises
    ProvisionerExportError when the file is not a regular file (of `owner`)."""
    for suffix in ("", "-wal"):
        try:
            source = os.open(store + suffix, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
        except FileNotFoundError:
            if suffix:
                continue
            raise ProvisionerExportError(f"{STORE_ENV}={store}: the replica file is gone; keep it until destroy") from None
        except OSError as error:
            raise ProvisionerExportError(f"{STORE_ENV}={store}{suffix}: cannot be read ({error.strerror})") from None
        with os.fdopen(source, "rb") as reader:
            info = os.fstat(reader.fileno())
            if not stat.S_ISREG(info.st_mode) or (owner is not None and info.st_uid != owner):
                raise ProvisionerExportError(f"{STORE_ENV}={store}{suffix}: is not a regular file of the provisioner's own; "
                                             "export its SQLite replica file")
            with open(str(dest) + suffix, "wb") as writer:
                shutil.copyfileobj(reader, writer)
    return dest


def provisioner_uid(provisioner: Provisioner) -> int | None:
    """The uid a confined provisioner runs as under a root runner (None otherwise)."""
    identity = provisioner.jail.identity if provisioner.jail is not None else None
    return identity.uid if identity is not None else None


def spec_provisioner(spec: ProvisionerSpec, fixture: Path) -> Provisioner:
    """The client of the run config's provisioner for one attempt's `fixture` folder: confined (its own
    sandbox, `tasks_lib.memory.provisioner.jail`) unless the config says `unconfined: true`; its state is the
    config's MEMTRIAL_PROVISIONER_STATE, else a `provisioner-state` folder beside the fixture."""
    state = PROVISIONER_STATE.text(spec.env)
    return make_provisioner(spec.argv, fixture, env=spec.env, pass_env=spec.pass_env, timeout_seconds=spec.timeout_seconds,
                            confined=not spec.unconfined, state=Path(state) if state else None,
                            read_paths=spec.read_paths, write_paths=spec.write_paths, network=spec.network)


def restore_closing(provisioner: Provisioner, task_id: str, artifacts: ArmArtifacts, identity: str) -> RestoreResponse:
    """`restore_sync`; when it fails, the provisioner's sandbox is ended too (a failed restore leaves nothing live)."""
    try:
        return restore_sync(provisioner, task_id, artifacts, identity)
    except BaseException:
        provisioner.close()
        raise


def restore_arm(spec: ProvisionerSpec, task_id: str, specs: Sequence[MemorySpec], realm: str, root: Path) -> LiveArm:
    """Steps 1-3 of the module: write, restore and prove the arm's memory; destroy it again if the proof fails.

    Raises ProvisionerError subclasses for a misbehaving provisioner and ProvisionedArmError when
    the snapshot misses a memory.
    """
    folder = root / FIXTURE_DIR
    artifacts = write_artifact(specs, realm, folder)
    provisioner = spec_provisioner(spec, folder)
    restored = restore_closing(provisioner, task_id, artifacts, run_identity(realm))
    try:
        check_exports(provisioner, dict(restored.env))
        shown = snapshot_sync(provisioner, restored.project, presence_probes(specs))
        missing = missing_memories(shown.probes)
        if not shown.state.exists or missing:
            raise ProvisionedArmError(
                f"provisioner {' '.join(spec.argv)}: project {restored.project!r} of task {task_id} "
                + ("is not live" if not shown.state.exists else f"does not return memories {missing} for their own text")
                + "; the arm would run without the memory it claims, so it was stopped before the agent")
    except BaseException as error:
        destroy_after_failure_sync(provisioner, restored.project, error)
        provisioner.close()
        raise
    return LiveArm(provisioner=provisioner, project=restored.project, env=dict(restored.env))


EVIDENCE_NAME = "feed.evidence.jsonl"
"""The experience feed's evidence corpus file inside the fixture folder."""


def write_feed_evidence(sessions: Sequence[tuple[str, Sequence[Turn]]], realm: str, folder: Path) -> ArmArtifacts:
    """Write the experience feed as the protocol's evidence corpus (one `{"id", "text"}` line per turn,
    ids `<session>#<turn>`, sessions and turns in order, texts verbatim) beside a graph artifact with no
    nodes (it names the realm), and pin both."""
    empty = write_artifact((), realm, folder)
    path = folder / EVIDENCE_NAME
    lines = [json.dumps({"id": f"{name}#{i}", "text": turn.text}, ensure_ascii=False, sort_keys=True)
             for name, turns in sessions for i, turn in enumerate(turns)]
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return empty.model_copy(update={"evidence": ArtifactRef(path=EVIDENCE_NAME, sha256=sha256_file(path))})


def restore_feed(spec: ProvisionerSpec, task_id: str, sessions: Sequence[tuple[str, Sequence[Turn]]], realm: str, root: Path) -> LiveArm:
    """The `feed` arm through a provisioner: restore receives the transcripts as its evidence corpus and
    builds its memory from them its own way. The snapshot must show the project live, but no turn is
    required to be kept: what a system's extraction keeps is part of what is measured.
    Raises ProvisionerError subclasses and ProvisionedArmError for a project that is not live."""
    folder = root / FIXTURE_DIR
    artifacts = write_feed_evidence(sessions, realm, folder)
    provisioner = spec_provisioner(spec, folder)
    restored = restore_closing(provisioner, task_id, artifacts, run_identity(realm))
    try:
        check_exports(provisioner, dict(restored.env))
        shown = snapshot_sync(provisioner, restored.project, ())
        if not shown.state.exists:
            raise ProvisionedArmError(f"provisioner {' '.join(spec.argv)}: project {restored.project!r} of task {task_id} is not "
                                      "live after restoring its experience feed; stopped before the agent")
    except BaseException as error:
        destroy_after_failure_sync(provisioner, restored.project, error)
        provisioner.close()
        raise
    return LiveArm(provisioner=provisioner, project=restored.project, env=dict(restored.env))


def release(provisioner: Provisioner, project: str) -> None:
    """Step 4: destroy the project, then end the provisioner's sandbox (also when destroy fails: whatever
    destroy missed, a server still running, dies with it)."""
    try:
        destroy_sync(provisioner, project)
    finally:
        provisioner.close()
