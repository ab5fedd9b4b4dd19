"""Pinned upstream sources: a task's fixture built on a real project's released source.

A task may name an `upstream` source in its manifest: a PyPI sdist or an npm tarball (name,
version, SHA-256) or a git commit (URL and full id). Its `fixture/` folder then holds only the
task's small overlay. `fixture_origin` gives the git repository, commit and folder a fixture is
built from, so every builder (`build_workspace`, `prepare_task`, the arms' workspaces) builds an
upstream task from git objects exactly as it builds any other fixture:

1. the archive is fetched once into the cache (`archives/sha256/<digest>`, content-addressed), its
   SHA-256 checked against the pin before it is kept, and re-checked whenever it is read;
2. it is unpacked (regular files and folders only, the one top folder stripped) and committed into
   the cache's bare git repository (`git/`, ref `refs/upstream/<digest>`); a git source is fetched
   into the same repository and must have exactly the pinned commit id;
3. the composed commit is that tree under `fixture/`, less the manifest's `exclude` paths, with the
   task's overlay (read from the task repository's git objects) written over it. It is keyed on
   the pin and the overlay's tree id, so the same task gives the same fixture tree on any machine.

Only set-up downloads (`memtrial corpus fetch`, and `memtrial task check` for the task it checks:
`fetch=True`); everything else composes from what the cache already holds and refuses a missing
release with `UpstreamNotFetched`, which names `memtrial corpus fetch`. Runs never fetch: the flow
composes every upstream fixture from this machine's cache and publishes it inside the corpus pack
(`PACKED_FIXTURES/<compose key>` in the pack's commit, `tasks_lib.corpus.packs`); a fixture read
from such a commit comes from its own git objects, so a worker needs neither the cache nor the network.

The cache is per machine, outside any artifact root: `$MEMTRIAL_UPSTREAM_CACHE`, else
`$XDG_CACHE_HOME/memtrial/upstream`, else `~/.cache/memtrial/upstream` (see `upstream_cache_root`).
A lock file serialises fetches and composition between threads and processes. Downloads use
`$MEMTRIAL_PYPI_INDEX` (a PEP 503 simple index, default PyPI's) and `$MEMTRIAL_NPM_REGISTRY` (default
npm's); every network wait is bounded (`$MEMTRIAL_FETCH_TIMEOUT`, seconds), so a machine without
network fails with one error naming the task, the source and what to do.
"""

from __future__ import annotations

import fcntl
import hashlib
import io
import json
import os
import pwd
import re
import subprocess
import tarfile
import tempfile
import urllib.error
import urllib.parse
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path, PurePosixPath

from tasks_lib.contracts import GitCommit, NpmTarball, PypiSdist, TaskManifest, check_rel_path
from tasks_lib.corpus.build import build_tree, reachable_repository, resolve_commit, resolve_tree
from tasks_lib.errors import CorpusError
from tasks_lib.settings import FETCH_TIMEOUT, NPM_REGISTRY, PYPI_INDEX, UPSTREAM_CACHE
from tasks_lib.trees import sha256_bytes

Upstream = PypiSdist | NpmTarball | GitCommit

DEFAULT_PYPI_INDEX = "https://pypi.org/simple"
DEFAULT_NPM_REGISTRY = "https://registry.npmjs.org"
DEFAULT_FETCH_TIMEOUT = 30.0
MAX_ARCHIVE_BYTES = 64 * 1024 * 1024
"""A larger archive is refused: a task's upstream is a small library, not a monorepo."""
FIXTURE_FOLDER = "fixture"
"""Folder of the composed commit that holds the fixture."""
PACKED_FIXTURES = ".memtrial-upstream"
"""Folder of a corpus pack's commit holding each upstream task's composed fixture tree, named by its compose key."""
PACK_MESSAGE = "memtrial corpus pack of "
"""How a corpus pack's commit message starts (`tasks_lib.corpus.packs`): the only commits whose packed fixtures are used."""
CACHE_ENV = UPSTREAM_CACHE.name
FETCH_COMMAND = "memtrial corpus fetch"
"""The set-up command that fills the cache (named in every refusal of a missing release)."""
COMPOSE_VERSION = "memtrial-upstream-compose/1"
"""Bumped when composition changes, so cached composed commits are rebuilt."""
SDIST_SUFFIXES = (".tar.gz", ".zip")
_COMMIT_ENV = {
    "GIT_AUTHOR_NAME": "memtrial upstream", "GIT_AUTHOR_EMAIL": "upstream@memtrial.invalid",
    "GIT_COMMITTER_NAME": "memtrial upstream", "GIT_COMMITTER_EMAIL": "upstream@memtrial.invalid",
    "GIT_AUTHOR_DATE": "1970-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "1970-01-01T00:00:00Z",
}
"""Fixed identity and dates: a composed commit's id depends on its content alone."""


