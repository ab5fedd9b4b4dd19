"""Pinned upstream sources (tasks_lib.corpus.upstream): fetched once from a real index on 127.0.0.1,
verified against the pin, committed into git and composed with the task's overlay.

Every archive is built in tmp_path and served by `tests/upstream_index.PackageIndex`; the task
repositories are real git repositories; the end-to-end test runs the whole corpus check.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tarfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrepo import MakeRepo, git, write_files
from tasks_lib.contracts import GitCommit, NpmTarball, PypiSdist, TaskManifest
from tasks_lib.corpus.build import build_tree
from tasks_lib.corpus.key_lanes import measure_manifest_lanes
from tasks_lib.corpus.prepare import fetch_upstream_sources
from tasks_lib.corpus.tasks import check_corpus
from tasks_lib.corpus.upstream import (
    FIXTURE_FOLDER,
    UpstreamError,
    compose_fixture,
    upstream_cache_root,
)
from tasks_lib.trees import sha256_file, walk_files
from upstream_index import PackageIndex, serving, sha256, tar_gz

SDIST = tar_gz("tinyflag-1.0", {
    "tinyflag/__init__.py": "def parse(argv):\n    return {a.lstrip('-'): True for a in argv if a.startswith('--')}\n",
    "tests/test_flags.py": "import unittest\n",
    "README.md": "# tinyflag\n",
    "CHANGELOG.md": "1.0: first release\n",
})
TARBALL = tar_gz("package", {
    "index.js": "'use strict';\nmodule.exports = function label(name) { return 'user:' + name; };\n",
    "package.json": '{"name": "nicklabel", "version": "2.0.0", "main": "index.js"}\n',
    "README.md": "# nicklabel\n",
})
OVERLAY = {"tasks/t/fixture/tinyflag/__init__.py": "def parse(argv):\n    return {}\n", "tasks/t/fixture/NOTES.md": "ours\n"}


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[PackageIndex]:
    served = PackageIndex()
    monkeypatch.setenv("MEMTRIAL_PYPI_INDEX", served.url + "/simple")
    monkeypatch.setenv("MEMTRIAL_NPM_REGISTRY", served.url + "/npm")
    monkeypatch.setenv("MEMTRIAL_UPSTREAM_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("MEMTRIAL_FETCH_TIMEOUT", "2")
    with serving(served):
        yield served


def _sdist(index: PackageIndex, **changes: object) -> PypiSdist:
    digest = index.add_sdist("tinyflag", "1.0", SDIST)
    return PypiSdist.model_validate({"kind": "pypi-sdist", "name": "tinyflag", "version": "1.0", "sha256": digest, **changes})


def _files(origin_repo: Path, commit: str, subdir: str, dest: Path) -> dict[str, str]:
    build_tree(origin_repo, commit, dest, subdir=subdir)
    return {rel: (dest / rel).read_text() for rel in walk_files(dest)}


def test_fixture_is_the_released_tree_less_excludes_with_the_overlay_over_it(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path) -> None:
    """The built fixture is exactly upstream + overlay: an overlay file replaces upstream's, an excluded
    file is gone, every other released file is there byte for byte."""
    repo, commit = make_repo(OVERLAY)
    source = _sdist(index, exclude=["CHANGELOG.md"])
    origin = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    assert origin.subdir == FIXTURE_FOLDER
    files = _files(origin.repo, origin.commit, origin.subdir, tmp_path / "built")
    assert files == {
        "tinyflag/__init__.py": "def parse(argv):\n    return {}\n",
        "tests/test_flags.py": "import unittest\n",
        "README.md": "# tinyflag\n",
        "NOTES.md": "ours\n",
    }


def test_second_build_fetches_nothing_and_works_offline(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path) -> None:
    """Fetched once per cache: a second composition (same or another overlay) sends no request, and
    one made with the index gone still builds from the cache."""
    repo, commit = make_repo(OVERLAY)
    source = _sdist(index)
    first = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    sent = sum(index.requests.values())
    assert sent == 2  # the project page and the sdist
    again = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    assert again == first and sum(index.requests.values()) == sent
    index.files.clear()
    write_files(repo, {"tasks/t/fixture/NOTES.md": "changed\n"})
    git(repo, "commit", "-qam", "overlay changed")
    changed = compose_fixture(repo, git(repo, "rev-parse", "HEAD"), "tasks/t/fixture", "t", source, fetch=True)
    assert changed.commit != first.commit and sum(index.requests.values()) == sent
    assert _files(changed.repo, changed.commit, changed.subdir, tmp_path / "b")["NOTES.md"] == "changed\n"


def test_same_task_gives_the_same_fixture_tree_in_any_cache(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path) -> None:
    """The composed commit (so the corpus id) depends on the pin and the overlay alone, not on the machine's cache."""
    repo, commit = make_repo(OVERLAY)
    source = _sdist(index)
    one = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, tmp_path / "cache-a", fetch=True)
    two = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, tmp_path / "cache-b", fetch=True)
    assert one.commit == two.commit and one.repo != two.repo


