"""The preparation phase: build from git objects, redact, certify; one pure function per corpus."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tasks_lib.artifacts import ArtifactStore
from tasks_lib.contracts import PreparedCorpus, TaskManifest, load_document
from tasks_lib.corpus.build import build_tree, reachable_repository, resolve_commit, resolve_tree
from tasks_lib.corpus.certify import certify, challenge_surface
from tasks_lib.corpus.packs import CorpusPack, open_corpus_pack, pack_label
from tasks_lib.corpus.redact import redact_tree
from tasks_lib.corpus.upstream import describe, fixture_origin
from tasks_lib.errors import CorpusError, MemtrialError

TASK_MANIFEST = "task.json"


def prepare_corpus(
    name: str,
    repository: str | Path,
    revision: str,
    *,
    subdir: str | None = None,
    challenge_texts: Mapping[str, str] | None = None,
    answer_phrases: Sequence[str] = (),
    runner_owned_names: Sequence[str] = (),
    keep_tree: Path | None = None,
) -> PreparedCorpus:
    """Build `revision` from git objects, redact it and certify the result with the challenge text.

    The tree is built in a temporary folder and removed afterwards unless `keep_tree` names a new
    folder to move it to. Raises the errors of build_tree and certify.
    """
    with tempfile.TemporaryDirectory(prefix="memtrial-prepare-") as tmp:
        tree = Path(tmp) / "tree"
        build = build_tree(repository, revision, tree, subdir)
        redaction = redact_tree(tree, build.corpus_id, listing=build.files)
        report = certify(tree, challenge_texts=challenge_texts, answer_phrases=answer_phrases, runner_owned_names=runner_owned_names)
        if keep_tree is not None:
            if keep_tree.exists():
                raise CorpusError(f"{keep_tree}: already exists; choose a new folder for the prepared tree")
            shutil.move(str(tree), keep_tree)
    return PreparedCorpus(name=name, build=build, redaction=redaction, certification=report)


def find_task_manifests(tasks_root: Path) -> list[Path]:
    """Every `<task>/task.json` under `tasks_root`, sorted; an empty or missing root is an error."""
    if not tasks_root.is_dir():
        raise CorpusError(f"{tasks_root}: no task corpus folder here; pass --tasks-root")
    manifests = sorted(tasks_root.glob(f"*/{TASK_MANIFEST}"))
    if not manifests:
        raise CorpusError(f"{tasks_root}: holds no */{TASK_MANIFEST}; a corpus with no task checks nothing")
    return manifests


def fixture_tree_oid(repo_root: Path, revision: str, subdir: str) -> tuple[str, str]:
    """(commit, tree id) of a fixture folder at `revision`: the identity the cache is keyed on."""
    with reachable_repository(repo_root) as repo:
        commit = resolve_commit(repo, revision, str(repo_root))
        return commit, resolve_tree(repo, commit, subdir, str(repo_root))


def prepare_task(repo_root: Path, revision: str, manifest: Path) -> PreparedCorpus:
    """Prepare one bundled task: its committed fixture (an upstream task's composed fixture), certified against its own instruction and answer terms."""
    task = load_document(manifest, TaskManifest)
    texts, phrases, wiring = challenge_surface(task)
    task_subdir = manifest.parent.resolve().relative_to(repo_root.resolve()).as_posix()
    origin = fixture_origin(repo_root, revision, task_subdir, task)
    return prepare_corpus(
        task.task_id,
        origin.repo,
        origin.commit,
        subdir=origin.subdir,
        challenge_texts=texts,
        answer_phrases=phrases,
        runner_owned_names=wiring,
    )



def prepare_packed_task(store: ArtifactStore, pack: CorpusPack, task_folder: str) -> PreparedCorpus:
    """`prepare_task` on the task folder `task_folder` of a corpus pack (fetched from `store` once per
    machine), so a process that has only the artifact root prepares it. A fixture built from the pack
    names the pack (`pack_label`) as its repository, not this machine's pack cache."""
    checkout = open_corpus_pack(store, pack)
    prepared = prepare_task(checkout, pack.commit, checkout / pack.tasks_subdir / task_folder / TASK_MANIFEST)
    source = prepared.build.source
    if source.repository != str(checkout):
        return prepared  # an upstream task's composed fixture: built from the upstream cache
    build = prepared.build.model_copy(update={"source": source.model_copy(update={"repository": pack_label(pack)})})
    return prepared.model_copy(update={"build": build})


@dataclass(frozen=True)
class UpstreamFetch:
    """One upstream task's source, fetched (or found in the cache) and composed, or why not."""

    task_id: str
    source: str
    fixture_commit: str | None
    error: str | None


def fetch_upstream_sources(repo_root: Path, revision: str, tasks_root: Path) -> list[UpstreamFetch]:
    """Fetch and compose the pinned source of every upstream task under `tasks_root` at `revision` into
    this machine's cache (set-up: the one place a run's releases are downloaded); one entry per upstream
    task, errors included."""
    out = []
    for manifest in find_task_manifests(tasks_root):
        task = load_document(manifest, TaskManifest)
        if task.upstream is None:
            continue
        task_subdir = manifest.parent.resolve().relative_to(repo_root.resolve()).as_posix()
        try:
            origin = fixture_origin(repo_root, revision, task_subdir, task, fetch=True)
            out.append(UpstreamFetch(task.task_id, describe(task.upstream), origin.commit, None))
        except MemtrialError as error:
            out.append(UpstreamFetch(task.task_id, describe(task.upstream), None, str(error)))
    return out