class UpstreamError(CorpusError):
    """An upstream source cannot be fetched, differs from its pin, or cannot be unpacked or composed."""


class UpstreamNotFetched(UpstreamError):
    """A pinned release is not in this machine's upstream cache, and this command does not download."""


@dataclass(frozen=True)
class FixtureOrigin:
    """Where a task's fixture is built from: a git repository, a commit and the fixture's folder in it."""

    repo: Path
    commit: str
    subdir: str


# --------------------------------------------------------------------------- naming and settings


def describe(source: Upstream) -> str:
    """One-line name of a source for messages: `pypi sdist six==1.16.0 (sha256 1e61c3…)`."""
    if isinstance(source, GitCommit):
        return f"git {source.url} at {source.commit[:12]}"
    registry = "pypi sdist" if isinstance(source, PypiSdist) else "npm tarball"
    return f"{registry} {source.name}=={source.version} (sha256 {source.sha256[:12]}…)"


def upstream_cache_root() -> Path:
    """This machine's cache of pinned releases, outside every artifact root: $MEMTRIAL_UPSTREAM_CACHE, else
    $XDG_CACHE_HOME/memtrial/upstream, else ~/.cache/memtrial/upstream (HOME, or the user's home in
    the password database when HOME is unset, empty or relative, as under some CI runners and containers).

    Raises UpstreamError naming MEMTRIAL_UPSTREAM_CACHE when none of these gives an absolute folder."""
    explicit = UPSTREAM_CACHE.text()
    if explicit:
        return Path(explicit).resolve()
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if os.path.isabs(xdg):
        return Path(xdg) / "memtrial" / "upstream"
    home = os.environ.get("HOME", "")
    if not os.path.isabs(home) or home == "/":
        try:
            home = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            home = ""
    if not os.path.isabs(home) or home == "/":
        raise UpstreamError(f"no home folder for uid {os.getuid()} (HOME={os.environ.get('HOME', '')!r}) to keep the upstream "
                            f"cache in; set {CACHE_ENV} to a writable folder and run `{FETCH_COMMAND}`")
    return Path(home) / ".cache" / "memtrial" / "upstream"


def fetch_timeout() -> float:
    """Seconds one download (or git fetch) may take: $MEMTRIAL_FETCH_TIMEOUT, default 30."""
    raw = FETCH_TIMEOUT.text()
    try:
        value = float(raw) if raw else DEFAULT_FETCH_TIMEOUT
    except ValueError:
        raise UpstreamError(f"{FETCH_TIMEOUT.name}={raw!r} is not a number of seconds; set e.g. 30") from None
    if value <= 0:
        raise UpstreamError(f"{FETCH_TIMEOUT.name}={raw!r} must be positive; set e.g. 30")
    return value


def _normalized(name: str) -> str:
    """PEP 503 normal form of a project name."""
    return re.sub(r"[-_.]+", "-", name).lower()


# --------------------------------------------------------------------------- download


def _http_get(url: str, what: str) -> bytes:
    """GET `url` (at most MAX_ARCHIVE_BYTES, within the fetch timeout); UpstreamError saying why not."""
    request = urllib.request.Request(url, headers={"User-Agent": "memtrial-upstream/1"})
    try:
        with urllib.request.urlopen(request, timeout=fetch_timeout()) as response:  # noqa: S310 (callers pass http(s) URLs only)
            data = response.read(MAX_ARCHIVE_BYTES + 1)
    except urllib.error.HTTPError as error:
        raise UpstreamError(f"{what}: {url} answered HTTP {error.code}; check the name and version") from None
    except (urllib.error.URLError, TimeoutError, OSError) as error:
        reason = getattr(error, "reason", error)
        raise UpstreamError(f"{what}: cannot reach {url} ({reason}); check the network, or point "
                            "MEMTRIAL_PYPI_INDEX / MEMTRIAL_NPM_REGISTRY at a reachable mirror") from None
    if len(data) > MAX_ARCHIVE_BYTES:
        raise UpstreamError(f"{what}: {url} is larger than {MAX_ARCHIVE_BYTES} bytes; pin a smaller package")
    return data