def test_digest_mismatch_is_one_clear_error_and_nothing_is_cached(index: PackageIndex, make_repo: MakeRepo) -> None:
    """A release whose bytes differ from the pin (a re-uploaded or tampered archive) is refused, naming
    the task, the source, both digests and what to do; no archive or commit is kept."""
    repo, commit = make_repo(OVERLAY)
    index.add_sdist("tinyflag", "1.0", SDIST, with_hash=False)
    wrong = PypiSdist(kind="pypi-sdist", name="tinyflag", version="1.0", sha256="0" * 64)
    with pytest.raises(UpstreamError) as caught:
        compose_fixture(repo, commit, "tasks/t/fixture", "t-mismatch", wrong, fetch=True)
    message = str(caught.value)
    assert "task t-mismatch" in message and "pypi sdist tinyflag==1.0" in message
    assert "digest mismatch" in message and "0" * 64 in message and "re-pin" in message
    archives = upstream_cache_root() / "archives" / "sha256"
    assert not archives.exists() or list(archives.iterdir()) == []


def test_tampered_cached_archive_is_never_used(index: PackageIndex, make_repo: MakeRepo) -> None:
    """A cached archive whose bytes no longer match its digest is dropped and fetched again, not unpacked."""
    from tasks_lib.corpus.upstream import fetch_archive

    source = _sdist(index)
    path = fetch_archive(source, upstream_cache_root(), "t")
    path.write_bytes(b"tampered")
    again = fetch_archive(source, upstream_cache_root(), "t")
    assert sha256_file(again) == source.sha256
    assert index.requests["/files/tinyflag-1.0.tar.gz"] == 2


