"""Redaction: the only code that changes a packaged tree.

It removes hand-written agent memory (auto-loaded context) identically for every arm and returns
a receipt naming each removed path with its SHA-256. Certification runs afterwards and only reads.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from tasks_lib.contracts import (
    CorpusBuild,
    RedactionReceipt,
    RemovedPath,
    TreeEntry,
    dump_document,
    load_document,
)
from tasks_lib.corpus.build import RECEIPT_NAME, TREE_DIR
from tasks_lib.corpus.rules import AUTO_LOADED_CONTEXT, RuleSet
from tasks_lib.errors import CorpusError
from tasks_lib.trees import list_tree, tree_digest

REDACTION_RECEIPT = "redaction.json"


def _prune_empty_dirs(tree: Path, removed: list[str]) -> None:
    """Remove directories left empty by redaction, bottom-up, never `tree` itself."""
    parents = sorted({str(Path(p).parent) for p in removed if "/" in p}, key=lambda p: -p.count("/"))
    for rel in parents:
        current = tree / rel
        while current != tree and current.is_dir() and not current.is_symlink() and not any(current.iterdir()):
            current.rmdir()
            current = current.parent


def _remove_empty_matching_dirs(tree: Path, rules: RuleSet) -> None:
    """Remove empty directories that a rule covers (they carry no file but announce the tool)."""
    for dirpath, _, _ in os.walk(tree, topdown=False):
        rel = os.path.relpath(dirpath, tree)
        if rel != "." and not os.listdir(dirpath) and rules.first_match(rel.replace(os.sep, "/")):
            os.rmdir(dirpath)


def plan_redaction(
    tree: Path, corpus_id: str, rules: RuleSet = AUTO_LOADED_CONTEXT, listing: Sequence[TreeEntry] | None = None
) -> RedactionReceipt:
    """The receipt redaction of `tree` will produce; reads only.

    `listing` is the tree's listing when the caller has just built it (as `build_tree` returns it)
    and nothing else has touched it: it saves hashing every file again. None reads the tree.
    """
    before = list(listing) if listing is not None else list_tree(tree)
    removed = [
        RemovedPath(path=entry.path, sha256=entry.sha256, rule=rule)
        for entry in before
        if (rule := rules.first_match(entry.path)) is not None
    ]
    gone = {r.path for r in removed}
    return RedactionReceipt(
        corpus_id=corpus_id,
        rules_digest=rules.digest(),
        removed=tuple(removed),
        tree_digest_before=tree_digest(before),
        tree_digest_after=tree_digest(e for e in before if e.path not in gone),
    )


def apply_redaction(tree: Path, receipt: RedactionReceipt, rules: RuleSet = AUTO_LOADED_CONTEXT) -> None:
    """Remove what `receipt` names from `tree`, then the directories that leaves empty."""
    for item in receipt.removed:
        os.unlink(tree / item.path)
    _prune_empty_dirs(tree, [r.path for r in receipt.removed])
    _remove_empty_matching_dirs(tree, rules)


def redact_tree(
    tree: Path, corpus_id: str, rules: RuleSet = AUTO_LOADED_CONTEXT, listing: Sequence[TreeEntry] | None = None
) -> RedactionReceipt:
    """Remove every file of `tree` that `rules` covers; return the receipt (not written anywhere)."""
    receipt = plan_redaction(tree, corpus_id, rules, listing)
    apply_redaction(tree, receipt, rules)
    return receipt


def redact_package(package: Path) -> RedactionReceipt:
    """Redact a packaged corpus folder in place and write `redaction.json` beside its tree.

    The receipt is staged before anything is removed, so an interrupted redaction is visible
    (a `.redaction.json.partial` remains) and refused, never silently completed.
    Raises CorpusError when the folder is not a packaged corpus, or was already (or partly) redacted.
    """
    receipt_path = package / REDACTION_RECEIPT
    staging = receipt_path.with_name(f".{REDACTION_RECEIPT}.partial")
    if not (package / RECEIPT_NAME).is_file() or not (package / TREE_DIR).is_dir():
        raise CorpusError(f"{package}: not a packaged corpus (needs {RECEIPT_NAME} and {TREE_DIR}/); run 'memtrial corpus build' first")
    if receipt_path.exists():
        raise CorpusError(f"{receipt_path}: corpus already redacted; build a fresh corpus to redact again")
    if staging.exists():
        raise CorpusError(f"{staging}: an earlier redaction was interrupted; build a fresh corpus")
    build = load_document(package / RECEIPT_NAME, CorpusBuild)
    receipt = plan_redaction(package / TREE_DIR, build.corpus_id)
    staging.write_bytes(dump_document(receipt))
    apply_redaction(package / TREE_DIR, receipt)
    os.replace(staging, receipt_path)
    return receipt
