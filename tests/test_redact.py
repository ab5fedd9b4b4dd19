"""Redaction: every auto-loaded-context rule removes what it should, near-misses stay, receipts are exact."""

from __future__ import annotations

from pathlib import Path

import pytest

from gitrepo import MakeRepo, write_files
from tasks_lib.contracts import RedactionReceipt, load_document
from tasks_lib.corpus.build import package_corpus
from tasks_lib.corpus.redact import redact_package, redact_tree
from tasks_lib.corpus.rules import AUTO_LOADED_CONTEXT, AUTO_LOADED_CONTEXT_RULES
from tasks_lib.errors import CorpusError
from tasks_lib.trees import list_tree, sha256_bytes, tree_digest

CORPUS_ID = "c" * 64

# (path written into the tree, rule expected to remove it)
REMOVED = [
    ("AGENTS.md", "AGENTS.md"),
    ("packages/api/AGENTS.md", "AGENTS.md"),
    ("AGENT.md", "AGENT.md"),
    ("CLAUDE.md", "CLAUDE.md"),
    ("docs/claude.md", "CLAUDE.md"),
    ("CLAUDE.local.md", "CLAUDE.local.md"),
    ("GEMINI.md", "GEMINI.md"),
    ("QWEN.md", "QWEN.md"),
    (".github/copilot-instructions.md", "copilot-instructions.md"),
    (".cursorrules", ".cursorrules"),
    (".clinerules", ".clinerules"),
    (".windsurfrules", ".windsurfrules"),
    (".roorules", ".roorules"),
    (".goosehints", ".goosehints"),
    (".rules", ".rules"),
    (".aider.conf.yml", ".aider.conf.yml"),
    (".mcp.json", ".mcp.json"),
    (".vscode/mcp.json", ".vscode/mcp.json"),
    (".claude/settings.json", ".claude/"),
    (".claude/skills/release/SKILL.md", ".claude/"),
    ("sub/.claude/commands/x.md", ".claude/"),
    (".codex/config.toml", ".codex/"),
    (".cursor/rules/style.mdc", ".cursor/"),
    (".continue/config.yaml", ".continue/"),
    (".gemini/styleguide.md", ".gemini/"),
    (".windsurf/rules/a.md", ".windsurf/"),
    (".clinerules/01-style.md", ".clinerules/"),
    (".roo/rules/a.md", ".roo/"),
    (".amazonq/rules/a.md", ".amazonq/"),
    (".kiro/steering/a.md", ".kiro/"),
    (".junie/guidelines.md", ".junie/"),
    (".agents/skills/x/SKILL.md", ".agents/"),
    (".github/instructions/py.instructions.md", ".github/instructions/"),
    (".github/prompts/release.prompt.md", ".github/prompts/"),
]

# Ordinary project files that share words or shapes with the rules and must stay.
KEPT = [
    "README.md",
    "docs/agents.txt",
    "src/agents/__init__.py",
    "src/claude_client.py",
    "CLAUDE.md.bak-notes/readme.txt",
    "docs/rules.md",
    "src/.rules.py",
    ".github/workflows/ci.yml",
    "instructions/setup.md",
    "prompts/templates.txt",
    "vscode/mcp.json",
    "mcp.json",
    "tests/fixtures/data.json",
]


def _ids(rows: list[tuple[str, str]]) -> list[str]:
    return [path for path, _ in rows]


@pytest.mark.parametrize(("path", "rule"), REMOVED, ids=_ids(REMOVED))
def test_rule_removes_auto_loaded_context(tmp_path: Path, path: str, rule: str) -> None:
    write_files(tmp_path, {path: "agent memory\n", "src/main.py": "print(1)\n"})
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert [(r.path, r.rule) for r in receipt.removed] == [(path, rule)]
    assert receipt.removed[0].sha256 == sha256_bytes(b"agent memory\n")
    assert not (tmp_path / path).exists()
    assert (tmp_path / "src/main.py").exists()


