"""Corpus packs: a corpus revision's task tree as content-addressed git objects in the artifact store.

An arm may run on a machine that has only the installed package and the artifact root (an S3
bucket), never the checkout the flow read. So the flow publishes the tasks folder of the corpus
commit as a git pack of one synthetic commit (fixed author, date and message) whose tree holds
only `<tasks_subdir>/...`: the same task trees, so every fixture tree id and corpus id is
unchanged, and the same content always gives the same commit id, hence the same key
(`objects/corpus/<commit>.pack`). A worker fetches the pack once, indexes it (git re-hashes every
object, so a tampered pack cannot pass for the commit), checks that the commit's tasks tree is the
one the flow named, and materializes it into a local cache folder it re-uses for every arm.

The pack also carries every upstream task's composed fixture whose release this machine's upstream
cache holds (`tasks_lib.corpus.upstream`): its tree sits at `.memtrial-upstream/<compose key>` of the
pack's commit, where `compose_fixture` finds it, so a worker builds an upstream fixture from the pack's
own objects, with no upstream cache and no network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from pydantic import ValidationError

from tasks_lib.artifacts import ArtifactStore, check_key
from tasks_lib.contracts import ContractModel, GitOid, RelPath, TaskManifest
from tasks_lib.corpus.build import build_tree, resolve_tree
from tasks_lib.corpus.upstream import (
    PACK_MESSAGE,
    PACKED_FIXTURES,
    compose_fixture,
    is_fetched,
    packed_fixture_path,
)
from tasks_lib.errors import ArtifactNotFound, CorpusError
from tasks_lib.settings import ARTIFACT_ROOT, PACK_CACHE

PACKS = "objects/corpus"
"""Artifact folder of corpus packs: `objects/corpus/<commit>.pack`."""
PACK_CACHE_ENV = PACK_CACHE.name
_IDENTITY = {"GIT_AUTHOR_NAME": "memtrial", "GIT_AUTHOR_EMAIL": "memtrial@invalid", "GIT_AUTHOR_DATE": "@0 +0000",
             "GIT_COMMITTER_NAME": "memtrial", "GIT_COMMITTER_EMAIL": "memtrial@invalid", "GIT_COMMITTER_DATE": "@0 +0000"}


class CorpusPackError(CorpusError):
    """A corpus pack cannot be published, fetched or verified."""


class CorpusPack(ContractModel):
    """Where an arm's task files come from: a pack of git objects in the artifact store."""

    key: RelPath
    """Artifact key of the pack (`objects/corpus/<commit>.pack`)."""
    commit: GitOid
    """The pack's synthetic commit; its tree holds only `tasks_subdir`."""
    tasks_subdir: RelPath
    """The corpus folder inside the commit (the same path as in the source checkout)."""
    tasks_tree_oid: GitOid
    """Git tree id of `tasks_subdir`: the content the pack must hold."""


