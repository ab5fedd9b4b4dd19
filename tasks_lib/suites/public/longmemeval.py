"""LongMemEval (xiaowu0162/LongMemEval) records as evaluation groups, one per record.

As upstream's retrieval evaluation does at turn granularity, the corpus is the record's haystack
turns with roles in `roles` (default: user turns only, upstream's setting; `("user",
"assistant")` indexes both). A turn's id is `<session id>_<turn number from 1>`, its speaker its
role, its timestamp its session's haystack date. Relevant turns are the indexed turns with
`has_answer` in an answer session. The official session level reads sessions as upstream does
(`metrics.official_sessions`): every other turn of an answer session is read as a `noans`
session, so a relevant session is retrieved only through one of its relevant turns. Quirk rules, each counted in
`LONGMEMEVAL_RULES`, are applied in this order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tasks_lib.memory.adapter import MAX_TEXT_BYTES
from tasks_lib.suites.public.groups import (
    DatasetError,
    EvalGroup,
    EvalQuestion,
    EvalTurn,
    QuirkLog,
    read_json_list,
    storable_text,
)

ROLES: tuple[str, ...] = ("user", "assistant")
"""Turn roles a record may hold."""

LONGMEMEVAL_RULES: dict[str, str] = {
    "duplicate_question_id": "a question_id seen earlier (in this or an earlier file) is skipped",
    "abstention_skipped": "a question_id ending in _abs (abstention: nothing to retrieve; upstream leaves it out of its averages)",
    "answer_integer": "an answer given as a number (kept as text; retrieval does not use answers)",
    "haystack_lists_unequal": "haystack_session_ids, haystack_dates and haystack_sessions differ in length: record skipped",
    "answer_session_not_in_haystack": "an answer_session_id that names no haystack session: record skipped",
    "role_not_indexed": "a turn whose role is not indexed (default: assistant turns, as upstream)",
    "role_unknown": "a turn whose role is neither user nor assistant: not indexed",
    "has_answer_missing": "a turn without has_answer (as in the _s and _m splits): read as false",
    "has_answer_outside_answer_session": "a has_answer turn in a session not in answer_session_ids: not relevant",
    "empty_turn_skipped": "a turn with empty content is not indexed",
    "turn_text_truncated": f"a turn longer than {MAX_TEXT_BYTES} UTF-8 bytes is cut to that size",
    "no_relevant_turn_skipped": (
        "no indexed turn is relevant (e.g. single-session-assistant questions with user turns only): not scored; "
        "upstream would average it in as recall_any 0, recall_all 1, ndcg 0"
    ),
}
"""Every LongMemEval quirk rule, by name."""

_FIELDS = ("question_id", "question_type", "question", "haystack_dates", "haystack_session_ids", "haystack_sessions", "answer_session_ids")


def _record(rec: Any, where: str, roles: Sequence[str], log: QuirkLog) -> EvalGroup | None:
    if not isinstance(rec, dict):
        raise DatasetError(f"{where}: not an object; give a LongMemEval file")
    for key in _FIELDS:
        if key not in rec:
            raise DatasetError(f"{where}: field {key!r} is missing; is this a LongMemEval file?")
    qid = str(rec["question_id"])
    if "answer" in rec and not isinstance(rec["answer"], str):
        log.hit("answer_integer")
    sids, dates, sessions = rec["haystack_session_ids"], rec["haystack_dates"], rec["haystack_sessions"]
    if not (len(sids) == len(dates) == len(sessions)):
        log.hit("haystack_lists_unequal")
        return None
    answer_sessions = {str(s) for s in rec["answer_session_ids"]}
    if answer_sessions - {str(s) for s in sids}:
        log.hit("answer_session_not_in_haystack")
        return None
    turns, relevant = [], set()
    for sid, date, session in zip(sids, dates, sessions):
        for i, t in enumerate(session):
            role = t.get("role")
            if role not in ROLES:
                log.hit("role_unknown")
                continue
            if role not in roles:
                log.hit("role_not_indexed")
                continue
            if "has_answer" not in t:
                log.hit("has_answer_missing")
            text = storable_text(str(t.get("content") or ""), log)
            if text is None:
                continue
            turn_id = f"{sid}_{i + 1}"
            if t.get("has_answer") is True and str(sid) in answer_sessions:
                relevant.add(turn_id)
            elif t.get("has_answer") is True:
                log.hit("has_answer_outside_answer_session")
            turns.append(EvalTurn(turn_id, str(sid), role, text, str(date) or None))
    if not relevant:
        log.hit("no_relevant_turn_skipped")
        return None
    question = EvalQuestion(qid, str(rec["question_type"]), str(rec["question"]), frozenset(relevant))
    return EvalGroup(qid, tuple(turns), (question,))


def load_longmemeval(
    paths: Sequence[Path], roles: Sequence[str] = ("user",), limit: int | None = None
) -> tuple[list[EvalGroup], QuirkLog]:
    """The scored records of `paths` (in order, the first `limit` scored ones) as groups, and the quirk counts.

    Raises DatasetError naming the file, record and field when a file is not LongMemEval-shaped,
    and for a role that does not exist.
    """
    bad = [r for r in roles if r not in ROLES]
    if bad or not roles:
        raise DatasetError(f"roles: {bad or 'none'} given; index one or both of {', '.join(ROLES)}")
    log = QuirkLog(LONGMEMEVAL_RULES)
    seen: set[str] = set()
    groups: list[EvalGroup] = []
    for path in paths:
        for index, rec in enumerate(read_json_list(path, "records", "give a LongMemEval file (e.g. longmemeval_oracle.json)")):
            if limit is not None and len(groups) >= limit:
                return groups, log
            where = f"{path}[{index}]"
            qid = str(rec.get("question_id")) if isinstance(rec, dict) else ""
            if qid in seen:
                log.hit("duplicate_question_id")
                continue
            seen.add(qid)
            if qid.endswith("_abs"):
                log.hit("abstention_skipped")
                continue
            group = _record(rec, where, roles, log)
            if group is not None:
                groups.append(group)
    return groups, log