@pytest.mark.parametrize("path", KEPT, ids=KEPT)
def test_near_miss_is_kept(tmp_path: Path, path: str) -> None:
    write_files(tmp_path, {path: "ordinary project file\n"})
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert receipt.removed == ()
    assert (tmp_path / path).exists()


def _generated_case(rule: str) -> tuple[str, str]:
    return (f"{rule}notes.md", rule) if rule.endswith("/") else (f"deep/er/{rule}", rule)


GENERATED = [_generated_case(rule) for rule in AUTO_LOADED_CONTEXT_RULES]


@pytest.mark.parametrize(("path", "rule"), GENERATED, ids=_ids(GENERATED))
def test_every_rule_removes_its_own_example(tmp_path: Path, path: str, rule: str) -> None:
    write_files(tmp_path, {path: "agent memory\n"})
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert [(r.path, r.rule) for r in receipt.removed] == [(path, rule)]


def test_emptied_directories_are_removed_but_shared_ones_stay(tmp_path: Path) -> None:
    write_files(tmp_path, {".claude/skills/a/SKILL.md": "x", ".github/copilot-instructions.md": "x", ".github/workflows/ci.yml": "y"})
    (tmp_path / ".cursor" / "rules").mkdir(parents=True)
    redact_tree(tmp_path, CORPUS_ID)
    assert not (tmp_path / ".claude").exists()
    assert not (tmp_path / ".cursor").exists(), "an empty tool folder still announces the tool"
    assert (tmp_path / ".github/workflows/ci.yml").exists()


def test_symlink_standing_in_for_a_tool_folder_is_removed(tmp_path: Path) -> None:
    write_files(tmp_path, {"shared/rules.md": "x"})
    (tmp_path / ".claude").symlink_to("shared")
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert [r.path for r in receipt.removed] == [".claude"]
    assert (tmp_path / "shared/rules.md").exists()


def test_receipt_digests_describe_the_tree_before_and_after(tmp_path: Path) -> None:
    write_files(tmp_path, {"AGENTS.md": "a", "src/x.py": "x"})
    before = tree_digest(list_tree(tmp_path))
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert receipt.tree_digest_before == before
    assert receipt.tree_digest_after == tree_digest(list_tree(tmp_path))
    assert receipt.rules_digest == AUTO_LOADED_CONTEXT.digest()


def test_redaction_is_identical_for_every_arm(make_repo: MakeRepo, tmp_path: Path) -> None:
    """Two packages of the same commit redact to byte-identical trees and receipts."""
    repo, commit = make_repo({"CLAUDE.md": "use tabs", ".cursor/rules/a.mdc": "x", "src/a.py": "a"})
    receipts = []
    for arm in ("on", "off"):
        package_corpus(repo, commit, tmp_path / arm)
        receipts.append(redact_package(tmp_path / arm))
    assert receipts[0] == receipts[1]
    assert list_tree(tmp_path / "on" / "tree") == list_tree(tmp_path / "off" / "tree")