def _checked_url(url: str, what: str) -> str:
    if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
        raise UpstreamError(f"{what}: {url!r} is not an http(s) URL; set the index or registry to one")
    return url


class _Links(HTMLParser):
    """The `<a href>` targets of a PEP 503 simple-index page."""

    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self.hrefs += [value for key, value in attrs if key == "href" and value]


def _sdist_urls(source: PypiSdist, what: str) -> list[str]:
    """Candidate sdist URLs of the pinned release on the simple index, a hash-matching link first."""
    index = PYPI_INDEX.text(default=DEFAULT_PYPI_INDEX)
    page = _checked_url(f"{index.rstrip('/')}/{_normalized(source.name)}/", what)
    parser = _Links()
    parser.feed(_http_get(page, what).decode("utf-8", errors="replace"))
    matches: list[str] = []
    others: list[str] = []
    for href in parser.hrefs:
        url, _, fragment = urllib.parse.urljoin(page, href).partition("#")
        if urllib.parse.urlsplit(url).scheme not in ("http", "https"):
            continue
        filename = urllib.parse.unquote(url.rsplit("/", 1)[-1])
        stem = next((filename[: -len(s)] for s in SDIST_SUFFIXES if filename.endswith(s)), None)
        if stem is None:
            continue
        name, _, version = stem.rpartition("-")
        if _normalized(name) == _normalized(source.name) and version == source.version:
            (matches if fragment == f"sha256={source.sha256}" else others).append(url)
    if not matches and not others:
        raise UpstreamError(f"{what}: the index {index} lists no sdist of {source.name} {source.version}; "
                            "check the name and version (pip download --no-binary :all: --no-deps NAME==VERSION)")
    return matches + others


def _archive_urls(source: PypiSdist | NpmTarball, what: str) -> list[str]:
    if isinstance(source, PypiSdist):
        return _sdist_urls(source, what)
    registry = NPM_REGISTRY.text(default=DEFAULT_NPM_REGISTRY).rstrip("/")
    basename = source.name.rpartition("/")[2]
    return [_checked_url(f"{registry}/{source.name}/-/{basename}-{source.version}.tgz", what)]


def fetch_archive(source: PypiSdist | NpmTarball, cache: Path, what: str) -> Path:
    """The pinned archive in the cache, downloaded and verified first if it is not there yet.

    Raises UpstreamError when it cannot be downloaded or no download has the pinned SHA-256; a cached
    file whose digest changed is deleted and downloaded again.
    """
    path = cache / "archives" / "sha256" / source.sha256
    if path.is_file():
        if sha256_bytes(path.read_bytes()) == source.sha256:
            return path
        path.unlink()
    seen = []
    for url in _archive_urls(source, what):
        data = _http_get(url, what)
        digest = sha256_bytes(data)
        if digest == source.sha256:
            path.parent.mkdir(parents=True, exist_ok=True)
            partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
            partial.write_bytes(data)
            os.replace(partial, path)
            return path
        seen.append(f"{url} has sha256 {digest}")
    raise UpstreamError(f"{what}: digest mismatch: {'; '.join(seen)}, but task.json pins {source.sha256}; "
                        "re-check the release and re-pin upstream.sha256 only if the new archive is the one you reviewed")


# --------------------------------------------------------------------------- unpack


def _strip_top(names: list[str], what: str) -> str:
    """The single top folder every member lies in (`package/`, `name-1.0/`)."""
    tops = {n.split("/", 1)[0] for n in names if n.strip("/")}
    if len(tops) != 1:
        raise UpstreamError(f"{what}: the archive has {len(tops)} top-level entries, not one folder; it is not an sdist or npm tarball")
    return tops.pop()


def _member_path(name: str, top: str, what: str) -> str | None:
    """The member's path inside the top folder, or None for the folder itself; refuses unsafe paths."""
    rest = name.strip("/").split("/", 1)
    if len(rest) == 1 or rest[0] != top or not rest[1].strip("/"):
        return None
    rel = rest[1].rstrip("/")
    try:
        return check_rel_path(rel)
    except ValueError as error:
        raise UpstreamError(f"{what}: archive member {name!r} is unsafe ({error}); refusing to unpack it") from None


