"""Comparability key: digests pin what decides the question, and differing keys never share a view."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from admission_fixtures import AGENT, HEAD, REPO, TASK_A, TASK_B, record, task
from gitrepo import MakeRepo
from tasks_lib.arm.comparability import (
    IncomparableError,
    MissingKeyError,
    arm_memory_config_digest,
    comparison_key,
    manifest_digest,
    model_label,
    record_fields,
    record_key,
    require_same_key,
    source_commit_of,
    verifier_digest,
)
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import LocalStore, new_run_id
from tasks_lib.contracts import RunRecord, parse_document
from tasks_lib.corpus.tasks import load_task
from tasks_lib.memory import adapter_config as frozen
from tasks_lib.memory.provisioner.system import SYSTEM_ENV
from tasks_lib.run.provenance import load_provenance

SYSTEM_ARGV = ("python", "-m", "tasks_lib.memory.provisioner.system")


def copy_task(tmp_path: Path, task_id: str = TASK_A) -> Path:
    dest = tmp_path / task_id
    shutil.copytree(task(task_id).root, dest)
    return dest


def test_manifest_digest_is_sha256_of_canonical_json() -> None:
    manifest = task(TASK_A).manifest
    canonical = json.dumps(manifest.model_dump(mode="json"), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert manifest_digest(manifest) == hashlib.sha256(canonical.encode()).hexdigest()
    changed = manifest.model_copy(update={"instruction": manifest.instruction + " Please."})
    assert manifest_digest(changed) != manifest_digest(manifest)


def test_verifier_digest_moves_with_hidden_tests_and_check_command(tmp_path: Path) -> None:
    folder = copy_task(tmp_path)
    loaded = load_task(folder)
    before = verifier_digest(loaded.manifest, loaded.hidden_dir)
    assert before == verifier_digest(task(TASK_A).manifest, task(TASK_A).hidden_dir), "same bytes, same digest anywhere"
    hidden_file = next(p for p in loaded.hidden_dir.rglob("*") if p.is_file())
    hidden_file.write_text(hidden_file.read_text() + "\n# one more assertion\n")
    assert verifier_digest(loaded.manifest, loaded.hidden_dir) != before
    other_command = loaded.manifest.model_copy(update={"check_command": ("python", "-m", "pytest", "-x")})
    hidden_file.write_text(hidden_file.read_text().removesuffix("\n# one more assertion\n"))
    assert verifier_digest(loaded.manifest, loaded.hidden_dir) == before
    assert verifier_digest(other_command, loaded.hidden_dir) != before


def test_missing_hidden_folder_is_an_error_not_an_empty_digest(tmp_path: Path) -> None:
    with pytest.raises(MissingKeyError, match="hidden tests folder does not exist"):
        verifier_digest(task(TASK_A).manifest, tmp_path / "nowhere")


def test_source_commit_is_the_last_commit_that_changed_the_task() -> None:
    rel = task(TASK_A).root.relative_to(REPO).as_posix()
    expected = subprocess.run(["git", "-C", str(REPO), "rev-list", "-1", "HEAD", "--", rel], capture_output=True, text=True, check=True).stdout.strip()
    assert source_commit_of(task(TASK_A).root) == expected
    assert len(expected) == 40


def test_source_commit_ignores_unrelated_commits(make_repo: MakeRepo) -> None:
    repo, commit = make_repo({"tasks/t1/task.txt": "v1\n", "README": "hello\n"})
    first = source_commit_of(repo / "tasks" / "t1")
    assert first == commit
    (repo / "README").write_text("changed elsewhere\n")
    subprocess.run(["git", "-C", str(repo), "commit", "-qam", "unrelated"], check=True)
    assert source_commit_of(repo / "tasks" / "t1") == first


def test_untracked_task_has_no_source_commit(tmp_path: Path) -> None:
    assert source_commit_of(copy_task(tmp_path)) is None
    fields = record_fields(load_task(tmp_path / TASK_A), AGENT)
    assert fields["source_commit"] is None and fields["manifest_digest"] == manifest_digest(task(TASK_A).manifest)


def test_model_label() -> None:
    assert model_label("claude-code", "claude-sonnet-4-5") == "claude-code/claude-sonnet-4-5"
    assert model_label("calibration", None) == "calibration"


def test_records_stored_before_the_key_fields_still_load_but_cannot_be_compared() -> None:
    """Regression: adding the fields must not break reading old records, and an old record must not pass as comparable."""
    old = record(TASK_A, "on", 0, "run-old").model_dump(mode="json")
    for name in ("model", "manifest_digest", "verifier_digest", "prompts_digest", "source_commit", "memory_config_digest"):
        del old[name]
    loaded = parse_document(RunRecord, old, "record.json")
    assert loaded.model is None
    with pytest.raises(MissingKeyError, match="has no manifest_digest, memory_config_digest, model, source_commit, verifier_digest"):
        record_key(loaded)


def test_an_arm_with_memory_lacking_its_memory_config_is_incomparable_but_an_off_arm_is_not() -> None:
    """Fail closed: a record of an arm with memory made before memtrial recorded its memory config could
    have measured any system, so it joins no view; an `off` arm measured none, so it needs none."""
    old_on = record(TASK_A, "on", 0, "run-old").model_copy(update={"memory_config_digest": None})
    with pytest.raises(MissingKeyError, match="has no memory_config_digest"):
        record_key(old_on)
    with pytest.raises(MissingKeyError, match="has no memory_config_digest"):
        comparison_key([record(TASK_A, "off", 0, "run-old"), old_on], "run-old")
    off = record(TASK_A, "off", 0, "run-old")
    assert off.memory_config_digest is None and record_key(off).memory_config_digest is None


def system_config(system: str, embedder: str = "hashed") -> str | None:
    """An `on` arm's memory config through the bundled system provisioner, as `run_matrix` computes it."""
    return arm_memory_config_digest("on", embedder, SYSTEM_ARGV, {SYSTEM_ENV: system})