def test_package_receipt_is_written_and_second_redaction_refused(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo({"AGENTS.md": "x", "a.py": "a"})
    build = package_corpus(repo, commit, tmp_path / "pkg")
    receipt = redact_package(tmp_path / "pkg")
    assert load_document(tmp_path / "pkg" / "redaction.json", RedactionReceipt) == receipt
    assert receipt.corpus_id == build.corpus_id
    with pytest.raises(CorpusError, match="already redacted"):
        redact_package(tmp_path / "pkg")


def test_interrupted_redaction_is_refused(make_repo: MakeRepo, tmp_path: Path) -> None:
    repo, commit = make_repo({"AGENTS.md": "x", "a.py": "a"})
    package_corpus(repo, commit, tmp_path / "pkg")
    (tmp_path / "pkg" / ".redaction.json.partial").write_text("{}")
    with pytest.raises(CorpusError, match="interrupted"):
        redact_package(tmp_path / "pkg")
    assert (tmp_path / "pkg" / "tree" / "AGENTS.md").exists(), "nothing is removed when redaction refuses"


def test_redacting_a_folder_that_is_not_a_package_is_refused(tmp_path: Path) -> None:
    with pytest.raises(CorpusError, match="not a packaged corpus"):
        redact_package(tmp_path)


def test_a_fresh_build_listing_gives_the_same_receipt_as_reading_the_tree(make_repo: MakeRepo, tmp_path: Path) -> None:
    from tasks_lib.corpus.build import build_tree

    repo, commit = make_repo({"AGENTS.md": "x", ".claude/a.md": "y", "src/a.py": "a"})
    build = build_tree(repo, commit, tmp_path / "one")
    build_tree(repo, commit, tmp_path / "two")
    assert redact_tree(tmp_path / "one", build.corpus_id, listing=build.files) == redact_tree(tmp_path / "two", build.corpus_id)



def assert_redacted_by(tmp_path: Path, path: str, rule: str | None) -> None:
    """Redacting a tree holding `path` removes exactly it under `rule`, or (rule None) keeps it."""
    write_files(tmp_path, {path: "agent memory\n", "src/main.py": "print(1)\n"})
    receipt = redact_tree(tmp_path, CORPUS_ID)
    assert [(r.path, r.rule) for r in receipt.removed] == ([(path, rule)] if rule else [])
    assert (tmp_path / path).exists() is (rule is None)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("CLAUDE.md.bak", "CLAUDE.md"),
        ("AGENTS.md~", "AGENTS.md"),
        ("docs/GEMINI.md.orig", "GEMINI.md"),
        (".cursorrules.old", ".cursorrules"),
        ("CLAUDE.md.bak.bak", "CLAUDE.md"),
        (".claude.bak/settings.json", ".claude/"),
        ("CLAUDE.md.bak-notes/readme.txt", None),
        ("notes.bak.md", None),
        ("src/app.py.bak", None),
        (".bak", None),
    ],
    ids=[
        "bak-copy-of-claude-md", "tilde-copy-of-agents-md", "orig-copy-left-by-patch", "old-copy-of-cursorrules", "twice-backed-up-copy",
        "backed-up-tool-folder", "folder-named-like-a-backup", "bak-inside-an-ordinary-name", "backup-of-ordinary-code", "bare-bak-file",
    ],
)
def test_a_backup_copy_is_redacted_like_its_original(tmp_path: Path, path: str, rule: str | None) -> None:
    """`CLAUDE.md.bak` or `AGENTS.md~` used to survive redaction and hand the agent the same memory."""
    assert_redacted_by(tmp_path, path, rule)


@pytest.mark.parametrize(
    ("path", "rule"),
    [
        ("opencode.json", "opencode.json"),
        ("opencode.jsonc", "opencode.jsonc"),
        (".continuerc.json", ".continuerc.json"),
        (".idx/airules.md", ".idx/airules.md"),
        ("memory-bank/activeContext.md", "memory-bank/"),
        (".aider.chat.history.md", ".aider.chat.history.md"),
        ("docs/opencode.md", None),
        ("continuerc.json", None),
        ("docs/airules.md", None),
        ("docs/memory-bank.md", None),
        ("src/memory_bank/store.py", None),
        ("docs/aider.chat.history.md", None),
    ],
    ids=[
        "opencode-config", "opencode-config-jsonc", "continue-workspace-config", "firebase-studio-rules", "cline-memory-bank",
        "aider-transcript", "doc-about-opencode", "continuerc-without-dot", "airules-outside-idx", "doc-about-memory-banks",
        "memory-bank-package-in-code", "aider-history-without-dot",
    ],
)
def test_more_agents_memory_files_are_redacted(tmp_path: Path, path: str, rule: str | None) -> None:
    """opencode, Continue, Firebase Studio, Cline and aider memory used to reach the agent; their namesakes stay."""
    assert_redacted_by(tmp_path, path, rule)