def _write_member(dest: Path, rel: str, data: bytes, executable: bool) -> None:
    target = dest / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    target.write_bytes(data)
    target.chmod(0o755 if executable else 0o644)


def unpack_archive(archive: Path, dest: Path, what: str) -> int:
    """Unpack a .tar.gz/.tgz or .zip into `dest` (top folder stripped); return the files written.

    Only regular files and folders are unpacked; a link, device or path leaving the tree is an
    UpstreamError naming the member.
    """
    data = archive.read_bytes()
    count = 0
    if data[:2] == b"\x1f\x8b":
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
            members = tar.getmembers()
            top = _strip_top([m.name for m in members], what)
            for member in members:
                rel = _member_path(member.name, top, what)
                if rel is None or member.isdir():
                    continue
                if not member.isfile():
                    raise UpstreamError(f"{what}: archive member {member.name!r} is a link or special file; only files are unpacked")
                reader = tar.extractfile(member)
                assert reader is not None
                _write_member(dest, rel, reader.read(), bool(member.mode & 0o111))
                count += 1
        return count
    if data[:4] == b"PK\x03\x04":
        with zipfile.ZipFile(io.BytesIO(data)) as zipped:
            infos = zipped.infolist()
            top = _strip_top([i.filename for i in infos], what)
            for info in infos:
                rel = _member_path(info.filename, top, what)
                if rel is None or info.is_dir():
                    continue
                if (info.external_attr >> 16) & 0o170000 == 0o120000:
                    raise UpstreamError(f"{what}: archive member {info.filename!r} is a symlink; only files are unpacked")
                _write_member(dest, rel, zipped.read(info), bool((info.external_attr >> 16) & 0o111))
                count += 1
        return count
    raise UpstreamError(f"{what}: {archive.name} is neither a gzip tarball nor a zip archive")


# --------------------------------------------------------------------------- the cache repository


def _git(repo: Path, *args: str, input: bytes | None = None, env: dict[str, str] | None = None,
         timeout: float | None = None) -> subprocess.CompletedProcess[bytes]:
    full = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1", **(env or {})}
    return subprocess.run(["git", "--git-dir", str(repo), *args], input=input, capture_output=True, env=full,
                          check=False, timeout=timeout)


def _git_out(repo: Path, *args: str, what: str, input: bytes | None = None, env: dict[str, str] | None = None) -> str:
    done = _git(repo, *args, input=input, env=env)
    if done.returncode != 0:
        raise UpstreamError(f"{what}: git {args[0]} failed in the upstream cache {repo}: "
                            f"{done.stderr.decode(errors='replace').strip()[-300:]}; delete {repo.parent} to rebuild it")
    return done.stdout.decode().strip()


def _cache_repo(cache: Path) -> Path:
    repo = cache / "git"
    if not (repo / "HEAD").is_file():
        repo.mkdir(parents=True, exist_ok=True)
        done = subprocess.run(["git", "init", "--bare", "-q", str(repo)], capture_output=True, check=False)
        if done.returncode != 0:
            raise UpstreamError(f"{repo}: cannot create the upstream cache repository: {done.stderr.decode(errors='replace').strip()}")
    return repo


@contextmanager
def _cache_lock(cache: Path) -> Iterator[None]:
    """Hold the cache's lock file (threads and processes alike) while fetching or composing."""
    cache.mkdir(parents=True, exist_ok=True)
    with open(cache / "lock", "a+b") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _has_commit(repo: Path, oid: str) -> bool:
    return _git(repo, "cat-file", "-e", f"{oid}^{{commit}}").returncode == 0


def _index_files(repo: Path, root: Path, files: list[tuple[str, bool, bool]], prefix: str, what: str) -> list[str]:
    """`git update-index --index-info` lines for `files` (rel, executable, symlink) under `root`, blobs written."""
    regular = [rel for rel, _, link in files if not link]
    oids = _git_out(repo, "hash-object", "-w", "--no-filters", "--stdin-paths",
                    input="".join(f"{root / rel}\n" for rel in regular).encode(), what=what).split() if regular else []
    by_rel = dict(zip(regular, oids))
    lines = []
    for rel, executable, link in files:
        if link:
            oid = _git_out(repo, "hash-object", "-w", "--stdin", input=os.readlink(root / rel).encode(), what=what)
            mode = "120000"
        else:
            oid, mode = by_rel[rel], "100755" if executable else "100644"
        lines.append(f"{mode} {oid}\t{prefix}{rel}")
    return lines