def test_records_of_different_adapter_configs_cannot_share_a_view() -> None:
    """Regression: chroma as shipped and memtrial's keyword variant over Chroma's storage had the same key,
    so their pass rates could share one trend line or compare view as if one question."""
    chroma, variant = system_config("chroma"), system_config("chroma+memtrial-keyword")
    assert chroma and variant and chroma != variant
    a = comparison_key([record(TASK_A, "off", 0, "run-a"), record(TASK_A, "on", 0, "run-a", memory_config_digest=chroma)], "run-a")
    b = comparison_key([record(TASK_A, "off", 0, "run-b"), record(TASK_A, "on", 0, "run-b", memory_config_digest=variant)], "run-b")
    assert a.memory_config_digest == chroma, "the off arm takes its run's memory config"
    with pytest.raises(IncomparableError) as caught:
        require_same_key([("run-a", a), ("run-b", b)])
    assert str(caught.value).endswith(f"memory_config_digest: {chroma} != {variant}")


def test_a_changed_adapter_setting_or_embedder_splits_a_view(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same system with a setting edited, or opened with another embedder, is another configuration."""
    base = system_config("lancedb")
    assert system_config("lancedb", "minilm") != base
    monkeypatch.setitem(frozen.SETTINGS, "lancedb", {**frozen.SETTINGS["lancedb"], "fusion": "linear"})
    edited = system_config("lancedb")
    assert edited != base
    with pytest.raises(IncomparableError, match="memory_config_digest"):
        require_same_key([("a", record_key(record(TASK_A, "on", 0, "a", memory_config_digest=base))),
                          ("b", record_key(record(TASK_A, "on", 0, "b", memory_config_digest=edited)))])


def test_one_run_with_two_memory_configs_for_a_task_is_refused() -> None:
    """Two arms with memory of one task must measure one configuration (an ablation is the same system)."""
    records = [record(TASK_A, "on", 0, "run-a"), record(TASK_A, "ablate:keyword", 0, "run-a", memory_config_digest=system_config("mem0"))]
    with pytest.raises(IncomparableError, match=f"memory_config_digest: {records[0].memory_config_digest} != "):
        comparison_key(records, "run-a")
    assert comparison_key([record(TASK_A, "off", 0, "run-a"), record(TASK_A, "off", 1, "run-a")], "run-a").memory_config_digest is None


def test_different_keys_are_refused_naming_every_field_and_both_values() -> None:
    a = record_key(record(TASK_A, "on", 0, "run-a"))
    b = record_key(record(TASK_A, "on", 0, "run-b", model="claude-code/opus", verifier_digest="e" * 64))
    with pytest.raises(IncomparableError) as caught:
        require_same_key([("run-a", a), ("run-b", b)])
    message = str(caught.value)
    assert "run-a and run-b" in message
    assert f"model: {AGENT} != claude-code/opus" in message
    assert f"verifier_digest: {a.verifier_digest} != {'e' * 64}" in message
    assert "manifest_digest" not in message


@pytest.mark.parametrize(
    ("field", "value"),
    [("task_id", TASK_B), ("corpus_id", "d" * 64), ("manifest_digest", "1" * 64), ("source_commit", "2" * 40)],
    ids=["challenge", "fixture", "manifest", "source-commit"],
)
def test_each_key_field_splits_a_view(field: str, value: str) -> None:
    base = record(TASK_A, "on", 0, "run-a")
    other = base.model_copy(update={field: value})
    with pytest.raises(IncomparableError):
        require_same_key([("a", record_key(base)), ("b", record_key(other))])


def test_build_under_test_is_not_in_the_key() -> None:
    """The build is what a trend should show; putting it in the key would make every build its own island."""
    a = record_key(record(TASK_A, "on", 0, "run-a", build_under_test="mem/1.0"))
    b = record_key(record(TASK_A, "on", 0, "run-b", build_under_test="mem/2.0"))
    assert require_same_key([("a", a), ("b", b)]) == a


def test_one_run_with_two_models_for_a_task_is_refused() -> None:
    records = [record(TASK_A, "off", 0, "run-a"), record(TASK_A, "on", 0, "run-a", model="other/model")]
    with pytest.raises(IncomparableError, match="model: scripted != other/model"):
        comparison_key(records, "run-a")
    key = comparison_key([record(TASK_A, c, 0, "run-a") for c in ("on", "off")], "run-a")
    assert key.conditions == ("off", "on")


def test_the_arms_record_the_key_fields(tmp_path: Path) -> None:
    """A real calibration run: every record carries the key computed from its task folder."""
    rid = new_run_id("paired")
    plan = schedule([task(TASK_A)], ["off", "on"], 1)
    records = run_matrix(plan, run_id=rid, repo_root=REPO, commit=HEAD, tasks_subdir="corpora/tasks",
                         agent_name="calibration", store=LocalStore(tmp_path / "artifacts"))
    expected = record_fields(task(TASK_A), "calibration")
    assert all(expected.items() <= r.model_dump().items() for r in records)
    assert all(v is not None for v in expected.values())
    key = comparison_key(records, rid)
    assert key.model == "calibration" and key.conditions == ("off", "on") and key.fixture == records[0].corpus_id
    provenance = load_provenance(LocalStore(tmp_path / "artifacts"), rid)
    assert provenance is not None and provenance.adapter_config is not None
    by = {r.condition: r for r in records}
    assert by["off"].memory_config_digest is None
    assert by["on"].memory_config_digest == key.memory_config_digest == provenance.memory_config_digest
