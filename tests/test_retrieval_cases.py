"""The retrieval case contract: the bundled set is sound, and every broken case file is refused by file and field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tasks_lib.errors import ContractError
from tasks_lib.suites.retrieval.cases import (
    GRAPH_CLASSES,
    load_case_set,
    load_group,
    shared_wording,
)
from tasks_lib.suites.retrieval.gates import RetrievalGates, load_gates
from tasks_lib.suites.retrieval.suite import bundled_cases


def group(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "schema_version": 1,
        "group": "g",
        "description": "a test group",
        "memories": [{"key": "peanuts", "text": "I am allergic to peanuts."}, {"key": "city", "text": "Anna lives in Lisbon."}],
        "cases": [{"id": "c1", "class": "direct", "question": "Where does Anna live?", "relevant": ["city"], "automatic": "inject"}],
    }
    base.update(overrides)
    return base


def write(folder: Path, name: str, data: dict[str, Any]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(json.dumps(data))
    return path


def test_bundled_sets_meet_the_seed_minimums() -> None:
    """The fast suite carries >= 6 canonical direct-fact and >= 6 ambiguous probes; the calibration >= 10 of each kind."""
    cases, graph, policy = bundled_cases()
    pairs = [c for _, c in cases.cases()]
    assert sum(c.automatic == "inject" for c in pairs) >= RetrievalGates().direct_probes_min
    assert sum(c.case_class == "ambiguous-binding" for c in pairs) >= RetrievalGates().ambiguous_probes_min
    classes = {c.case_class for c in pairs}
    assert {"direct", "paraphrase", "update", "temporal", "noise", "alternating", "duplicate", "entity-hop",
            "out-of-domain", "missing-attribute", "ambiguous-binding"} <= classes
    assert sum(c.case_class == "paraphrase" for c in pairs) == 12
    graph_pairs = [c for _, c in graph.cases()]
    assert sum(c.case_class == "multi-hop" for c in graph_pairs) >= 10
    assert sum(c.case_class == "direct" for c in graph_pairs) >= 10
    assert sum(c.case_class == "adversarial" for c in graph_pairs) >= 1
    assert len(cases.background) >= 30 and len(policy.probes) >= 10


def test_no_bundled_paraphrase_repeats_its_fact() -> None:
    cases, _, _ = bundled_cases()
    for g, c in cases.cases():
        if c.case_class == "paraphrase":
            text = {m.key: m.text for m in g.memories}
            for key in c.relevant:
                assert not shared_wording(c.question, text[key]), c.id


BAD = [
    ("paraphrase-repeats-wording",
     {"cases": [{"id": "p", "class": "paraphrase", "question": "Which peanuts am I allergic to?", "relevant": ["peanuts"]}]},
     "cases[0].question", "repeats the wording"),
    ("unknown-relevant-key",
     {"cases": [{"id": "c", "class": "direct", "question": "Where?", "relevant": ["nope"]}]}, "cases[0].relevant", "not a memory key"),
    ("duplicate-memory-key",
     {"memories": [{"key": "a", "text": "x"}, {"key": "a", "text": "y"}]}, "memories[1].key", "repeats memories[0]"),
    ("unanswerable-with-answer",
     {"cases": [{"id": "c", "class": "out-of-domain", "question": "Capital of Peru?", "relevant": ["city"], "automatic": "abstain"}]},
     "cases[0].relevant", "no stored answer"),
    ("ambiguous-without-abstain",
     {"cases": [{"id": "c", "class": "ambiguous-binding", "question": "Who?", "automatic": "informational"}]},
     "cases[0].automatic", "must expect \"abstain\""),
    ("update-without-stale",
     {"cases": [{"id": "c", "class": "update", "question": "Where does Anna live?", "relevant": ["city"]}]}, "cases[0].stale", "outdated memory"),
    ("supersedes-later-memory",
     {"memories": [{"key": "a", "text": "x", "supersedes": ["b"]}, {"key": "b", "text": "y"}]}, "memories[0].supersedes", "not an earlier memory"),
    ("inject-on-paraphrase",
     {"cases": [{"id": "c", "class": "paraphrase", "question": "Which city is home to Anna?", "relevant": ["city"], "automatic": "inject"}]},
     "cases[0].automatic", "only canonical direct facts"),
    ("unknown-field", {"colour": "red"}, "colour", "unknown field"),
    ("answerable-without-answer",
     {"cases": [{"id": "c", "class": "temporal", "question": "When?"}]}, "cases[0].relevant", "at least one relevant"),
    ("class-not-in-set",
     {"cases": [{"id": "c", "class": "multi-hop", "question": "Which country?", "relevant": ["city"]}]}, "cases[0].class", "not allowed"),
]


@pytest.mark.parametrize(("data", "field", "problem"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
def test_broken_case_files_are_refused_with_file_and_field(tmp_path: Path, data: dict[str, Any], field: str, problem: str) -> None:
    path = write(tmp_path, "g.json", group(**data))
    with pytest.raises(ContractError) as caught:
        load_group(path)
    hits = [v for v in caught.value.violations if v.field == field]
    assert hits, str(caught.value)
    assert problem in hits[0].problem and hits[0].source == str(path)


def test_multi_hop_target_must_not_share_words_with_the_question(tmp_path: Path) -> None:
    data = group(
        memories=[{"key": "bridge", "text": "Ravi works at Infosys."}, {"key": "target", "text": "Infosys is based in Pune."}],
        cases=[{"id": "h", "class": "multi-hop", "question": "Where is Ravi's company based?", "relevant": ["target"]}],
    )
    with pytest.raises(ContractError, match=r"cases\[0\].question.*based"):
        load_group(write(tmp_path, "g.json", data), GRAPH_CLASSES)


def test_invalid_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "g.json"
    path.write_text('{"schema_version": 1,\n  "group": }')
    with pytest.raises(ContractError, match=r"g.json.*line 2 column"):
        load_group(path)


def test_case_ids_are_unique_across_files_and_digest_tracks_content(tmp_path: Path) -> None:
    write(tmp_path / "set", "a.json", group(group="a"))
    write(tmp_path / "set", "b.json", group(group="b"))
    with pytest.raises(ContractError, match="case id 'c1' is also used"):
        load_case_set(tmp_path / "set")
    write(tmp_path / "ok", "a.json", group(group="a"))
    first = load_case_set(tmp_path / "ok").digest
    write(tmp_path / "ok", "a.json", group(group="a", description="changed"))
    assert load_case_set(tmp_path / "ok").digest != first


def test_an_empty_case_folder_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ContractError, match="holds no"):
        load_case_set(tmp_path)


def test_gates_file_overrides_and_rejects_unknown_fields(tmp_path: Path) -> None:
    good = write(tmp_path, "gates.json", {"schema_version": 1, "recall_at_5_min": 0.5})
    gates = load_gates(good)
    assert gates.recall_at_5_min == 0.5 and gates.mrr_min == 0.8
    bad = write(tmp_path, "bad.json", {"schema_version": 1, "recall_at_5": 0.5})
    with pytest.raises(ContractError, match=r"bad.json: field 'recall_at_5': unknown field"):
        load_gates(bad)
    out_of_range = write(tmp_path, "range.json", {"schema_version": 1, "mrr_min": 1.5})
    with pytest.raises(ContractError, match="mrr_min"):
        load_gates(out_of_range)
