"""Path rules for hand-written agent memory (auto-loaded context).

Shared by redaction (which removes matches) and certification (which reports any left).
Rule forms, matched case-insensitively so a case-folding file system cannot slip one through:

- `NAME`     a bare name matches that basename anywhere in the tree;
- `NAME/`    a trailing slash matches any path component (a whole directory, anywhere, and a
             symlink or file of that name, which could stand in for the directory);
- `A/B/`     consecutive directory components, anywhere;
- `A/NAME`   a path suffix: that file inside that directory, anywhere.

A backup copy matches as its original does: each path component is compared with one of
`BACKUP_SUFFIXES` stripped (`CLAUDE.md.bak`, `AGENTS.md~`, `.claude.old/`), because an agent can
read the copy as easily as the original. Only these editor and tool conventions are stripped, so
`CLAUDE.md.bak-notes/` or `notes.bak.md` stay ordinary names.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cached_property

# Files and folders that coding agents read into their context without being asked, as of 2026.
AUTO_LOADED_CONTEXT_RULES: tuple[str, ...] = (
    # instruction files read at session start
    "AGENTS.md", "AGENT.md", "AGENTS.local.md", "AGENTS.override.md",
    "CLAUDE.md", "CLAUDE.local.md",
    "GEMINI.md", "QWEN.md", "JULES.md", "CRUSH.md", "WARP.md",
    "copilot-instructions.md",
    ".cursorrules", ".clinerules", ".windsurfrules", ".roorules", ".roomodes", ".goosehints",
    ".rules", ".augment-guidelines", ".aider.conf.yml", ".mcp.json",
    ".vscode/mcp.json", ".cursor/mcp.json",
    # tool configs that carry instructions; exact names, so `docs/opencode.md` or `airules.md` elsewhere stay
    "opencode.json", "opencode.jsonc", ".continuerc.json", ".idx/airules.md",
    # an agent's own transcript of earlier sessions
    ".aider.chat.history.md",
    # whole directories of rules, skills, memories, settings and hooks
    ".claude/", ".codex/", ".cursor/", ".continue/", ".gemini/", ".windsurf/", ".devin/",
    ".clinerules/", ".cline/", ".roo/", ".kilocode/", ".amazonq/", ".kiro/", ".junie/",
    ".augment/", ".qwen/", ".agents/", ".opencode/", ".openhands/", ".trae/", ".tabnine/", ".crush/",
    ".github/instructions/", ".github/prompts/", ".github/chatmodes/", ".github/agents/",
    # Cline's memory bank: a whole folder of notes the agent reads back; the hyphenated name is the tool's own
    "memory-bank/",
)
BACKUP_SUFFIXES: tuple[str, ...] = (".bak", ".backup", ".old", ".orig", ".save", "~")
"""Suffixes editors, patch tools and people add to a copy they keep (checked lowercased)."""


def unbacked(name: str) -> str:
    """`name` (lowercased) without its backup suffixes: `claude.md.bak~` -> `claude.md`; never empty."""
    stripped = True
    while stripped:
        stripped = False
        for suffix in BACKUP_SUFFIXES:
            if name.endswith(suffix) and len(name) > len(suffix):
                name, stripped = name[: -len(suffix)], True
    return name


def path_parts(rel_path: str) -> list[str]:
    """The lowercased components of `rel_path` as rules compare them, backup suffixes stripped."""
    return [unbacked(part) for part in rel_path.lower().split("/")]


def within(path: str, prefix: str) -> bool:
    """True when `path` is `prefix` or lies under the folder `prefix` (relative POSIX paths)."""
    return path == prefix or path.startswith(prefix.rstrip("/") + "/")


@dataclass(frozen=True)
class PathRule:
    """One compiled rule."""

    text: str
    parts: tuple[str, ...]
    directory: bool

    @classmethod
    def parse(cls, text: str) -> PathRule:
        directory = text.endswith("/")
        parts = tuple(p.lower() for p in text.strip("/").split("/"))
        return cls(text, parts, directory)

    def matches(self, rel_path: str) -> bool:
        """True when the rule covers the file at `rel_path` (POSIX, relative)."""
        parts = path_parts(rel_path)
        n = len(self.parts)
        if self.directory:
            return any(tuple(parts[i : i + n]) == self.parts for i in range(len(parts) - n + 1))
        return tuple(parts[-n:]) == self.parts


@dataclass(frozen=True)
class RuleSet:
    """An ordered list of path rules, indexed so a lookup costs a few dict probes per path."""

    rules: tuple[PathRule, ...]

    @classmethod
    def of(cls, texts: tuple[str, ...]) -> RuleSet:
        return cls(tuple(PathRule.parse(t) for t in texts))

    @cached_property
    def _index(self) -> tuple[dict[str, list[tuple[int, PathRule]]], dict[str, list[tuple[int, PathRule]]]]:
        """Rules keyed by their last part (file rules) and by their first part (folder rules)."""
        by_last: dict[str, list[tuple[int, PathRule]]] = {}
        by_first: dict[str, list[tuple[int, PathRule]]] = {}
        for position, rule in enumerate(self.rules):
            if rule.directory:
                by_first.setdefault(rule.parts[0], []).append((position, rule))
            else:
                by_last.setdefault(rule.parts[-1], []).append((position, rule))
        return by_last, by_first

    def first_match(self, rel_path: str) -> str | None:
        """The text of the first rule (in list order) covering `rel_path`, or None."""
        by_last, by_first = self._index
        parts = path_parts(rel_path)
        best: tuple[int, str] | None = None
        for position, rule in by_last.get(parts[-1], ()):
            if rule.matches(rel_path) and (best is None or position < best[0]):
                best = (position, rule.text)
        for part in parts:
            for position, rule in by_first.get(part, ()):
                if (best is None or position < best[0]) and rule.matches(rel_path):
                    best = (position, rule.text)
        return best[1] if best else None

    def digest(self) -> str:
        """SHA-256 of the rule list, recorded in receipts."""
        return hashlib.sha256("\n".join(r.text for r in self.rules).encode()).hexdigest()


AUTO_LOADED_CONTEXT = RuleSet.of(AUTO_LOADED_CONTEXT_RULES)
