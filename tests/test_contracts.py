"""Contracts: strict models, portable paths, digest patterns, schema version first, clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import BaseModel

from tasks_lib import contracts
from tasks_lib.contracts import (
    ChallengeManifest,
    ContractModel,
    Document,
    TaskManifest,
    check_rel_path,
    dump_document,
    load_document,
    parse_document,
)
from tasks_lib.errors import ContractError

DIGEST = "a" * 64


def challenge(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schema_version": 1,
        "challenge_id": "rename-label",
        "prompt": "Rename the settings row.",
        "allowed_output_paths": ["src/settings.py", "tests"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": DIGEST}},
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    "path",
    ["a.txt", "src/a.py", ".claude/settings.json", "a/b/", "dir.with.dots/x"],
    ids=["file", "nested", "dotdir", "trailing-slash", "dots-in-name"],
)
def test_rel_path_accepts_portable_paths(path: str) -> None:
    assert check_rel_path(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("/etc/passwd", "absolute"),
        ("C:/Windows", "drive letter"),
        ("c:relative", "drive letter"),
        ("src\\a.py", "backslash"),
        ("../outside", "'..'"),
        ("a/../../b", "'..'"),
        ("", "empty"),
        ("   ", "empty"),
        (".", "only '.'"),
        ("./.", "only '.'"),
        ("a//b", "normal form"),
        ("./a", "normal form"),
    ],
    ids=["absolute", "drive", "drive-relative", "backslash", "dotdot", "dotdot-inner", "empty", "blank", "dot", "dot-dot-slash", "double-slash", "leading-dot"],
)
def test_rel_path_rejects_unportable_paths(path: str, reason: str) -> None:
    with pytest.raises(ValueError, match=reason):
        check_rel_path(path)


def test_valid_challenge_round_trips_through_json(tmp_path: Path) -> None:
    doc = parse_document(ChallengeManifest, challenge(), "challenge.json")
    target = tmp_path / "challenge.json"
    target.write_bytes(dump_document(doc))
    assert load_document(target) == doc


def test_unknown_field_is_rejected_with_file_and_field() -> None:
    with pytest.raises(ContractError) as caught:
        parse_document(ChallengeManifest, challenge(surprise=True), "tasks/x/challenge.json")
    assert str(caught.value) == "tasks/x/challenge.json: field 'surprise': unknown field; remove it or check its spelling"


def test_nested_unknown_field_names_the_dotted_path() -> None:
    bad = challenge(verifier={"runtime": "python", "asset": {"path": "v.py", "sha256": DIGEST, "mode": "x"}})
    with pytest.raises(ContractError, match=r"field 'verifier\.asset\.mode': unknown field"):
        parse_document(ChallengeManifest, bad, "c.json")


def test_wrong_digest_names_the_field_and_the_pattern() -> None:
    bad = challenge(verifier={"runtime": "python", "asset": {"path": "v.py", "sha256": "ABC"}})
    with pytest.raises(ContractError, match=r"field 'verifier\.asset\.sha256': 'ABC' does not match"):
        parse_document(ChallengeManifest, bad, "c.json")


def test_absolute_output_path_is_rejected() -> None:
    with pytest.raises(ContractError, match=r"field 'allowed_output_paths\.0': path '/workspace/src' is absolute"):
        parse_document(ChallengeManifest, challenge(allowed_output_paths=["/workspace/src"]), "c.json")


def test_schema_version_is_checked_before_any_other_field() -> None:
    """A future format fails with one line about the version, not a dozen about its fields."""
    with pytest.raises(ContractError) as caught:
        parse_document(ChallengeManifest, {"schema_version": 2, "whatever": 1}, "c.json")
    assert len(caught.value.violations) == 1
    assert "schema_version 2 is not supported" in str(caught.value)


def test_missing_schema_version_in_a_stored_document_is_an_error() -> None:
    data = challenge()
    del data["schema_version"]
    with pytest.raises(ContractError, match="field 'schema_version': missing"):
        parse_document(ChallengeManifest, data, "c.json")


def test_documents_are_frozen() -> None:
    doc = parse_document(ChallengeManifest, challenge(), "c.json")
    with pytest.raises(Exception, match="frozen"):
        doc.prompt = "changed"  # type: ignore[misc]


def test_bool_is_not_a_schema_version() -> None:
    with pytest.raises(ContractError, match="not supported"):
        parse_document(ChallengeManifest, challenge(schema_version=True), "c.json")


def test_task_needs_a_check_command_and_outputs() -> None:
    data = {
        "schema_version": 1,
        "task_id": "exit-code",
        "kind": "convention",
        "instruction": "Make the partial-delivery path exit with the right status.",
        "check_command": [],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": DIGEST}},
        "allowed_output_paths": [],
    }
    with pytest.raises(ContractError) as caught:
        parse_document(TaskManifest, data, "task.json")
    fields = {v.field for v in caught.value.violations}
    assert fields == {"check_command", "allowed_output_paths"}


def test_load_document_reports_invalid_json_with_position(tmp_path: Path) -> None:
    path = tmp_path / "task.json"
    path.write_text('{"schema_version": 1,,}')
    with pytest.raises(ContractError, match=r"task.json: document: invalid JSON at line 1 column 22"):
        load_document(path)


def test_load_document_refuses_an_unknown_file_name(tmp_path: Path) -> None:
    path = tmp_path / "mystery.json"
    path.write_text("{}")
    with pytest.raises(ContractError, match="cannot tell what kind of document"):
        load_document(path)


def test_load_document_rejects_a_top_level_array(tmp_path: Path) -> None:
    path = tmp_path / "challenge.json"
    path.write_text(json.dumps([challenge()]))
    with pytest.raises(ContractError, match="must be a JSON object, not list"):
        load_document(path)


def _all_models() -> list[type[BaseModel]]:
    return [
        value
        for value in vars(contracts).values()
        if isinstance(value, type) and issubclass(value, ContractModel) and value not in (ContractModel, Document)
    ]


@pytest.mark.parametrize("model", _all_models(), ids=lambda m: m.__name__)
def test_every_field_of_every_contract_is_documented(model: type[BaseModel]) -> None:
    undocumented = [name for name, field in model.model_fields.items() if not field.description]
    assert undocumented == [], f"{model.__name__} has undocumented fields {undocumented}"
    assert model.__doc__ and model.__doc__.strip()


@pytest.mark.parametrize("model", _all_models(), ids=lambda m: m.__name__)
def test_every_contract_forbids_extra_fields_and_is_frozen(model: type[BaseModel]) -> None:
    assert model.model_config.get("extra") == "forbid"
    assert model.model_config.get("frozen") is True


def _task(**overrides: object) -> dict[str, object]:
    data: dict[str, object] = {
        "schema_version": 1, "task_id": "retry-budget", "kind": "investigation",
        "instruction": "How many attempts does one event get?", "check_command": ["sh", "{verifier}"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": DIGEST}},
        "allowed_output_paths": ["answer.txt"], "answer_path": "answer.txt",
    }
    data.update(overrides)
    return data


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"answer_path": None}, "must declare answer_path"),
        ({"answer_path": "notes/answer.txt"}, "not inside allowed_output_paths"),
    ],
    ids=["investigation-without-answer-path", "answer-path-outside-outputs"],
)
def test_investigation_answer_path_is_declared_and_writable(overrides: dict[str, object], message: str) -> None:
    with pytest.raises(ContractError, match=message):
        parse_document(TaskManifest, _task(**overrides), "task.json")


def test_answer_path_inside_an_allowed_folder_is_fine() -> None:
    doc = parse_document(TaskManifest, _task(allowed_output_paths=["out/"], answer_path="out/answer.txt"), "task.json")
    assert doc.answer_path == "out/answer.txt"
