"""Artifact store: the same behaviour on a local folder and on a real S3-compatible server on 127.0.0.1."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import boto3
import pandas as pd
import pyarrow as pa
import pytest

from tasks_lib import artifacts
from tasks_lib.artifacts import ArtifactStore, LocalStore, S3Settings, S3Store, open_store, run_key
from tasks_lib.contracts import ChallengeManifest, ContractError, RunRecord, parse_document
from tasks_lib.errors import ArtifactError, ArtifactNotFound
from tasks_lib.trees import write_atomically

RECORD = {
    "schema_version": 1,
    "run_id": "run-1",
    "task_id": "logship-partial-exit",
    "condition": "on",
    "trial": 0,
    "outcome": "pass",
    "input_tokens": 1200,
    "output_tokens": 300,
    "cost_usd": 0.01,
    "wall_seconds": 12.5,
    "injection": "yes",
    "injection_channel": "prompt-time",
    "build_under_test": "reference@0.1.0",
}

_bucket_counter = iter(range(10_000))


@pytest.fixture(params=["local", "s3"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ArtifactStore]:
    if request.param == "local":
        yield LocalStore(tmp_path / "artifacts")
        return
    request.getfixturevalue("s3_env")
    bucket = f"memtrial-test-{next(_bucket_counter)}"
    boto3.client("s3", endpoint_url=S3Settings.from_env().endpoint_url, region_name="us-east-1").create_bucket(Bucket=bucket)
    yield open_store(f"s3://{bucket}/team/prefix")


def test_bytes_round_trip_and_overwrite(store: ArtifactStore) -> None:
    store.put_bytes("runs/r1/a.txt", b"first")
    store.put_bytes("runs/r1/a.txt", b"second")
    assert store.get_bytes("runs/r1/a.txt") == b"second"
    assert store.exists("runs/r1/a.txt")
    assert not store.exists("runs/r1/b.txt")


def test_missing_object_is_a_named_error(store: ArtifactStore) -> None:
    with pytest.raises(ArtifactNotFound, match="runs/none/x.json: no such artifact"):
        store.get_bytes("runs/none/x.json")


def test_list_keys_is_sorted_and_scoped(store: ArtifactStore) -> None:
    for key in ("runs/b/1.json", "runs/a/2.json", "runs/a/1.json", "other/x"):
        store.put_bytes(key, b"x")
    assert store.list_keys("runs/a") == ["runs/a/1.json", "runs/a/2.json"]
    assert store.list_keys("runs") == ["runs/a/1.json", "runs/a/2.json", "runs/b/1.json"]
    assert store.list_keys("nothing") == []


def test_documents_are_validated_on_the_way_back(store: ArtifactStore) -> None:
    record = parse_document(RunRecord, RECORD, "record.json")
    store.put_json(run_key("run-1", "records", "0.json"), record)
    assert store.get_json("runs/run-1/records/0.json", RunRecord) == record
    store.put_bytes("runs/run-1/bad.json", b'{"schema_version": 1, "run_id": "run-1"}')
    with pytest.raises(ContractError, match=r"runs/run-1/bad.json: field 'task_id': required field is missing"):
        store.get_json("runs/run-1/bad.json", RunRecord)
    with pytest.raises(ContractError, match="challenge manifest"):
        store.get_json("runs/run-1/records/0.json", ChallengeManifest)


def test_parquet_tables_read_back_with_pandas(store: ArtifactStore) -> None:
    frame = pd.DataFrame([RECORD, {**RECORD, "condition": "off", "outcome": "fail", "injection": "no"}])
    store.put_table("runs/run-1/records.parquet", pa.Table.from_pandas(frame, preserve_index=False))
    back = store.get_table("runs/run-1/records.parquet").to_pandas()
    pd.testing.assert_frame_equal(back, frame)
    store.put_bytes("runs/run-1/broken.parquet", b"not parquet")
    with pytest.raises(ArtifactError, match="not a readable Parquet table"):
        store.get_table("runs/run-1/broken.parquet")


def test_blobs_are_content_addressed(store: ArtifactStore) -> None:
    key = store.put_blob(b"transcript bytes")
    assert key.startswith("blobs/sha256/")
    assert store.put_blob(b"transcript bytes") == key
    assert store.get_bytes(key) == b"transcript bytes"


@pytest.mark.parametrize(
    "key",
    ["/etc/passwd", "runs/../../x", "runs\\x", "", "runs/r1/"],
    ids=["absolute", "dotdot", "backslash", "empty", "folder"],
)
def test_bad_keys_are_refused(store: ArtifactStore, key: str) -> None:
    with pytest.raises(ArtifactError, match="artifact key"):
        store.put_bytes(key, b"x")


def test_local_write_failure_leaves_no_partial_and_keeps_the_old_object(tmp_path: Path) -> None:
    store = LocalStore(tmp_path)
    store.put_bytes("runs/r/x.json", b"old")
    (tmp_path / "runs/r/dir.json").mkdir()
    with pytest.raises(ArtifactError, match="cannot write artifact"):
        store.put_bytes("runs/r/dir.json", b"new")
    assert store.get_bytes("runs/r/x.json") == b"old"
    assert sorted(p.name for p in (tmp_path / "runs/r").iterdir()) == ["dir.json", "x.json"]


def test_atomic_file_write_failure_names_the_file_and_leaves_no_partial(tmp_path: Path) -> None:
    """A failed write (here: a folder stands at the path) is one error naming the file and the fix, and no temp sibling stays."""
    target = tmp_path / "out" / "report.json"
    target.mkdir(parents=True)
    with pytest.raises(ArtifactError, match=f"{target}: cannot write the report .*; check that {target.parent} is writable"):
        write_atomically(target, b"new", "the report")
    assert [p.name for p in target.parent.iterdir()] == ["report.json"]


def test_atomic_file_write_is_not_owner_only(tmp_path: Path) -> None:
    """The retrieval report and the trend PNG went through mkstemp, so they came out 0600; the umask decides now."""
    path = tmp_path / "plots" / "trend.png"
    previous = os.umask(0o022)
    try:
        write_atomically(path, b"old")
        write_atomically(path, b"new")
    finally:
        os.umask(previous)
    assert path.read_bytes() == b"new"
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert [p.name for p in path.parent.iterdir()] == ["trend.png"]


def test_local_partial_files_are_never_listed(tmp_path: Path) -> None:
    """A crash between write and rename leaves a temp file that no reader takes as complete."""
    store = LocalStore(tmp_path)
    store.put_bytes("runs/r/done.json", b"{}")
    (tmp_path / "runs/r/.record.json.partial-1234abcd").write_bytes(b"{half")
    assert store.list_keys("runs") == ["runs/r/done.json"]
    assert not store.exists("runs/r/record.json")


def test_s3_large_objects_go_through_a_completed_multipart_upload(s3_env: str, monkeypatch: pytest.MonkeyPatch) -> None:
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket="multipart")
    monkeypatch.setattr(artifacts, "MULTIPART_THRESHOLD", 1024)
    store = open_store("s3://multipart")
    data = bytes(range(256)) * 40_000  # 10 MB: several parts
    store.put_bytes("runs/r/big.bin", data)
    assert store.get_bytes("runs/r/big.bin") == data
    uploads = store.client.list_multipart_uploads(Bucket="multipart")  # type: ignore[attr-defined]
    assert uploads.get("Uploads", []) == [], "no dangling multipart upload"


def test_s3_missing_bucket_is_a_clear_error(s3_env: str) -> None:
    store = open_store("s3://no-such-bucket/x")
    with pytest.raises(ArtifactError, match=r"s3://no-such-bucket/x/runs/r/a: S3 request failed .*NoSuchBucket"):
        store.put_bytes("runs/r/a", b"x")


def test_s3_unreachable_endpoint_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = S3Settings(endpoint_url="http://127.0.0.1:9", region="us-east-1", access_key_id="a", secret_access_key="b")
    store = S3Store("bucket", "p", settings)
    store.client.meta.config.retries = {"max_attempts": 1}
    with pytest.raises(ArtifactError, match="S3 request failed"):
        store.get_bytes("runs/r/a")


@pytest.mark.parametrize(
    ("root", "kind"),
    [("s3://bucket/prefix/deeper", S3Store), ("relative/folder", LocalStore)],
    ids=["s3", "local"],
)
def test_open_store_picks_the_backend(root: str, kind: type, s3_env: str) -> None:
    assert isinstance(open_store(root), kind)


@pytest.mark.parametrize("root", ["s3://", "gs://bucket/x"], ids=["no-bucket", "other-scheme"])
def test_open_store_refuses_unsupported_roots(root: str) -> None:
    with pytest.raises(ArtifactError, match="artifact root"):
        open_store(root)


def test_settings_follow_the_boto3_conventions() -> None:
    env = {"AWS_ENDPOINT_URL": "http://127.0.0.1:1", "AWS_DEFAULT_REGION": "eu-west-1"}
    assert S3Settings.from_env(env) == S3Settings("http://127.0.0.1:1", "eu-west-1", None, None)
    env["MEMTRIAL_S3_ENDPOINT_URL"] = "http://127.0.0.1:2"
    assert S3Settings.from_env(env).endpoint_url == "http://127.0.0.1:2"


def test_run_key_builds_the_fixed_layout() -> None:
    assert run_key("run-1", "records", "0.json") == "runs/run-1/records/0.json"
    with pytest.raises(ArtifactError):
        run_key("..", "x")
