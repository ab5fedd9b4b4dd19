"""The authored retrieval cases: their contract, the loader and the checks beyond field types.

A case file (`corpora/retrieval/<set>/<group>.json`) is one evaluation group: the memories stored
in one realm of a disposable store, and the questions asked of them. Memories are named by a
`key` local to the file; a case names the keys that answer it (`relevant`), that hold an
outdated value (`stale`) and that must never surface (`forbidden`).

Checks the field types cannot express, each reported as file + field + fix:
- keys and case ids are unique, every referenced key exists, `supersedes` names an earlier memory;
- answerable classes name at least one relevant memory; unanswerable and ambiguous-binding
  probes name none and expect `automatic: abstain`; updates name a stale memory;
- a `paraphrase` question shares no content word with its relevant memories (names excepted);
- a `multi-hop` question shares no content word or entity with its target memory, so only a
  hop can reach it.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field

from tasks_lib.contracts import (
    ContractModel,
    Document,
    Identifier,
    NonEmptyText,
    parse_document,
)
from tasks_lib.errors import ContractError, Violation
from tasks_lib.resources import bundled_folder

CaseClass = Literal[
    "direct", "paraphrase", "update", "temporal", "noise", "alternating", "duplicate", "entity-hop",
    "out-of-domain", "missing-attribute", "ambiguous-binding", "multi-hop", "adversarial",
]
"""What a case probes. `multi-hop` and `adversarial` belong to the graph calibration set."""

ANSWERABLE: frozenset[str] = frozenset(
    {"direct", "paraphrase", "update", "temporal", "noise", "alternating", "duplicate", "entity-hop", "multi-hop"}
)
"""Classes whose question has a stored answer (ranking metrics count them)."""

UNANSWERABLE: frozenset[str] = frozenset({"out-of-domain", "missing-attribute"})
"""Classes with no stored answer: automatic injection must abstain."""

MUST_ABSTAIN: frozenset[str] = UNANSWERABLE | {"ambiguous-binding"}
"""Classes whose automatic injection must select nothing."""

SUITE_CLASSES: frozenset[str] = ANSWERABLE - {"multi-hop"} | MUST_ABSTAIN
"""Classes allowed in the fast suite's case set."""

GRAPH_CLASSES: frozenset[str] = frozenset({"direct", "multi-hop", "adversarial"})
"""Classes allowed in the graph calibration set."""

CASES_DIR = "cases"
GRAPH_DIR = "graph"
BACKGROUND_FILE = "background.json"


class CaseMemory(ContractModel):
    """One memory of an evaluation group, stored before any question is asked."""

    key: Identifier
    """Name of the memory within its file; cases refer to it."""
    text: NonEmptyText
    """The memory's text."""
    kind: Literal["convention", "fact", "decision", "procedure", "correction"] = "fact"
    """Memory kind; a `correction` must name `subject` or `supersedes`."""
    subject: str | None = Field(default=None, min_length=1, max_length=200)
    """What it is about; a later memory with the same subject supersedes it."""
    supersedes: tuple[Identifier, ...] = ()
    """Keys of earlier memories of this file it replaces."""
    speaker: str | None = Field(default=None, min_length=1, max_length=200)
    """Who said it."""
    timestamp: str | None = Field(default=None, min_length=1, max_length=200)
    """When it was said, free text."""
    session: str | None = Field(default=None, min_length=1, max_length=200)
    """Conversation it belongs to."""
    realm: Literal["main", "other"] = "main"
    """`other` stores it in a second realm of the same store: it must never be recalled for this group."""


class Case(ContractModel):
    """One question asked of an evaluation group."""

    id: Identifier
    """Id, unique across the case set."""
    case_class: CaseClass = Field(alias="class")
    """What the case probes (`class` in the file)."""
    question: NonEmptyText
    """The recall query, as asked."""
    relevant: tuple[Identifier, ...] = ()
    """Keys of the memories that answer it (any one counts for Recall@k)."""
    stale: tuple[Identifier, ...] = ()
    """Keys of outdated memories; one in the top 5 counts as stale recall."""
    forbidden: tuple[Identifier, ...] = ()
    """Keys that must never be in the top 5 (adversarial graph probes: a leak)."""
    automatic: Literal["inject", "abstain", "informational"] = "informational"
    """Automatic injection: `inject` (a canonical direct fact: must select a relevant memory), `abstain`, or not gated."""
    note: str = ""
    """Why the case exists (free text)."""

    model_config = ContractModel.model_config | {"populate_by_name": True}