def _git(repo: Path, *args: str, env: dict[str, str] | None = None, input: bytes | None = None) -> bytes:
    done = subprocess.run(["git", "-C", str(repo), *args], input=input, capture_output=True, check=False,
                          env={**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})})
    if done.returncode != 0:
        raise CorpusPackError(f"{repo}: git {args[0]} failed: {done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def _wrap_tree(repo: Path, tree: str, subdir: str, env: dict[str, str]) -> str:
    """A root tree holding `tree` at `subdir` and nothing else."""
    for name in reversed(subdir.split("/")):
        tree = _git(repo, "mktree", env=env, input=f"040000 tree {tree}\t{name}\n".encode()).decode().strip()
    return tree


def _manifests(repo: Path, commit: str, tasks_subdir: str) -> list[tuple[str, TaskManifest]]:
    """(task folder, manifest) of every task folder of `tasks_subdir` at `commit` whose task.json is valid
    (an invalid one is the corpus invariants' to report, not the pack's)."""
    listing = _git(repo, "ls-tree", "-z", f"{commit}:{tasks_subdir}").decode().split("\0")
    folders = [entry.split("\t", 1)[1] for entry in listing if entry and entry.split()[1] == "tree"]
    if not folders:
        return []
    batch = _git(repo, "cat-file", "--batch", input="".join(f"{commit}:{tasks_subdir}/{f}/task.json\n" for f in folders).encode())
    out, at = [], 0
    for folder in folders:
        header_end = batch.index(b"\n", at)
        header = batch[at:header_end].split()
        at = header_end + 1
        if header[-1] == b"missing":
            continue
        size = int(header[2])
        body, at = batch[at:at + size], at + size + 1
        try:
            out.append((folder, TaskManifest.model_validate_json(body)))
        except ValidationError:
            continue
    return out


def _upstream_entries(repo: Path, commit: str, tasks_subdir: str) -> tuple[list[str], list[str]]:
    """(mktree lines of `PACKED_FIXTURES`, object folders holding them): the composed fixture of every
    upstream task whose release this machine's cache holds, composed offline."""
    lines, objects = [], []
    for folder, manifest in _manifests(repo, commit, tasks_subdir):
        if manifest.upstream is None or not is_fetched(manifest.upstream):
            continue
        origin = compose_fixture(repo, commit, f"{tasks_subdir}/{folder}/{manifest.fixture}", manifest.task_id, manifest.upstream)
        tree = resolve_tree(origin.repo, origin.commit, origin.subdir, str(origin.repo))
        overlay = resolve_tree(repo, commit, f"{tasks_subdir}/{folder}/{manifest.fixture}", str(repo))
        lines.append(f"040000 tree {tree}\t{packed_fixture_path(manifest.upstream, overlay).rsplit('/', 1)[1]}")
        objects.append(str(origin.repo / "objects"))
    return sorted(set(lines)), sorted(set(objects))


def publish_corpus_pack(store: ArtifactStore, repo: Path, commit: str, tasks_subdir: str) -> CorpusPack:
    """Pack `tasks_subdir` of `commit` in `repo`, with the composed upstream fixtures this machine's cache
    can build (see the module docstring), and store it (once: the key is its content's commit id).

    New objects go to a scratch object folder (the source repository and the upstream cache are only
    read). Raises CorpusPackError when git cannot build the pack, CorpusError when the folder is not in
    the commit, UpstreamError when a cached release cannot be composed.
    """
    tasks_tree = resolve_tree(repo, commit, tasks_subdir, str(repo))
    objects = Path(_git(repo, "rev-parse", "--path-format=absolute", "--git-common-dir").decode().strip()) / "objects"
    fixtures, upstream_objects = _upstream_entries(repo, commit, tasks_subdir)
    with tempfile.TemporaryDirectory(prefix="memtrial-pack-") as scratch:
        env = {"GIT_OBJECT_DIRECTORY": scratch, "GIT_ALTERNATE_OBJECT_DIRECTORIES": os.pathsep.join([str(objects), *upstream_objects]),
               **_IDENTITY}
        root = _wrap_tree(repo, tasks_tree, tasks_subdir, env)
        if fixtures:
            packed = _git(repo, "mktree", env=env, input=("\n".join(fixtures) + "\n").encode()).decode().strip()
            top = _git(repo, "ls-tree", root, env=env).decode()
            root = _git(repo, "mktree", env=env, input=f"{top}040000 tree {packed}\t{PACKED_FIXTURES}\n".encode()).decode().strip()
        pack_commit = _git(repo, "commit-tree", root, "-m", f"{PACK_MESSAGE}{tasks_subdir}", env=env).decode().strip()
        key = check_key(f"{PACKS}/{pack_commit}.pack")
        if not store.exists(key):
            listing = _git(repo, "rev-list", "--objects", pack_commit, env=env)
            store.put_bytes(key, _git(repo, "pack-objects", "--stdout", "-q", env=env, input=listing))
    return CorpusPack(key=key, commit=pack_commit, tasks_subdir=tasks_subdir, tasks_tree_oid=tasks_tree)


def pack_label(pack: CorpusPack) -> str:
    """How a result built from `pack` names its repository: the pack's artifact key, the same on every
    machine (never the local folder it was materialized in)."""
    return f"corpus pack {pack.key}"


def pack_cache_root() -> Path:
    """The local folder holding materialized packs (`MEMTRIAL_PACK_CACHE`, else one per user under the temp folder)."""
    configured = PACK_CACHE.text()
    return Path(configured) if configured else Path(tempfile.gettempdir()) / f"memtrial-packs-{os.getuid()}"


_opened: dict[tuple[Path, str], Path] = {}
_opened_lock = threading.Lock()


def _private_folder(folder: Path) -> Path:
    """`folder`, created owner-only; refuse one another user owns (it holds hidden tests and solutions)."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if folder.stat().st_uid != os.getuid():
        raise CorpusPackError(f"{folder}: the pack cache belongs to another user; set {PACK_CACHE_ENV} to a folder of your own")
    return folder


def open_corpus_pack(store: ArtifactStore, pack: CorpusPack) -> Path:
    """A local checkout of `pack`: a folder with `.git` holding the pack and the tasks folder built from it.

    Fetched and built once per machine (an atomic rename publishes it, so concurrent workers never see
    half a checkout). Raises CorpusPackError when the pack is missing from the artifact store or does
    not hold the commit and tasks tree it is named by.
    """
    cache = pack_cache_root()
    with _opened_lock:
        if (cache, pack.commit) in _opened:
            return _opened[(cache, pack.commit)]
    final = _private_folder(cache) / pack.commit
    if not final.is_dir():
        _materialize(store, pack, final)
    with _opened_lock:
        _opened[(cache, pack.commit)] = final
    return final


def _materialize(store: ArtifactStore, pack: CorpusPack, final: Path) -> None:
    try:
        data = store.get_bytes(pack.key)
    except ArtifactNotFound:
        raise CorpusPackError(f"{store.uri.rstrip('/')}/{pack.key}: the corpus pack is missing from the artifact root; "
                              f"the worker must use the flow's artifact root ({ARTIFACT_ROOT.name})") from None
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=final.parent))
    try:
        _git(staging, "init", "--quiet")
        _git(staging, "index-pack", "--stdin", input=data)
        try:
            found = resolve_tree(staging, pack.commit, pack.tasks_subdir, pack.key)
        except CorpusError:
            found = "not the commit"
        if found != pack.tasks_tree_oid:
            raise CorpusPackError(f"{store.uri.rstrip('/')}/{pack.key}: does not hold commit {pack.commit[:12]} with tasks tree "
                                  f"{pack.tasks_tree_oid[:12]} (found: {found[:14]}); the pack was replaced: delete it and "
                                  "rerun the flow to publish it again")
        (staging / pack.tasks_subdir).parent.mkdir(parents=True, exist_ok=True)
        build_tree(staging, pack.commit, staging / pack.tasks_subdir, subdir=pack.tasks_subdir)
        try:
            staging.rename(final)
        except OSError:
            if not final.is_dir():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