def _walk(root: Path) -> list[tuple[str, bool, bool]]:
    out = []
    for path in sorted(root.rglob("*")):
        if path.is_symlink() or path.is_file():
            link = path.is_symlink()
            out.append((path.relative_to(root).as_posix(), not link and bool(path.stat().st_mode & 0o111), link))
    return out


def _commit_tree(repo: Path, files_root: Path, parent: str | None, message: str, what: str) -> str:
    """Commit the files under `files_root` as a new root tree (deterministic ids); return the commit."""
    with tempfile.TemporaryDirectory(prefix="memtrial-upstream-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": tmp}
        lines = _index_files(repo, files_root, _walk(files_root), "", what)
        _git_out(repo, "update-index", "--add", "--index-info", input=("\n".join(lines) + "\n").encode(), env=env, what=what)
        tree = _git_out(repo, "write-tree", env=env, what=what)
    args = ["commit-tree", tree, "-m", message] + (["-p", parent] if parent else [])
    return _git_out(repo, *args, env=_COMMIT_ENV, what=what)


def not_fetched(what: str, cache: Path) -> UpstreamNotFetched:
    """The one-line refusal of a release missing from the cache: the task, the source and the set-up command."""
    return UpstreamNotFetched(f"{what}: not in the upstream cache {cache}; run `{FETCH_COMMAND}` once with the "
                              "network (set-up): runs never download")


def _archive_cached(source: PypiSdist | NpmTarball, cache: Path) -> bool:
    path = cache / "archives" / "sha256" / source.sha256
    return path.is_file() and sha256_bytes(path.read_bytes()) == source.sha256


def is_fetched(source: Upstream, cache: Path | None = None) -> bool:
    """Whether the pinned release is in the cache (committed, or its verified archive), so it can be composed
    offline. Only reads: creates nothing, downloads nothing."""
    cache = cache or upstream_cache_root()
    repo = cache / "git"
    if (repo / "HEAD").is_file():
        if isinstance(source, GitCommit):
            return _has_commit(repo, source.commit)
        if _git(repo, "rev-parse", "--verify", "--quiet", f"refs/upstream/sha256-{source.sha256}").returncode == 0:
            return True
    return not isinstance(source, GitCommit) and _archive_cached(source, cache)


def upstream_commit(source: Upstream, cache: Path, what: str, fetch: bool = False) -> str:
    """The cache repository's commit of the pinned source as released (committed if needed; downloaded
    only with `fetch`). Raises UpstreamNotFetched when it is not cached and `fetch` is False."""
    repo = _cache_repo(cache)
    if isinstance(source, GitCommit):
        if not fetch and not _has_commit(repo, source.commit):
            raise not_fetched(what, cache)
        return _fetch_git(repo, source, what)
    ref = f"refs/upstream/sha256-{source.sha256}"
    existing = _git(repo, "rev-parse", "--verify", "--quiet", ref)
    if existing.returncode == 0:
        return existing.stdout.decode().strip()
    if not fetch and not _archive_cached(source, cache):
        raise not_fetched(what, cache)
    archive = fetch_archive(source, cache, what)
    with tempfile.TemporaryDirectory(prefix="memtrial-upstream-unpack-") as tmp:
        if unpack_archive(archive, Path(tmp), what) == 0:
            raise UpstreamError(f"{what}: the archive holds no file")
        commit = _commit_tree(repo, Path(tmp), None, f"{describe(source)}\n", what)
    _git_out(repo, "update-ref", ref, commit, what=what)
    return commit


