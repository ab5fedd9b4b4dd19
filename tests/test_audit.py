"""Mutation audit: every kind of change, inside and outside the allowlist, on real trees in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from pydantic import ValidationError

from tasks_lib.arm.audit import AuditError, AuditReceipt, audit, snapshot_tree
from tasks_lib.contracts import dump_document, parse_document


def make_tree(root: Path) -> Path:
    """A small workspace: sources, a script, a symlink, tests, data and a build folder."""
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("print('app')\n")
    (root / "src" / "run.sh").write_text("#!/bin/sh\n")
    (root / "src" / "run.sh").chmod(0o755)
    (root / "src" / "link").symlink_to("app.py")
    (root / "tests").mkdir()
    (root / "tests" / "test_app.py").write_text("def test_app():\n    assert True\n")
    (root / "data").mkdir()
    (root / "data" / "item.txt").write_text("item\n")
    (root / "build").mkdir()
    (root / "build" / "out.o").write_bytes(b"\x7fELF")
    (root / "Cargo.toml").write_text("[package]\nname = 'app'\n")
    return root


def write(rel: str, text: str = "new\n") -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return mutate


def remove(rel: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        path = root / rel
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    return mutate


def chmod(rel: str, mode: int) -> Callable[[Path], None]:
    return lambda root: (root / rel).chmod(mode)


def retarget(rel: str, target: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).symlink_to(target)
    return mutate


def swap_to_dir(rel: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).mkdir()
    return mutate


def swap_to_symlink(rel: str, target: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        (root / rel).unlink()
        (root / rel).symlink_to(target)
    return mutate


def swap_dir_to_file(rel: str) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        shutil.rmtree(root / rel)
        (root / rel).write_text("now a file\n")
    return mutate


def both(*steps: Callable[[Path], None]) -> Callable[[Path], None]:
    def mutate(root: Path) -> None:
        for step in steps:
            step(root)
    return mutate


# (id, mutation, allowed output paths, expected violations as (path, kind), expected allowed changes)
CASES = [
    ("no-change", lambda root: None, ("build",), [], 0),
    ("same-bytes-rewritten", write("src/app.py", "print('app')\n"), ("build",), [], 0),
    ("added-outside", write("src/new.py"), ("build",), [("src/new.py", "added")], 0),
    ("added-inside-subtree", write("build/new.o"), ("build",), [], 1),
    ("added-dirs-on-the-way-to-allowed", write("target/debug/app"), ("target/debug",), [], 3),
    ("added-beside-allowed-subtree", write("target/other"), ("target/debug",), [("target/other", "added")], 1),
    ("allowed-is-not-a-prefix-match", write("build2/x"), ("build",), [("build2", "added"), ("build2/x", "added")], 0),
    ("removed-outside", remove("tests/test_app.py"), ("build",), [("tests/test_app.py", "removed")], 0),
    ("removed-inside", remove("build/out.o"), ("build",), [], 1),
    ("changed-outside-agent-edits-test", write("tests/test_app.py", "assert 1\n"), ("src/app.py",),
     [("tests/test_app.py", "changed")], 0),
    ("changed-inside-file", write("src/app.py", "print('fixed')\n"), ("src/app.py",), [], 1),
    ("permission-outside", chmod("src/app.py", 0o755), ("build",), [("src/app.py", "permission-modified")], 0),
    ("permission-inside", chmod("src/app.py", 0o600), ("src/app.py",), [], 1),
    ("permission-of-dir-outside", chmod("data", 0o700), ("build",), [("data", "permission-modified")], 0),
    ("changed-and-permission", both(write("src/app.py", "x\n"), chmod("src/app.py", 0o777)), ("build",),
     [("src/app.py", "changed"), ("src/app.py", "permission-modified")], 0),
    ("symlink-retargeted-outside", retarget("src/link", "run.sh"), ("build",), [("src/link", "symlink-retargeted")], 0),
    ("symlink-retargeted-inside", retarget("src/link", "run.sh"), ("src/link",), [], 1),
    ("type-swap-file-to-dir", swap_to_dir("src/app.py"), ("build",), [("src/app.py", "type-swapped")], 0),
    ("type-swap-file-to-symlink", swap_to_symlink("tests/test_app.py", "../src/app.py"), ("build",),
     [("tests/test_app.py", "type-swapped")], 0),
    ("type-swap-dir-to-file", swap_dir_to_file("data"), ("build",),
     [("data", "type-swapped"), ("data/item.txt", "removed")], 0),
    ("type-swap-inside", swap_to_dir("build/out.o"), ("build",), [], 1),
    ("lockfile-undeclared", write("Cargo.lock", "# generated by cargo\n"), ("src/app.py",), [("Cargo.lock", "added")], 0),
    ("lockfile-declared", write("Cargo.lock", "# generated by cargo\n"), ("src/app.py", "Cargo.lock"), [], 1),
]


@pytest.mark.parametrize(("mutation", "allowed", "violations", "allowed_count"),
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_mutation_kinds(tmp_path: Path, mutation: Callable[[Path], None], allowed: tuple[str, ...],
                        violations: list[tuple[str, str]], allowed_count: int) -> None:
    root = make_tree(tmp_path / "ws")
    before = snapshot_tree(root)
    mutation(root)
    receipt = audit(before, root, allowed)
    assert [(c.path, c.kind) for c in receipt.violations] == violations
    assert len(receipt.allowed_changes) == allowed_count
    assert receipt.passed is (not violations)
    for change in receipt.violations:
        assert change.before is not None or change.kind == "added"
        assert change.after is not None or change.kind == "removed"


def test_toolchain_lockfile_voids_a_run_unless_declared(tmp_path: Path) -> None:
    """Regression (the lockfile that voided a run): ordinary cargo execution wrote Cargo.lock.

    The agent did nothing wrong; the audit must still report the undeclared mutation, and the same
    run passes once the allowlist describes what the toolchain writes.
    """
    root = make_tree(tmp_path / "ws")
    before = snapshot_tree(root)
    (root / "src" / "app.py").write_text("print('fixed')\n")
    (root / "Cargo.lock").write_text("version = 3\n")
    (root / "target" / "debug").mkdir(parents=True)
    (root / "target" / "debug" / "app").write_bytes(b"\x7fELF")
    undeclared = audit(before, root, ["src/app.py"])
    assert not undeclared.passed
    assert ("Cargo.lock", "added") in [(c.path, c.kind) for c in undeclared.violations]
    assert audit(before, root, ["src/app.py", "Cargo.lock", "target"]).passed


def test_an_empty_tree_does_not_pass(tmp_path: Path) -> None:
    """A gate that compared nothing fails: zero entries before and after is not a pass."""
    root = tmp_path / "empty"
    root.mkdir()
    receipt = audit(snapshot_tree(root), root, ["out"])
    assert not receipt.violations and not receipt.passed


def test_receipt_is_deterministic_and_round_trips(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws")
    before = snapshot_tree(root)
    for step in (write("z.txt"), write("a.txt"), remove("data"), chmod("Cargo.toml", 0o600)):
        step(root)
    first, second = audit(before, root, ["build"]), audit(before, root, ["build"])
    assert dump_document(first) == dump_document(second)
    assert [c.path for c in first.violations] == sorted(c.path for c in first.violations)
    again = parse_document(AuditReceipt, json.loads(dump_document(first)), "audit.json")
    assert again == first


def test_receipt_cannot_claim_a_pass_over_violations(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws")
    before = snapshot_tree(root)
    write("x")(root)
    data = audit(before, root, ["build"]).model_dump(mode="json")
    data["passed"] = True
    with pytest.raises(ValidationError, match="contradicts"):
        AuditReceipt.model_validate(data)


@pytest.mark.parametrize("bad", ["../escape", "/abs/path", "a\\b"], ids=["dotdot", "absolute", "backslash"])
def test_allowlist_must_be_portable_relative_paths(tmp_path: Path, bad: str) -> None:
    root = make_tree(tmp_path / "ws")
    with pytest.raises(AuditError, match="allowed_output_paths"):
        audit(snapshot_tree(root), root, [bad])


def test_snapshot_never_follows_symlinks(tmp_path: Path) -> None:
    """A link to a folder outside is one symlink entry; what it points at is not walked or hashed."""
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret").write_text("s")
    root = make_tree(tmp_path / "ws")
    (root / "escape").symlink_to(outside)
    entries = {e.path: e for e in snapshot_tree(root).entries}
    assert entries["escape"].type == "symlink" and entries["escape"].link_target == str(outside)
    assert not any(p.startswith("escape/") for p in entries)


def test_special_files_are_recorded(tmp_path: Path) -> None:
    root = make_tree(tmp_path / "ws")
    os.mkfifo(root / "pipe")
    entries = {e.path: e for e in snapshot_tree(root).entries}
    assert entries["pipe"].type == "other" and entries["pipe"].sha256 is None


def test_parallel_hashing_matches_a_single_thread(tmp_path: Path) -> None:
    """Thread-pool hashing (many small files, one file past a single read) gives the same snapshot."""
    root = tmp_path / "many"
    for i in range(300):
        (root / f"d{i % 7}").mkdir(parents=True, exist_ok=True)
        (root / f"d{i % 7}" / f"f{i}").write_bytes(os.urandom(i * 97))
    (root / "big.bin").write_bytes(os.urandom(9 << 20))
    parallel, single = snapshot_tree(root, workers=4), snapshot_tree(root, workers=1)
    assert parallel == single
    import hashlib
    big = next(e for e in parallel.entries if e.path == "big.bin")
    assert big.sha256 == hashlib.sha256((root / "big.bin").read_bytes()).hexdigest() and big.size == 9 << 20


def test_missing_root_is_an_audit_error(tmp_path: Path) -> None:
    with pytest.raises(AuditError, match="not a directory"):
        snapshot_tree(tmp_path / "absent")


def test_odd_file_names_are_audited_not_fatal(tmp_path: Path) -> None:
    """Regression: an agent cannot crash the audit (and turn a violation into an infra failure) with a
    file name that is legal on Linux but not a portable path: a backslash, or bytes that are not UTF-8."""
    root = make_tree(tmp_path / "ws")
    before = snapshot_tree(root)
    (root / "a\\b.txt").write_text("x")
    with open(os.path.join(os.fsencode(root), b"bad-\xff.txt"), "wb") as handle:
        handle.write(b"x")
    receipt = audit(before, root, ["build"])
    assert sorted(c.path for c in receipt.violations) == ["a\\b.txt", "bad-\\xff.txt"]
    again = parse_document(AuditReceipt, json.loads(dump_document(receipt)), "audit.json")
    assert again == receipt
