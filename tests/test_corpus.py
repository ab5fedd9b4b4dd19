"""Corpus build: from git objects only, deterministic id, clear refusals, nothing half-written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gitrepo import MakeRepo, git, write_files
from tasks_lib.contracts import CorpusBuild, load_document
from tasks_lib.corpus.build import build_tree, corpus_id_of, package_corpus
from tasks_lib.errors import CorpusError, UnknownCommitError
from tasks_lib.trees import list_tree, tree_digest

FILES: dict[str, str | bytes] = {
    "README.md": "# logship\n",
    "src/logship/__init__.py": "",
    "src/logship/cli.py": "def main() -> int:\n    return 0\n",
    "bin/run": "#!/bin/sh\nexec python3 -m logship\n",
    ".gitignore": "build/\n*.pyc\n",
    "data/blob.bin": bytes(range(256)),
}


def files_under(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def test_build_writes_exactly_the_committed_tree(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    os.chmod(repo / "bin/run", 0o755)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "exec bit")
    commit = git(repo, "rev-parse", "HEAD")
    # Work-tree noise that must never reach the corpus.
    write_files(repo, {"build/out.o": "junk", "src/logship/cli.pyc": "junk", "untracked.txt": "x", "README.md": "edited\n"})

    build = build_tree(repo, commit, tmp_path / "corpus")

    tree = tmp_path / "corpus"
    assert files_under(tree) == set(FILES)
    assert (tree / "README.md").read_text() == "# logship\n", "the committed bytes, not the edited work tree"
    assert (tree / "data/blob.bin").read_bytes() == bytes(range(256))
    assert os.access(tree / "bin/run", os.X_OK)
    assert not (tree / ".git").exists()
    assert build.source.commit == commit
    assert [e.path for e in build.files] == sorted(FILES)
    assert tree_digest(list_tree(tree)) == tree_digest(build.files)


def test_corpus_id_depends_only_on_the_tree(make_repo: MakeRepo, tmp_path: Path) -> None:
    """The same tree gives the same id on any machine, whatever commit or path it came from."""
    repo_a, commit_a = make_repo(FILES)
    repo_b, _ = make_repo(FILES)
    git(repo_b, "commit", "-q", "--allow-empty", "-m", "another commit, same tree")
    commit_b = git(repo_b, "rev-parse", "HEAD")
    assert commit_a != commit_b
    a = build_tree(repo_a, commit_a, tmp_path / "a")
    b = build_tree(repo_b, commit_b, tmp_path / "b")
    assert a.corpus_id == b.corpus_id == corpus_id_of(a.tree_oid)
    write_files(repo_b, {"README.md": "changed\n"})
    git(repo_b, "commit", "-qam", "change")
    c = build_tree(repo_b, "HEAD", tmp_path / "c")
    assert c.corpus_id != a.corpus_id


def test_history_is_not_in_the_corpus(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, _ = make_repo({"a.txt": "secret answer in an old version\n"})
    write_files(repo, {"a.txt": "current\n"})
    git(repo, "commit", "-qam", "why this broke: the answer is 42")
    build_tree(repo, "HEAD", tmp_path / "out")
    text = "".join(p.read_text() for p in (tmp_path / "out").rglob("*") if p.is_file())
    assert "secret answer" not in text and "42" not in text


def test_symlinks_are_kept_as_links(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, _ = make_repo({"target.txt": "t\n"})
    os.symlink("target.txt", repo / "link")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "link")
    build = build_tree(repo, "HEAD", tmp_path / "out")
    assert os.readlink(tmp_path / "out" / "link") == "target.txt"
    assert {e.path: e.mode for e in build.files}["link"] == "120000"


def test_subdir_builds_only_that_subtree(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    build = build_tree(repo, commit, tmp_path / "out", subdir="src")
    assert files_under(tmp_path / "out") == {"logship/__init__.py", "logship/cli.py"}
    assert build.source.subdir == "src"


def test_export_ignore_attributes_do_not_hide_files(make_repo: MakeRepo, tmp_path: Path) -> None:
    """Unlike `git archive`, the corpus is the committed tree whatever .gitattributes says."""
    repo, commit = make_repo({".gitattributes": "hidden.txt export-ignore\n", "hidden.txt": "x\n"})
    build_tree(repo, commit, tmp_path / "out")
    assert (tmp_path / "out" / "hidden.txt").exists()


def test_a_repository_url_is_cloned(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    build = build_tree(f"file://{repo}", commit, tmp_path / "out")
    assert build.source.commit == commit
    assert files_under(tmp_path / "out") == set(FILES)


@pytest.mark.parametrize(
    "revision",
    ["0" * 40, "no-such-branch", "--output=/tmp/x", ""],
    ids=["unknown-oid", "unknown-branch", "option-injection", "empty"],
)
def test_unknown_commit_is_refused_and_nothing_is_written(make_repo: MakeRepo, tmp_path: Path, revision: str) -> None:
    repo, _ = make_repo(FILES)
    with pytest.raises(UnknownCommitError, match="does not resolve to a commit|is not a revision"):
        build_tree(repo, revision, tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".out")] == []


def test_missing_repository_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="no such repository path"):
        build_tree(tmp_path / "nope", "HEAD", tmp_path / "out")


def test_a_folder_that_is_not_a_repository_is_refused(tmp_path: Path) -> None:
    (tmp_path / "plain").mkdir()
    with pytest.raises(CorpusError, match="not a git repository"):
        build_tree(tmp_path / "plain", "HEAD", tmp_path / "out")


def test_existing_destination_is_never_overwritten(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "keep.txt").write_text("mine")
    with pytest.raises(CorpusError, match="already exists"):
        build_tree(repo, commit, tmp_path / "out")
    assert (tmp_path / "out" / "keep.txt").read_text() == "mine"


def test_missing_subdir_is_refused(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    with pytest.raises(CorpusError, match="has no directory 'nope'"):
        build_tree(repo, commit, tmp_path / "out", subdir="nope")
    with pytest.raises(CorpusError, match="is a blob, not a directory"):
        build_tree(repo, commit, tmp_path / "out", subdir="README.md")
    assert not (tmp_path / "out").exists()


def test_submodules_are_recorded_not_fetched(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    git(repo, "update-index", "--add", "--cacheinfo", f"160000,{commit},vendor/lib")
    git(repo, "commit", "-q", "-m", "gitlink")
    build = build_tree(repo, "HEAD", tmp_path / "out")
    assert build.skipped_submodules == ("vendor/lib",)
    assert not (tmp_path / "out" / "vendor").exists()


def test_package_writes_tree_and_receipt_atomically(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo(FILES)
    build = package_corpus(repo, commit, tmp_path / "pkg")
    assert load_document(tmp_path / "pkg" / "corpus.json", CorpusBuild) == build
    assert files_under(tmp_path / "pkg" / "tree") == set(FILES)
    with pytest.raises(UnknownCommitError):
        package_corpus(repo, "f" * 40, tmp_path / "pkg2")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pkg", "repo0"]


def test_a_crafted_tree_with_a_dotdot_path_is_refused(make_repo: MakeRepo, tmp_path: Path) -> None:
    """git's own fsck refuses such trees; the builder must not write outside its folder either."""
    repo, _ = make_repo({"a.txt": "a\n"})
    blob = git(repo, "hash-object", "-w", "a.txt")
    bad_tree = subprocess.run(
        ["git", "-C", str(repo), "mktree", "--missing"],
        input=f"100644 blob {blob}\t..\n",
        capture_output=True,
        text=True,
    )
    if bad_tree.returncode != 0:
        pytest.skip(f"this git refuses to write a '..' tree entry at all: {bad_tree.stderr.strip()}")
    tree = bad_tree.stdout.strip()
    commit = git(repo, "commit-tree", tree, "-m", "crafted")
    with pytest.raises(CorpusError, match="cannot package safely"):
        build_tree(repo, commit, tmp_path / "out")
    assert not (tmp_path / "out").exists()