def _fetch_git(repo: Path, source: GitCommit, what: str) -> str:
    """Fetch the pinned commit of a git source into the cache repository; it must have exactly that id."""
    if not _has_commit(repo, source.commit):
        timeout = fetch_timeout()
        attempts = (["fetch", "--quiet", "--no-tags", "--depth=1", source.url, source.commit],
                    ["fetch", "--quiet", "--no-tags", source.url, f"+refs/*:refs/upstream-fetch/{source.commit}/*"])
        reasons = []
        for args in attempts:
            try:
                done = _git(repo, *args, timeout=timeout)
            except subprocess.TimeoutExpired:
                raise UpstreamError(f"{what}: fetching {source.url} took longer than {timeout:g} s; check the network "
                                    "or raise MEMTRIAL_FETCH_TIMEOUT") from None
            if done.returncode == 0 and _has_commit(repo, source.commit):
                break
            reasons.append(done.stderr.decode(errors="replace").strip().splitlines()[-1:] or ["the commit was not among the fetched objects"])
        else:
            raise UpstreamError(f"{what}: cannot fetch commit {source.commit} from {source.url} ({reasons[-1][0]}); "
                                "check the URL, the network and that the commit exists there")
    _git_out(repo, "update-ref", f"refs/upstream/git-{source.commit}", source.commit, what=what)
    return source.commit


# --------------------------------------------------------------------------- composition


def _compose_key(source: Upstream, overlay_tree: str) -> str:
    identity = json.dumps([COMPOSE_VERSION, source.model_dump(mode="json"), overlay_tree], sort_keys=True)
    return hashlib.sha256(identity.encode()).hexdigest()


def _compose(repo: Path, base: str, overlay_root: Path, exclude: tuple[str, ...], what: str) -> str:
    """A commit whose `fixture/` is `base`'s tree less `exclude`, with the files under `overlay_root` over it."""
    with tempfile.TemporaryDirectory(prefix="memtrial-upstream-index-") as tmp:
        env = {"GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_WORK_TREE": tmp}
        _git_out(repo, "read-tree", f"--prefix={FIXTURE_FOLDER}/", f"{base}^{{tree}}", env=env, what=what)
        listed = _git_out(repo, "ls-files", "-z", env=env, what=what).split("\0")
        removed = []
        for path in exclude:
            prefix = f"{FIXTURE_FOLDER}/{path.rstrip('/')}"
            hits = [p for p in listed if p == prefix or p.startswith(prefix + "/")]
            if not hits:
                raise UpstreamError(f"{what}: task.json upstream.exclude names {path!r}, which the upstream tree does not "
                                    "have; fix or drop the entry")
            removed += hits
        if removed:
            _git_out(repo, "update-index", "--force-remove", "-z", "--stdin", input="\0".join(removed).encode(), env=env, what=what)
        lines = _index_files(repo, overlay_root, _walk(overlay_root), f"{FIXTURE_FOLDER}/", what)
        shadowed = _shadowed_folders(listed, [line.split("\t", 1)[1] for line in lines])
        if shadowed:
            _git_out(repo, "update-index", "--force-remove", "-z", "--stdin", input="\0".join(shadowed).encode(), env=env, what=what)
        _git_out(repo, "update-index", "--add", "--index-info", input=("\n".join(lines) + "\n").encode(), env=env, what=what)
        tree = _git_out(repo, "write-tree", env=env, what=what)
    return _git_out(repo, "commit-tree", tree, "-p", base, "-m", f"task overlay: {what}\n", env=_COMMIT_ENV, what=what)


def _shadowed_folders(listed: list[str], overlay_paths: list[str]) -> list[str]:
    """Upstream entries the overlay replaces by kind: files under a path the overlay writes as a file,
    and a file where the overlay needs a folder."""
    files = set(overlay_paths)
    folders = {str(parent) for path in overlay_paths for parent in PurePosixPath(path).parents}
    return [p for p in listed if p in folders or any(str(parent) in files for parent in PurePosixPath(p).parents)]


def _packed_tree(project: Path, commit: str, path: str) -> bool:
    """Whether `commit` of the repository at `project` is a corpus pack's commit (no parent, the pack's
    message) holding a tree at `path`. Only a pack's fixtures are trusted without the cache: a source
    checkout's commit always composes from the verified release."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_CONFIG_NOSYSTEM": "1"}
    kind = subprocess.run(["git", "-C", str(project), "cat-file", "-t", f"{commit}:{path}"], capture_output=True, check=False, env=env)
    if kind.returncode != 0 or kind.stdout.strip() != b"tree":
        return False
    body = subprocess.run(["git", "-C", str(project), "cat-file", "commit", commit], capture_output=True, check=False, env=env)
    header, _, message = body.stdout.decode(errors="replace").partition("\n\n")
    return body.returncode == 0 and not any(line.startswith("parent ") for line in header.splitlines()) \
        and message.startswith(PACK_MESSAGE)


def packed_fixture_path(source: Upstream, overlay_tree: str) -> str:
    """Where a corpus pack's commit holds the composed fixture of `source` with the overlay tree `overlay_tree`."""
    return f"{PACKED_FIXTURES}/{_compose_key(source, overlay_tree)}"