def test_unreachable_index_fails_with_a_clear_error(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No network: a refused connection is one error naming the task, the source and the setting to change."""
    closed = PackageIndex()
    url = closed.url
    closed.server.server_close()
    monkeypatch.setenv("MEMTRIAL_PYPI_INDEX", url + "/simple")
    monkeypatch.setenv("MEMTRIAL_UPSTREAM_CACHE", str(tmp_path / "cache"))
    repo, commit = make_repo(OVERLAY)
    source = PypiSdist(kind="pypi-sdist", name="tinyflag", version="1.0", sha256="1" * 64)
    with pytest.raises(UpstreamError, match=r"task t: upstream pypi sdist tinyflag==1\.0 .*cannot reach .*MEMTRIAL_PYPI_INDEX"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)


def test_silent_index_times_out_instead_of_hanging(index: PackageIndex, make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """A host that accepts and never answers (a black-holed network) fails within the fetch timeout."""
    monkeypatch.setenv("MEMTRIAL_FETCH_TIMEOUT", "1")
    repo, commit = make_repo(OVERLAY)
    source = _sdist(index)
    index.hang = True
    started = time.monotonic()
    with pytest.raises(UpstreamError, match="cannot reach"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    assert time.monotonic() - started < 10


def _hostile_tarball(member: tarfile.TarInfo) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        info = tarfile.TarInfo("package/index.js")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"1\n"))
        tar.addfile(member, io.BytesIO(b"x\n") if member.isfile() else None)
    return buffer.getvalue()


def _member(name: str, kind: bytes = tarfile.REGTYPE, link: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.linkname, info.size = kind, link, 2 if kind == tarfile.REGTYPE else 0
    return info


@pytest.mark.parametrize("member", [
    _member("package/../../escaped.js"),
    _member("package/link.js", tarfile.SYMTYPE, "/etc/passwd"),
    _member("package/hard.js", tarfile.LNKTYPE, "package/index.js"),
    _member("other/index.js"),
], ids=["dotdot-path", "symlink", "hardlink", "second-top-folder"])
def test_hostile_archive_is_refused_and_writes_nothing_outside(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path,
                                                               member: tarfile.TarInfo) -> None:
    """A published tarball with a path leaving the tree, a link or a second top folder is refused by name."""
    repo, commit = make_repo(OVERLAY)
    digest = index.add_tarball("evil", "1.0.0", _hostile_tarball(member))
    source = NpmTarball(kind="npm-tarball", name="evil", version="1.0.0", sha256=digest)
    with pytest.raises(UpstreamError, match="npm tarball evil==1.0.0"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    assert not (tmp_path / "escaped.js").exists() and not (tmp_path / "cache" / "escaped.js").exists()


def test_overlay_may_replace_a_folder_with_a_file_and_a_file_with_a_folder(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path) -> None:
    """The overlay wins over the release whatever the kinds: a file where upstream has a folder and a
    folder where upstream has a file leave no trace of upstream's entry (no git index clash)."""
    repo, commit = make_repo({"tasks/t/fixture/tests": "now a file\n", "tasks/t/fixture/README.md/index.md": "now a folder\n"})
    origin = compose_fixture(repo, commit, "tasks/t/fixture", "t", _sdist(index), fetch=True)
    assert _files(origin.repo, origin.commit, origin.subdir, tmp_path / "built") == {
        "tinyflag/__init__.py": "def parse(argv):\n    return {a.lstrip('-'): True for a in argv if a.startswith('--')}\n",
        "tests": "now a file\n",
        "README.md/index.md": "now a folder\n",
        "CHANGELOG.md": "1.0: first release\n",
    }


def test_index_link_to_a_local_file_is_never_followed(index: PackageIndex, make_repo: MakeRepo, tmp_path: Path) -> None:
    """A hostile index page pointing the sdist at a file:// URL cannot make the fetcher read a local file."""
    local = tmp_path / "tinyflag-1.0.tar.gz"
    local.write_bytes(SDIST)
    index.files["/simple/tinyflag/"] = f'<a href="{local.as_uri()}">tinyflag-1.0.tar.gz</a>'.encode()
    repo, commit = make_repo(OVERLAY)
    source = PypiSdist(kind="pypi-sdist", name="tinyflag", version="1.0", sha256=sha256(SDIST))
    with pytest.raises(UpstreamError, match="lists no sdist of tinyflag 1.0"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)


def test_exclude_naming_nothing_is_an_error(index: PackageIndex, make_repo: MakeRepo) -> None:
    """A stale exclude entry (the release no longer has that file) is named, not silently ignored."""
    repo, commit = make_repo(OVERLAY)
    with pytest.raises(UpstreamError, match="exclude names 'docs'"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", _sdist(index, exclude=["docs"]), fetch=True)


def test_git_source_must_have_the_pinned_commit(make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A git source is fetched by its full commit id; an id the remote does not have is a clear error."""
    monkeypatch.setenv("MEMTRIAL_UPSTREAM_CACHE", str(tmp_path / "cache"))
    upstream, upstream_commit = make_repo({"lib.py": "X = 1\n", "tests/test_lib.py": "import unittest\n"})
    repo, commit = make_repo({"tasks/t/fixture/lib.py": "X = 2\n"})
    source = GitCommit(kind="git", url=upstream.as_uri(), commit=upstream_commit)
    origin = compose_fixture(repo, commit, "tasks/t/fixture", "t", source, fetch=True)
    assert _files(origin.repo, origin.commit, origin.subdir, tmp_path / "built") == {"lib.py": "X = 2\n", "tests/test_lib.py": "import unittest\n"}
    missing = GitCommit(kind="git", url=upstream.as_uri(), commit="f" * 40)
    with pytest.raises(UpstreamError, match=r"task t: upstream git .* cannot fetch commit f{40}"):
        compose_fixture(repo, commit, "tasks/t/fixture", "t", missing, fetch=True)


# --------------------------------------------------------------------------- the corpus check end to end

VERIFIER = "#!/bin/sh\nset -u\n[ -f test/label.test.js ] || { echo 'verifier: post-turn tests are missing' >&2; exit 2; }\nexec node --test\n"
HIDDEN = ("'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
          "const label = require('../index.js');\n\ntest('labels carry the directory prefix', () => {\n"
          "  assert.strictEqual(label('ada'), 'dir:ada');\n});\n")


def _upstream_task(digest: str) -> dict[str, str]:
    manifest = {
        "schema_version": 1, "task_id": "nicklabel-prefix", "kind": "convention",
        "instruction": "Our directory service rejects the labels nicklabel makes. Switch the prefix to the one the directory expects.",
        "check_command": ["sh", "{verifier}"],
        "verifier": {"kind": "script", "runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": sha256(VERIFIER.encode())}, "timeout_seconds": 60},
        "memories": [{"text": "The directory service only accepts labels of the form dir:<name>.", "lane": "keyword", "kind": "convention"}],
        "answer_terms": ["dir:"],
        "allowed_output_paths": ["index.js"],
        "upstream": {"kind": "npm-tarball", "name": "nicklabel", "version": "2.0.0", "sha256": digest},
    }
    prefix = "corpora/tasks/nicklabel-prefix"
    lanes = measure_manifest_lanes(TaskManifest.model_validate(manifest))
    return {
        "corpora/tasks/key_lanes.json": json.dumps({"schema_version": 1, "tasks": {"nicklabel-prefix": list(lanes)}}),
        f"{prefix}/task.json": json.dumps(manifest, indent=2),
        f"{prefix}/verifier.sh": VERIFIER,
        f"{prefix}/fixture/test/basic.test.js": "'use strict';\nconst test = require('node:test');\ntest('loads', () => { require('../index.js'); });\n",
        f"{prefix}/hidden/test/label.test.js": HIDDEN,
        f"{prefix}/solution/index.js": "'use strict';\nmodule.exports = function label(name) { return 'dir:' + name; };\n",
    }


def test_corpus_check_proves_every_invariant_on_the_composed_fixture(index: PackageIndex, make_repo: MakeRepo) -> None:
    """An upstream task is checked like any task, on upstream + overlay: it fails untouched, passes with
    its solution, and leaks nothing; the manifest validates with its `upstream` field."""
    digest = index.add_tarball("nicklabel", "2.0.0", TARBALL)
    repo, _ = make_repo(_upstream_task(digest))
    TaskManifest.model_validate_json((repo / "corpora/tasks/nicklabel-prefix/task.json").read_text())
    assert [f.error for f in fetch_upstream_sources(repo, "HEAD", repo / "corpora" / "tasks")] == [None]
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert report.failures == (), "\n".join(map(str, report.failures))
    (task,) = report.tasks
    assert [r.stage for r in task.runs] == ["fixture", "solution"]
    assert task.runs[0].exit_code != 0 and task.runs[1].exit_code == 0


def test_corpus_check_reports_an_unfetchable_source_under_its_task(index: PackageIndex, make_repo: MakeRepo) -> None:
    """A wrong pin fails the fetch with the upstream error (task, source, fix), and the corpus check, which
    never downloads, fails the task naming `memtrial corpus fetch`: never a pass or a traceback."""
    index.add_tarball("nicklabel", "2.0.0", TARBALL)
    repo, _ = make_repo(_upstream_task("ab" * 32))
    (fetched,) = fetch_upstream_sources(repo, "HEAD", repo / "corpora" / "tasks")
    assert fetched.error and "npm tarball nicklabel==2.0.0" in fetched.error and "digest mismatch" in fetched.error
    requests = sum(index.requests.values())
    report = check_corpus(repo / "corpora" / "tasks", repo)
    (failure,) = report.failures
    assert failure.task_id == "nicklabel-prefix" and failure.invariant == "layout"
    assert "npm tarball nicklabel==2.0.0" in failure.message and "run `memtrial corpus fetch`" in failure.message
    assert sum(index.requests.values()) == requests, "the corpus check sent a request"


# --------------------------------------------------------------------------- the bundled real-project tasks

REPO = Path(__file__).resolve().parents[1]
UPSTREAM_TASKS = sorted(p.parent.name for p in (REPO / "corpora" / "tasks").glob("*/task.json")
                        if TaskManifest.model_validate_json(p.read_text()).upstream is not None)


def _memtrial(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("memtrial")
    return subprocess.run([str(exe), *argv], capture_output=True, text=True, env={**os.environ, "COLUMNS": "400", **env}, timeout=600)


def test_bundled_corpus_has_fifteen_real_project_tasks_in_python_and_node() -> None:
    """Issue 19's floor: at least 15 tasks on pinned real releases, from both PyPI and npm."""
    kinds = {TaskManifest.model_validate_json((REPO / "corpora/tasks" / t / "task.json").read_text()).upstream.kind for t in UPSTREAM_TASKS}  # type: ignore[union-attr]
    assert len(UPSTREAM_TASKS) >= 15 and {"pypi-sdist", "npm-tarball"} <= kinds


def test_corpus_fetch_caches_every_upstream_task() -> None:
    """`memtrial corpus fetch` composes every upstream task's fixture through the machine's cache (exit 0)."""
    done = _memtrial("corpus", "fetch", "--json", env={})
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["ok"] and sorted(t["task"] for t in report["tasks"]) == UPSTREAM_TASKS
    assert all(t["error"] is None and len(t["fixture_commit"]) == 40 for t in report["tasks"])


def test_corpus_fetch_without_network_fails_fast_naming_every_task(tmp_path: Path) -> None:
    """Offline with an empty cache: exit 1, one line per task naming it, its source and what to do;
    no traceback and no hang (the registries are a closed port on 127.0.0.1)."""
    closed = PackageIndex()
    url = closed.url
    closed.server.server_close()
    env = {"MEMTRIAL_UPSTREAM_CACHE": str(tmp_path / "empty-cache"), "MEMTRIAL_PYPI_INDEX": url + "/simple",
           "MEMTRIAL_NPM_REGISTRY": url + "/npm", "MEMTRIAL_FETCH_TIMEOUT": "5"}
    started = time.monotonic()
    done = _memtrial("corpus", "fetch", env=env)
    assert time.monotonic() - started < 120
    assert done.returncode == 1 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(UPSTREAM_TASKS)
    for task, line in zip(UPSTREAM_TASKS, lines):
        assert line.startswith(f"task {task}: upstream ") and "cannot reach" in line and "MEMTRIAL_NPM_REGISTRY" in line


def test_preparation_builds_the_composed_fixture_and_certifies_it(index: PackageIndex, make_repo: MakeRepo) -> None:
    """The prepare stage (what the paired flow caches) builds an upstream task from the composed commit:
    the corpus id is the composed fixture tree's, the released files are in it, and it certifies clean."""
    from tasks_lib.corpus.prepare import prepare_task

    digest = index.add_tarball("nicklabel", "2.0.0", TARBALL)
    repo, commit = make_repo(_upstream_task(digest))
    assert [f.error for f in fetch_upstream_sources(repo, commit, repo / "corpora" / "tasks")] == [None]
    prepared = prepare_task(repo, commit, repo / "corpora/tasks/nicklabel-prefix/task.json")
    assert {f.path for f in prepared.build.files} == {"index.js", "package.json", "README.md", "test/basic.test.js"}
    assert prepared.build.source.subdir == FIXTURE_FOLDER and prepared.certification.verdict == "clean"
    again = compose_fixture(repo, commit, "corpora/tasks/nicklabel-prefix/fixture", "nicklabel-prefix",
                            NpmTarball(kind="npm-tarball", name="nicklabel", version="2.0.0", sha256=digest))
    assert prepared.build.source.commit == again.commit
