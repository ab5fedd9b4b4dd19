"""The recall suite's authored data: cases (`cases.json`) and filler dialogue (`filler.json`).

Three kinds of case:

- `recall`: one of `phrasings` is planted, buried under N filler turns, then `probe` is asked;
  the answer must assert one of `accept`.
- `stale`: one of `phrasings` (the old value) is planted, then one of `corrections`; the answer
  must assert `accept` (the corrected value) and must not assert any of `reject` (the old one).
- `false-memory`: the fact is never planted; `probe` asks about an attribute that was never
  given. Only an abstention passes; `reject` lists plausible concrete answers (asserting one is a
  failure too). Its `distractors` make the probe in-domain: the entity exists, other things
  about it were said.

Every kind may carry `distractors`: facts planted in the same store that compete with the answer
(the same attribute of another person or thing, or other attributes of the probed entity).

Beyond the field types, `load_cases` checks what makes a case measure what it claims: every
phrasing of a recall case asserts an accepted value, a stale case's phrasings assert a rejected
value and its corrections the accepted one (and no rejected one), the probe gives neither away
and shares at most `MAX_SHARED_WORDS` content word with any phrasing or correction (a probe that
repeats the fact's words measures word matching, not memory), no distractor states the case's
own values, ids are unique, and no filler turn asserts any case's values. Every problem is reported as
`<file>: field '<path>': <what is wrong and what to do>`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Annotated, ClassVar, Literal

from pydantic import Field, StrictInt, StrictStr, StringConstraints, model_validator

from tasks_lib.contracts import ContractModel, Document, load_document
from tasks_lib.errors import ContractError, Violation
from tasks_lib.suites.recall.reader import content_terms
from tasks_lib.suites.recall.scoring import asserts, tokens, value_tokens

CASES_FILE = "cases.json"
"""File name of the case list inside a recall corpus folder."""

FILLER_FILE = "filler.json"
"""File name of the filler dialogue inside a recall corpus folder."""

MIN_PHRASINGS = 2
"""Fewest seed phrasings a planted fact must have (one wording lets pattern-matching pass)."""

MAX_SHARED_WORDS = 1
"""Most content words (reader.content_terms: stemmed, stop words removed) a probe may share with any
phrasing or correction of its fact."""

Text = Annotated[str, StringConstraints(min_length=1, max_length=2000, strip_whitespace=False)]
CaseKind = Literal["recall", "stale", "false-memory"]
CaseId = Annotated[str, StringConstraints(pattern=r"^[a-z0-9][a-z0-9-]{0,63}$")]


class RecallCase(ContractModel):
    """One probe and what is planted before it."""

    id: CaseId
    """Unique id: lowercase letters, digits and '-', at most 64 characters."""
    kind: CaseKind
    """`recall`, `stale` or `false-memory` (see the module docstring)."""
    probe: Text
    """The question asked after the filler."""
    phrasings: tuple[Text, ...] = ()
    """Alternative wordings of the planted fact (one is chosen per seed); empty for false-memory."""
    corrections: tuple[Text, ...] = ()
    """Alternative wordings of the correction (stale cases only)."""
    accept: tuple[StrictStr | StrictInt, ...] = ()
    """Values that make the answer right; empty for false-memory."""
    reject: tuple[StrictStr | StrictInt, ...] = ()
    """Stale values (stale cases) or plausible invented answers (false-memory); asserting one fails."""
    distractors: tuple[Text, ...] = ()
    """Facts planted in the same store that must not be answered: the same attribute of another
    person or thing, or (false-memory) other attributes of the probed entity."""

    @model_validator(mode="after")
    def _fields_fit_kind(self) -> RecallCase:
        planted = self.kind != "false-memory"
        if planted and len(self.phrasings) < MIN_PHRASINGS:
            raise ValueError(f"a {self.kind} case needs at least {MIN_PHRASINGS} phrasings; add more wordings of the fact")
        if planted and not self.accept:
            raise ValueError(f"a {self.kind} case needs 'accept': the values a right answer states")
        if not planted and (self.phrasings or self.accept or self.corrections):
            raise ValueError("a false-memory case plants nothing: remove 'phrasings', 'corrections' and 'accept'")
        if self.kind == "stale" and (len(self.corrections) < MIN_PHRASINGS or not self.reject):
            raise ValueError(f"a stale case needs at least {MIN_PHRASINGS} 'corrections' and the old value in 'reject'")
        if self.kind == "recall" and self.corrections:
            raise ValueError("a recall case has no corrections; make it a stale case or remove 'corrections'")
        for value in (*self.accept, *self.reject):
            if isinstance(value, bool) or not value_tokens(value):
                raise ValueError(f"value {value!r} in accept/reject has no word or number to match; give one")
        return self


class RecallCaseFile(Document):
    """The authored case list of a recall corpus."""

    KIND: ClassVar[str] = "recall cases file"

    cases: tuple[RecallCase, ...] = Field(min_length=1)
    """The cases, at least one."""


class FillerTurn(ContractModel):
    """One real dialogue turn used to bury a fact."""

    speaker: Literal["user", "assistant"]
    """Who says it."""
    text: Text
    """What is said."""


class FillerConversation(ContractModel):
    """A short conversation on one topic; its turns stay in order when filler is shuffled."""

    topic: Annotated[str, StringConstraints(min_length=1, max_length=100)]
    """What it is about (for reading the corpus; not used in scoring)."""
    turns: tuple[FillerTurn, ...] = Field(min_length=2)
    """The turns, in order."""


class FillerFile(Document):
    """The authored filler dialogue of a recall corpus."""

    KIND: ClassVar[str] = "recall filler file"

    conversations: tuple[FillerConversation, ...] = Field(min_length=1)
    """The conversations."""


def _case_violations(cases: Sequence[RecallCase], source: str) -> list[Violation]:
    problems: list[Violation] = []
    seen: set[str] = set()
    for i, case in enumerate(cases):
        where = f"cases[{i}]"
        if case.id in seen:
            problems.append(Violation(source, f"{where}.id", f"duplicate id {case.id!r}; give every case its own id"))
        seen.add(case.id)
        old_values = case.reject if case.kind == "stale" else ()
        for j, text in enumerate(case.phrasings):
            wanted = old_values or case.accept
            if not any(asserts(text, v) for v in wanted):
                problems.append(Violation(source, f"{where}.phrasings[{j}]", f"does not state any of {list(wanted)}; the planted fact must contain its value"))
        for j, text in enumerate(case.corrections):
            if not any(asserts(text, v) for v in case.accept) or any(asserts(text, v) for v in case.reject):
                problems.append(Violation(source, f"{where}.corrections[{j}]", f"must state one of {list(case.accept)} and assert none of {list(case.reject)}"))
        leaked = [v for v in (*case.accept, *case.reject) if asserts(case.probe, v)]
        if leaked:
            problems.append(Violation(source, f"{where}.probe", f"gives away {leaked}; the question must not contain the answer"))
        problems += _shared_word_violations(case, where, source)
        for j, text in enumerate(case.distractors):
            stated = [v for v in (*case.accept, *case.reject) if asserts(text, v)]
            if stated:
                problems.append(Violation(source, f"{where}.distractors[{j}]", f"states the case's own value {stated}; a distractor gives another thing's value"))
    return problems


def shared_words(probe: str, text: str) -> frozenset[str]:
    """The content words (stemmed, stop words removed) `probe` and `text` have in common."""
    return content_terms(probe) & content_terms(text)


def _shared_word_violations(case: RecallCase, where: str, source: str) -> list[Violation]:
    problems = []
    for field, texts in (("phrasings", case.phrasings), ("corrections", case.corrections)):
        for j, text in enumerate(texts):
            common = shared_words(case.probe, text)
            if len(common) > MAX_SHARED_WORDS:
                problems.append(Violation(
                    source, f"{where}.{field}[{j}]",
                    f"shares {len(common)} content words with the probe ({', '.join(sorted(common))}); at most "
                    f"{MAX_SHARED_WORDS} allowed: paraphrase the probe or the fact so recall is not word matching",
                ))
    return problems


def filler_violations(turns: Sequence[str], cases: Sequence[RecallCase], source: str, field: str) -> list[Violation]:
    """A violation for every filler turn that asserts a value of any case (it would plant or fake a fact)."""
    problems = []
    for i, text in enumerate(turns):
        said = tokens(text)
        clash = sorted({f"{c.id}:{v}" for c in cases for v in (*c.accept, *c.reject) if asserts(said, v)})
        if clash:
            problems.append(Violation(source, f"{field}[{i}]", f"states a case value ({', '.join(clash)}); reword the turn or drop it"))
    return problems


def load_cases(folder: Path) -> tuple[RecallCase, ...]:
    """The validated cases of `folder/cases.json`; raises ContractError with every violation."""
    path = folder / CASES_FILE
    document = load_document(path, RecallCaseFile)
    problems = _case_violations(document.cases, str(path))
    if problems:
        raise ContractError(problems)
    return document.cases


def load_filler(folder: Path, cases: Sequence[RecallCase]) -> tuple[FillerConversation, ...]:
    """The validated filler of `folder/filler.json`, checked against `cases`; raises ContractError."""
    path = folder / FILLER_FILE
    document = load_document(path, FillerFile)
    problems = []
    for i, conversation in enumerate(document.conversations):
        problems += filler_violations([t.text for t in conversation.turns], cases, str(path), f"conversations[{i}].turns")
    if problems:
        raise ContractError(problems)
    return document.conversations