class CaseGroup(Document):
    """One evaluation group: memories in one disposable realm, and the questions about them."""

    KIND: ClassVar[str] = "retrieval case group"

    group: Identifier
    """Group name (the realm is named after it)."""
    description: NonEmptyText
    """What the group exercises."""
    memories: tuple[CaseMemory, ...] = Field(min_length=1)
    """Memories, stored in this order, in one batch per realm."""
    cases: tuple[Case, ...] = Field(min_length=1)
    """Questions, asked in this order."""


class Background(Document):
    """Everyday notes stored first in every group's realm, so that a top 5 has to be earned."""

    KIND: ClassVar[str] = "retrieval background file"

    memories: tuple[NonEmptyText, ...] = Field(min_length=1)
    """Note texts; they answer no case (keys `bg-01`, `bg-02`, ...)."""


class CaseSet(ContractModel):
    """Every group of a case set, with the digest that identifies the set."""

    name: str
    """`cases` (the fast suite) or `graph` (the one-hop calibration)."""
    groups: tuple[CaseGroup, ...]
    """Groups, in file-name order."""
    background: tuple[str, ...] = ()
    """Notes stored before each group's own memories (see Background)."""
    digest: str
    """sha256 of the canonical JSON of every group: the set's identity in a comparability key."""

    def cases(self) -> list[tuple[CaseGroup, Case]]:
        """Every (group, case) pair, in order."""
        return [(g, c) for g in self.groups for c in g.cases]


STOP_WORDS = frozenset(
    """a about after again all am an and any are as at be been before being both but by can could
    did do does doing down during each for from further had has have having he her here hers him his
    how i if in into is it its just me more most my no nor not now of off on once only or other our
    out over own same she should so some such than that the their them then there these they this
    those through to too under until up very was we were what when where which while who whom why
    will with would you your yours ever still any anything else much many last first one""".split()
)
"""Words that do not count as repeating a fact's wording."""

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_NAME = re.compile(r"\b[A-Z][a-z]+")


def content_words(text: str) -> set[str]:
    """Casefolded words of `text` minus stop words, with a plural `s` dropped (so `dogs` repeats `dog`)."""
    out = set()
    for word in _WORD.findall(text.casefold()):
        if word in STOP_WORDS or len(word) < 2:
            continue
        out.add(word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word)
    return out


def names_in(text: str) -> set[str]:
    """Casefolded capitalised words that are not sentence-initial: proper names a paraphrase may repeat."""
    found = set()
    for match in _NAME.finditer(text):
        before = text[: match.start()].rstrip()
        if before and before[-1] not in ".!?":
            found.add(match.group(0).casefold())
    return found


def shared_wording(question: str, fact: str, allow_names: bool = True) -> set[str]:
    """Content words the question repeats from the fact (names excepted when `allow_names`)."""
    shared = content_words(question) & content_words(fact)
    if allow_names:
        shared -= content_words(" ".join(names_in(fact) | names_in(question)))
    return shared


