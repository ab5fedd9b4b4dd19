"""Publication test: a release is written only when every admission has a record, a manifest covers
every file, and no host path or secret-shaped string is in it; otherwise nothing is left behind."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from admission_fixtures import (
    HEAD,
    REPO,
    TASK_A,
    make_prereg,
    matrix,
    record,
    record_key_of,
    run_id,
    s3_store,
    store_records,
    task,
)
from flows.cli.main import main
from tasks_lib.analysis.admission import AdmissionError, admit_run
from tasks_lib.analysis.prereg import prereg_key
from tasks_lib.analysis.publish import (
    MANIFEST,
    PublishError,
    ReleaseManifest,
    check_release,
    publish_run,
)
from tasks_lib.arm.steps import run_matrix, schedule
from tasks_lib.artifacts import ArtifactStore, LocalStore, new_run_id, run_key
from tasks_lib.contracts import RunRecord, load_document
from tasks_lib.run.seal import seal_run
from tasks_lib.trees import sha256_file

RUN = run_id()


@pytest.fixture
def store(tmp_path: Path) -> LocalStore:
    return LocalStore(tmp_path / "artifacts")


def admitted_run(store: ArtifactStore, run: str = RUN) -> None:
    prereg = make_prereg(store)
    store_records(store, matrix(run))
    admit_run(store, run, prereg)


def leftovers(parent: Path) -> list[str]:
    return sorted(p.name for p in parent.iterdir() if ".partial-" in p.name)


def test_a_sound_run_is_released_with_a_manifest_covering_every_file(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    out = tmp_path / "release"
    result = publish_run(store, RUN, out)
    assert result.ok, result.problems
    manifest = load_document(out / MANIFEST, ReleaseManifest)
    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*") if p.is_file() and p.name != MANIFEST)
    assert [f.path for f in manifest.files] == files
    assert all(sha256_file(out / f.path) == f.sha256 for f in manifest.files)
    assert f"runs/{RUN}/admissions.parquet" in files and prereg_key("study", 1) in files
    assert len([f for f in files if f.endswith("record.json")]) == 8
    assert check_release(out) == [] and leftovers(tmp_path) == []


LEAKS = {
    "home": "/home/alice/project/notes.txt",
    "root": "cd /root/.cache && ls",
    "tmp": "wrote /tmp/memtrial-arm-x1/workspace/a.py",
    "macos": "/Users/bob/Library/x",
    "anthropic": "key sk-ant-" + "api03-" + "A" * 40,
    "openai": "OPENAI_API_KEY=sk-" + "proj-" + "b" * 40,
    "aws-id": "AKIA" + "ABCDEFGHIJKLMNOP",
    "aws-secret": "aws_secret_access_key = " + "w" * 40,
    "bearer": "Authorization: Bearer " + "eyJhbGciOiJIUzI1NiJ9.abcdefghijkl",
    "private-key": "-----BEGIN OPENSSH " + "PRIVATE KEY-----",
    "github": "ghp_" + "x" * 36,
}
KINDS = {"home": "host path", "root": "host path", "tmp": "host path", "macos": "host path",
         "anthropic": "Anthropic API key", "openai": "OpenAI-style API key", "aws-id": "AWS access key id",
         "aws-secret": "AWS secret access key", "bearer": "bearer token", "private-key": "private key block",
         "github": "GitHub token"}


@pytest.mark.parametrize("leak", list(LEAKS), ids=list(LEAKS))
def test_a_host_path_or_secret_in_a_transcript_refuses_the_release(store: LocalStore, tmp_path: Path, leak: str) -> None:
    admitted_run(store)
    transcript = record(TASK_A, "on", 1, RUN).transcript or ""
    store.put_bytes(transcript, json.dumps({"steps": [{"text": "ok"}, {"text": LEAKS[leak]}]}, indent=1).encode())
    seal_run(store, RUN)  # the agent wrote the leak during the run: it is part of the sealed evidence
    out = tmp_path / "release"
    result = publish_run(store, RUN, out)
    assert not result.ok and not out.exists() and leftovers(tmp_path) == []
    assert any(p.startswith(f"{transcript}: line ") and KINDS[leak] in p for p in result.problems), result.problems
    if leak in ("anthropic", "openai", "aws-secret", "github"):
        assert not any(LEAKS[leak].split()[-1] in p for p in result.problems), "a secret is never echoed whole"


def test_a_secret_inside_a_compressed_parquet_cell_is_found(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    rows = [r.model_dump(mode="json") for r in matrix(RUN)]
    rows[3]["failure_reason"] = "agent said: token " + "sk-ant-" + "z" * 30
    store.put_table(run_key(RUN, "records.parquet"), pa.Table.from_pylist(rows))
    store.put_json(record_key_of(matrix(RUN)[3]), RunRecord(**{k: v for k, v in rows[3].items() if v is not None}))  # the run wrote both
    seal_run(store, RUN)  # stored by the run itself, so sealed with it
    result = publish_run(store, RUN, tmp_path / "release")
    table_line = f"runs/{RUN}/records.parquet: row 3: secret-shaped string (Anthropic API key, starts 'sk-ant-'...)"
    record_line = next(p for p in result.problems if p != table_line)
    assert table_line in result.problems and len(result.problems) == 2, result.problems
    assert record_line.startswith(f"{record_key_of(matrix(RUN)[3])}: line ") and "Anthropic API key" in record_line


def test_the_artifact_roots_own_path_is_a_host_path(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    store.put_bytes(run_key(RUN, "notes.txt"), f"artifacts live in {store.root}/runs\n".encode())
    result = publish_run(store, RUN, tmp_path / "release", forbidden=())
    assert any(p.startswith(f"runs/{RUN}/notes.txt: line 1: host path {str(store.root)!r}") for p in result.problems), result.problems


def test_relative_paths_and_ordinary_words_are_not_host_paths(store: LocalStore, tmp_path: Path) -> None:
    """Regression: a gate that cries wolf on build/tmp/ or a 'bearer' in prose gets switched off."""
    admitted_run(store)
    store.put_bytes(run_key(RUN, "notes.txt"), b"build/tmp/out.o and src/home/view.py; the bearer of bad news; task-sk-ant\n"
                    b"/rootless and /work/root/x are not the home /root\n")
    result = publish_run(store, RUN, tmp_path / "release", forbidden=["/root"])
    assert result.problems == (f"runs/{RUN}/notes.txt: line 2: host path '/root' (this machine's artifact root or home)",)


def test_an_admission_without_a_durable_record_refuses_the_release(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    gone = record(TASK_A, "off", 1, RUN)
    store.delete(record_key_of(gone))
    seal_run(store, RUN)  # as if the record never reached the artifact root: the run sealed what it had
    result = publish_run(store, RUN, tmp_path / "release")
    assert result.problems == (f"runs/{RUN}/admissions.parquet: admitted {TASK_A}/off/1 has no durable record.json in the release",)


def test_a_record_without_a_decision_refuses_the_release(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    extra = record(TASK_A, "on", 5, RUN)
    store_records(store, [extra])
    result = publish_run(store, RUN, tmp_path / "release")
    assert result.problems == (f"{record_key_of(extra)}: record {TASK_A}/on/5 has no admission decision in runs/{RUN}/admissions.parquet",)


def test_a_decision_whose_preregistration_is_gone_refuses_the_release(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    store.delete(prereg_key("study", 1))
    result = publish_run(store, RUN, tmp_path / "release")
    assert any("no preregistration with digest" in p for p in result.problems)
    assert any("which is not in the release" in p for p in result.problems)


def test_a_run_without_decisions_cannot_be_published(store: LocalStore, tmp_path: Path) -> None:
    store_records(store, matrix(RUN))
    with pytest.raises(AdmissionError, match="has no admission decisions"):
        publish_run(store, RUN, tmp_path / "release")
    assert not (tmp_path / "release").exists()


def test_an_existing_destination_is_never_overwritten(store: LocalStore, tmp_path: Path) -> None:
    admitted_run(store)
    (tmp_path / "release").mkdir()
    with pytest.raises(PublishError, match="already exists"):
        publish_run(store, RUN, tmp_path / "release")


@pytest.fixture
def release(store: LocalStore, tmp_path: Path) -> Path:
    admitted_run(store)
    out = tmp_path / "release"
    assert publish_run(store, RUN, out).ok
    return out


def test_check_release_finds_a_changed_file(release: Path) -> None:
    target = release / "runs" / RUN / "admissions.parquet"
    target.write_bytes(target.read_bytes() + b"\0")
    assert f"runs/{RUN}/admissions.parquet: content differs from its sha256 in {MANIFEST}" in check_release(release)


def test_check_release_finds_an_uncovered_file_a_missing_file_and_a_symlink(release: Path) -> None:
    (release / "extra.txt").write_text("added after the manifest\n")
    gone = next(release.rglob("transcript.json"))
    gone.unlink()
    os.symlink("/etc/hostname", release / "link")
    problems = check_release(release)
    assert f"extra.txt: not covered by {MANIFEST}" in problems
    assert f"{gone.relative_to(release).as_posix()}: listed in {MANIFEST} but missing from the release" in problems
    assert "link: is a symlink; a release holds regular files only" in problems


def test_an_unreadable_parquet_file_fails_instead_of_going_unchecked(release: Path) -> None:
    """Regression: a table the scanner cannot read must not pass as clean."""
    target = release / "runs" / RUN / "admissions.parquet"
    target.write_bytes(b"not parquet " + b"sk-ant-" + b"q" * 30)
    problems = check_release(release)
    assert any(p.startswith(f"runs/{RUN}/admissions.parquet: cannot be read as Parquet") for p in problems), problems


def test_check_release_without_a_manifest_fails(release: Path) -> None:
    (release / MANIFEST).unlink()
    assert f"{MANIFEST}: missing; every release needs a manifest covering its files" in check_release(release)


def test_a_real_calibration_run_publishes_clean(store: LocalStore, tmp_path: Path) -> None:
    """End to end: the real arms' transcripts and receipts carry no host path, so the release passes."""
    prereg = make_prereg(store, model="calibration", tasks=[TASK_A], trials=1)
    rid = new_run_id("paired")
    run_matrix(schedule([task(TASK_A)], ["off", "on"], 1), run_id=rid, repo_root=REPO, commit=HEAD,
               tasks_subdir="corpora/tasks", agent_name="calibration", store=store)
    admit_run(store, rid, prereg)
    result = publish_run(store, rid, tmp_path / "release")
    assert result.ok, result.problems
    assert result.manifest is not None and sum(f.path.endswith("transcript.json") for f in result.manifest.files) == 2


def test_publish_from_s3(s3_env: str, tmp_path: Path) -> None:
    store = s3_store(s3_env)
    admitted_run(store)
    result = publish_run(store, RUN, tmp_path / "release")
    assert result.ok, result.problems
    assert (tmp_path / "release" / "runs" / RUN / "admissions.parquet").is_file()


def test_cli_publish_exits_1_with_one_line_per_problem(store: LocalStore, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    admitted_run(store)
    store.put_bytes(run_key(RUN, "notes.txt"), ("/home/alice/x\n" + "AKIA" + "QWERTYUIOPASDFGH\n").encode())
    assert main(["publish", RUN, "--out", str(tmp_path / "release"), "--artifacts", str(store.root)]) == 1
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        f"runs/{RUN}/notes.txt: line 1: host path '/home/alice/x'",
        f"runs/{RUN}/notes.txt: line 2: secret-shaped string (AWS access key id, starts 'AKIAQWE'...)",
    ]
    assert "nothing written" in captured.err and not (tmp_path / "release").exists()
    store.delete(run_key(RUN, "notes.txt"))
    assert main(["publish", RUN, "--out", str(tmp_path / "release"), "--artifacts", str(store.root), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
