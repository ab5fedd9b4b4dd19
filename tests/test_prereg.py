"""Preregistration: one digest over prompts, verifier, model, budget and analysis; frozen, versioned, checked."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from admission_fixtures import (
    AGENT,
    FROZEN_AT,
    TASK_A,
    TASK_B,
    make_prereg,
    record,
    task,
)
from flows.cli.main import main
from tasks_lib.analysis.prereg import (
    PreregError,
    Preregistration,
    find_by_digest,
    freeze_task,
    load_prereg,
    prereg_digest,
    prereg_key,
    record_mismatches,
)
from tasks_lib.artifacts import LocalStore
from tasks_lib.contracts import ContractError, parse_document
from tasks_lib.corpus.tasks import load_task


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "artifacts")


def test_digest_is_sha256_of_the_stored_documents_canonical_json(store: LocalStore) -> None:
    prereg = make_prereg(store)
    stored = json.loads((store.root / prereg_key("study", 1)).read_text())
    canonical = json.dumps(stored, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert prereg_digest(prereg) == hashlib.sha256(canonical).hexdigest()
    assert stored["tasks"][0]["prompts_digest"] == freeze_task(task(TASK_A)).prompts_digest
    assert stored["model"] == AGENT and stored["budget_usd"] == 1.0 and stored["analysis"]["trials"] == 2
    assert load_prereg(store, "study") == prereg == load_prereg(store, "study@v1")
    assert find_by_digest(store, prereg_digest(prereg)) == (prereg_key("study", 1), prereg)


def test_a_preregistration_cannot_be_changed_in_place(store: LocalStore) -> None:
    make_prereg(store)
    with pytest.raises(PreregError, match="exists \\(v1\\); it cannot be changed"):
        make_prereg(store, budget_usd=2.0)


def test_correction_makes_a_new_version_that_names_what_it_supersedes(store: LocalStore) -> None:
    first = make_prereg(store)
    second = make_prereg(store, correction="allowlist Cargo.lock: the toolchain writes it")
    assert second.version == 2 and second.supersedes == prereg_digest(first)
    assert load_prereg(store, "study") == second and load_prereg(store, "study@v1") == first
    with pytest.raises(PreregError, match="has v1, v2"):
        load_prereg(store, "study@v3")


def test_correction_of_nothing_is_refused(store: LocalStore) -> None:
    with pytest.raises(PreregError, match="does not exist yet"):
        make_prereg(store, correction="why")


def test_unknown_preregistration_says_how_to_create_it(store: LocalStore) -> None:
    with pytest.raises(PreregError, match="no preregistration named 'nope'"):
        load_prereg(store, "nope")


def test_an_uncommitted_task_cannot_be_frozen(tmp_path: Path) -> None:
    shutil.copytree(task(TASK_A).root, tmp_path / TASK_A)
    with pytest.raises(PreregError, match="is not committed to git"):
        freeze_task(load_task(tmp_path / TASK_A))


def test_contract_ties_correction_to_later_versions(store: LocalStore) -> None:
    data = make_prereg(store).model_dump(mode="json")
    data["version"] = 2
    with pytest.raises(ContractError, match="a later version must give both"):
        parse_document(Preregistration, data, "v2.json")


def test_matching_record_has_no_mismatch(store: LocalStore) -> None:
    assert record_mismatches(make_prereg(store), record(TASK_A, "on", 1, "r")) == []


@pytest.mark.parametrize(
    ("overrides", "expected"),
    [
        ({"task_id": "rotlog-keep-count"}, "task rotlog-keep-count is not preregistered"),
        ({"model": "claude-code/opus"}, "model: ran 'claude-code/opus', preregistered 'scripted'"),
        ({"condition": "ablate:all"}, "condition 'ablate:all' is not in the preregistered off, on"),
        ({"trial": 2}, "trial 2 is beyond the preregistered 2 trial(s)"),
        ({"prompts_digest": "1" * 64}, "prompt: ran 111111111111"),
        ({"manifest_digest": "2" * 64}, "manifest: ran 222222222222"),
        ({"verifier_digest": "3" * 64}, "verifier: ran 333333333333"),
        ({"source_commit": "4" * 40}, "source commit: ran 444444444444"),
        ({"verifier_digest": None}, "verifier: ran none"),
    ],
    ids=["task", "model", "condition", "trial", "prompt", "manifest", "verifier", "source-commit", "unrecorded"],
)
def test_each_differing_input_is_named(store: LocalStore, overrides: dict[str, object], expected: str) -> None:
    mismatches = record_mismatches(make_prereg(store), record(TASK_A, "on", 0, "r").model_copy(update=overrides))
    assert len(mismatches) == 1 and mismatches[0].startswith(expected), mismatches


def test_cli_prereg_and_its_refusal(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(tmp_path / "artifacts")
    args = ["prereg", "cli-study", "--tasks", f"{TASK_A},{TASK_B}", "--agent", "claude-code", "--model", "claude-sonnet-4-5",
            "--budget-usd", "5", "--primary", "pass rate on vs off", "--trials", "3", "--artifacts", root, "--json"]
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    stored = load_prereg(LocalStore(Path(root)), "cli-study")
    assert payload["digest"] == prereg_digest(stored) and payload["version"] == 1
    assert stored.model == "claude-code/claude-sonnet-4-5" and stored.analysis.trials == 3
    assert stored.created_at > FROZEN_AT
    assert main(args) == 2
    assert "cannot be changed" in capsys.readouterr().err
    assert main([*args[:-1], "--conditions", "off,ablate:nolane"]) == 2
    assert "ablate:nolane" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Bad Name"], "study name 'Bad Name' is not allowed"),
        (["ok", "--budget-usd", "0"], "field 'budget_usd': Input should be greater than 0"),
        (["ok", "--trials", "0"], "field 'analysis.trials': Input should be greater than or equal to 1"),
        (["ok", "--tasks", "no-such-task"], "unknown task(s) no-such-task"),
    ],
    ids=["bad-name", "zero-budget", "zero-trials", "unknown-task"],
)
def test_cli_prereg_bad_input_is_one_line_naming_the_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    base = {"--tasks": TASK_A, "--agent": "scripted", "--budget-usd": "1", "--primary": "p", "--trials": "1"}
    for flag, value in zip(args[1::2], args[2::2]):
        base[flag] = value
    argv = ["prereg", args[0], *[x for pair in base.items() for x in pair], "--artifacts", str(tmp_path / "a")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("memtrial: error: ") and message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "a" / "preregistrations").exists()