def compose_fixture(repo_root: Path, commit: str, overlay_subdir: str, task_id: str, source: Upstream,
                    cache: Path | None = None, fetch: bool = False) -> FixtureOrigin:
    """The composed fixture of an upstream task (see the module docstring).

    When `commit` itself holds the composed tree (a corpus pack, `packed_fixture_path`), that is the
    origin: no cache, no network. Otherwise it is composed in the cache from the cached release,
    downloaded first only with `fetch`. Raises UpstreamNotFetched when the release is not cached and
    `fetch` is False; UpstreamError naming the task and the source when it cannot be fetched, differs
    from its pin, or cannot be unpacked; the errors of build_tree for the overlay.
    """
    what = f"task {task_id}: upstream {describe(source)}"
    with reachable_repository(repo_root) as project:
        resolved = resolve_commit(project, commit, str(repo_root))
        overlay_tree = resolve_tree(project, resolved, overlay_subdir, str(repo_root))
        packed = packed_fixture_path(source, overlay_tree)
        if _packed_tree(project, resolved, packed):
            return FixtureOrigin(repo=Path(repo_root), commit=resolved, subdir=packed)
    cache = cache or upstream_cache_root()
    key = _compose_key(source, overlay_tree)
    with _cache_lock(cache):
        repo = _cache_repo(cache)
        ref = f"refs/composed/{key}"
        known = _git(repo, "rev-parse", "--verify", "--quiet", ref)
        if known.returncode == 0:
            return FixtureOrigin(repo=repo, commit=known.stdout.decode().strip(), subdir=FIXTURE_FOLDER)
        base = upstream_commit(source, cache, what, fetch)
        with tempfile.TemporaryDirectory(prefix="memtrial-upstream-overlay-") as tmp:
            overlay_root = Path(tmp) / "overlay"
            build_tree(repo_root, resolved, overlay_root, subdir=overlay_subdir)
            composed = _compose(repo, base, overlay_root, source.exclude, what)
        _git_out(repo, "update-ref", ref, composed, what=what)
    return FixtureOrigin(repo=repo, commit=composed, subdir=FIXTURE_FOLDER)


def fixture_origin(repo_root: Path, commit: str, task_subdir: str, manifest: TaskManifest, cache: Path | None = None,
                   fetch: bool = False) -> FixtureOrigin:
    """Where the fixture of the task at `task_subdir` (in `repo_root` at `commit`) is built from:
    the task's own folder, or for an upstream task its composed fixture (`compose_fixture`)."""
    subdir = f"{task_subdir}/{manifest.fixture}"
    if manifest.upstream is None:
        return FixtureOrigin(repo=Path(repo_root), commit=commit, subdir=subdir)
    return compose_fixture(Path(repo_root), commit, subdir, manifest.task_id, manifest.upstream, cache, fetch)


def upstream_fixture_bytes(task_root: Path, manifest: TaskManifest, revision: str = "HEAD") -> int:
    """Bytes of every regular file of an upstream task's composed fixture at `revision` of the
    repository holding `task_root` (read from the tree listing; nothing is checked out)."""
    top = subprocess.run(["git", "-C", str(task_root), "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if top.returncode != 0:
        raise UpstreamError(f"{task_root}: not inside a git repository; upstream fixtures are built from git objects")
    repo_root = Path(top.stdout.strip())
    origin = fixture_origin(repo_root, revision, task_root.resolve().relative_to(repo_root.resolve()).as_posix(), manifest)
    listing = _git_out(origin.repo, "ls-tree", "-r", "-l", "-z", f"{origin.commit}:{origin.subdir}", what=f"task {manifest.task_id}")
    total = 0
    for record in listing.split("\0"):
        if record:
            mode, _kind, _oid, size = record.split("\t", 1)[0].split()
            total += int(size) if mode != "120000" else 0
    return total