def check_group(group: CaseGroup, source: str, allowed: Iterable[str]) -> list[Violation]:
    """Every rule the contract's field types cannot express; an empty list when the group is sound."""
    problems: list[Violation] = []
    allowed_set = frozenset(allowed)
    keys: dict[str, int] = {}
    for i, memory in enumerate(group.memories):
        if memory.key in keys:
            problems.append(Violation(source, f"memories[{i}].key", f"{memory.key!r} repeats memories[{keys[memory.key]}]; give each memory its own key"))
        for old in memory.supersedes:
            if old not in keys:
                problems.append(Violation(source, f"memories[{i}].supersedes", f"{old!r} is not an earlier memory of this file; list the replaced memory first"))
        if memory.kind == "correction" and memory.subject is None and not memory.supersedes:
            problems.append(Violation(source, f"memories[{i}].subject", "a correction must say what it corrects; give subject or supersedes"))
        keys.setdefault(memory.key, i)
    text_of = {m.key: m.text for m in group.memories}
    realm_of = {m.key: m.realm for m in group.memories}
    seen: set[str] = set()
    for i, case in enumerate(group.cases):
        where = f"cases[{i}]"
        if case.id in seen:
            problems.append(Violation(source, f"{where}.id", f"{case.id!r} is used twice; ids must be unique"))
        seen.add(case.id)
        if case.case_class not in allowed_set:
            problems.append(Violation(source, f"{where}.class", f"{case.case_class!r} is not allowed in this set; use one of {', '.join(sorted(allowed_set))}"))
        for field in ("relevant", "stale", "forbidden"):
            for key in getattr(case, field):
                if key not in text_of:
                    problems.append(Violation(source, f"{where}.{field}", f"{key!r} is not a memory key of this file"))
                elif field == "relevant" and realm_of[key] != "main":
                    problems.append(Violation(source, f"{where}.relevant", f"{key!r} is stored in the other realm; it can never be recalled here"))
        answerable = case.case_class in ANSWERABLE
        if answerable and not case.relevant:
            problems.append(Violation(source, f"{where}.relevant", f"a {case.case_class} case needs at least one relevant memory"))
        if not answerable and case.relevant:
            problems.append(Violation(source, f"{where}.relevant", f"a {case.case_class} case has no stored answer; leave relevant empty"))
        if case.case_class in MUST_ABSTAIN and case.automatic != "abstain":
            problems.append(Violation(source, f"{where}.automatic", f"a {case.case_class} probe must expect \"abstain\""))
        if case.automatic == "inject" and case.case_class != "direct":
            problems.append(Violation(source, f"{where}.automatic", "only canonical direct facts may expect \"inject\""))
        if case.case_class == "update" and not case.stale:
            problems.append(Violation(source, f"{where}.stale", "an update case must name the outdated memory it replaces"))
        if case.case_class == "adversarial" and not case.forbidden:
            problems.append(Violation(source, f"{where}.forbidden", "an adversarial probe must name the memories that must not leak"))
        if case.case_class == "paraphrase":
            for key in case.relevant:
                shared = shared_wording(case.question, text_of.get(key, ""))
                if shared:
                    problems.append(Violation(source, f"{where}.question", f"repeats the wording of memory {key!r} ({', '.join(sorted(shared))}); rephrase the question"))
        if case.case_class == "multi-hop":
            for key in case.relevant:
                shared = shared_wording(case.question, text_of.get(key, ""), allow_names=False)
                if shared:
                    problems.append(Violation(source, f"{where}.question", f"shares {', '.join(sorted(shared))} with target {key!r}; a multi-hop target must be reachable only through a hop"))
    return problems


def load_group(path: Path, allowed: Iterable[str] = SUITE_CLASSES) -> CaseGroup:
    """Read and check one case file; raise ContractError naming the file and every wrong field."""
    group = parse_document(CaseGroup, read_json_file(path), str(path))
    problems = check_group(group, str(path), allowed)
    if problems:
        raise ContractError(problems)
    return group


def load_background(path: Path) -> Background:
    """Read the background notes file; ContractError names the file and field."""
    return parse_document(Background, read_json_file(path), str(path))


def read_json_file(path: Path) -> object:
    """Parse a JSON file; ContractError names the file (and line/column) when it is missing, unreadable or not JSON."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ContractError([Violation(str(path), "", "file does not exist")]) from None
    except (OSError, UnicodeDecodeError) as error:
        raise ContractError([Violation(str(path), "", f"cannot be read as UTF-8 text ({error})")]) from None
    except json.JSONDecodeError as error:
        raise ContractError([Violation(str(path), "", f"invalid JSON at line {error.lineno} column {error.colno}: {error.msg}")]) from None


def load_case_set(folder: Path, allowed: Iterable[str] = SUITE_CLASSES, background: Path | None = None) -> CaseSet:
    """Every `*.json` group in `folder`, checked; ids must be unique across the set.

    `background` names a Background file whose notes every group stores first.
    """
    notes = load_background(background).memories if background is not None else ()
    files = sorted(folder.glob("*.json"))
    if not files:
        raise ContractError([Violation(str(folder), "", "holds no *.json case files; point at a case folder")])
    allowed_t = tuple(allowed)
    groups = [load_group(path, allowed_t) for path in files]
    problems: list[Violation] = []
    owner: dict[str, str] = {}
    for path, group in zip(files, groups):
        if group.group in owner.values():
            problems.append(Violation(str(path), "group", f"{group.group!r} is also the group of another file; rename it"))
        for case in group.cases:
            if case.id in owner:
                problems.append(Violation(str(path), "cases", f"case id {case.id!r} is also used in {owner[case.id]}"))
            owner[case.id] = str(path)
    if problems:
        raise ContractError(problems)
    return CaseSet(name=folder.name, groups=tuple(groups), background=notes, digest=case_set_digest(groups, notes))


def case_set_digest(groups: Sequence[CaseGroup], background: Sequence[str] = ()) -> str:
    """sha256 of the background notes and the groups' canonical JSON, in order."""
    payload = json.dumps(
        {"background": list(background), "groups": [g.model_dump(mode="json", by_alias=True) for g in groups]},
        sort_keys=True, ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode()).hexdigest()


def bundled_root() -> Path:
    """The bundled retrieval data (`corpora/retrieval` in a checkout, package data in a wheel)."""
    return bundled_folder("retrieval")
