"""Location-independent arms: an arm's task files come from a corpus pack in the artifact store, so a
worker with only the installed package and the artifact root (S3, moto's server on 127.0.0.1) runs
any arm, and no path of the flow's machine reaches a spec, a cache key, a record or a manifest."""

from __future__ import annotations

import os
import pickle
import shutil
import socket
import uuid
from pathlib import Path

import boto3
import pytest

from flows.paired import PreparedTasks, arm_specs
from flows.stages import arm_attempt
from gitrepo import git
from tasks_lib.arm.comparability import source_commit_of
from tasks_lib.arm.steps import run_attempt, runner_owned_paths
from tasks_lib.artifacts import LocalStore, open_store
from tasks_lib.corpus.packs import (
    PACK_CACHE_ENV,
    CorpusPackError,
    open_corpus_pack,
    pack_cache_root,
    publish_corpus_pack,
)
from tasks_lib.corpus.prepare import prepare_task
from tasks_lib.corpus.tasks import load_task
from tasks_lib.run.config import RunConfig

REPO = Path(__file__).resolve().parents[1]
TASK = "rotlog-keep-count"
TASKS_SUBDIR = "corpora/tasks"


def clone_checkout(tmp_path: Path) -> tuple[Path, str]:
    """A throwaway clone of this project's committed corpus (deleted by the tests to prove nothing reads it)."""
    clone = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(clone))
    return clone, git(clone, "rev-parse", "HEAD")


def specs_for(clone: Path, commit: str, artifact_root: str, conditions: list[str]) -> list:
    """The arm specs the paired flow would send to workers for TASK in `clone`."""
    task = load_task(clone / TASKS_SUBDIR / TASK)
    prepared = prepare_task(clone, commit, task.root / "task.json")
    pack = publish_corpus_pack(open_store(artifact_root), clone, commit, TASKS_SUBDIR)
    tasks = PreparedTasks(repo=clone, commit=commit, tasks_subdir=TASKS_SUBDIR, runnable=[task], prepared={TASK: prepared},
                          excluded={}, code="0" * 64, pack=pack)
    config = RunConfig(tasks=[TASK], conditions=conditions)
    return arm_specs(config, config.all_agents[0], tasks, run_id="located-run", artifact_root=artifact_root)


def bucket_objects(endpoint: str, bucket: str) -> dict[str, bytes]:
    client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing")
    keys = [o["Key"] for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket) for o in page.get("Contents", [])]
    return {key: client.get_object(Bucket=bucket, Key=key)["Body"].read() for key in keys}


def test_arm_runs_on_a_worker_that_has_only_the_s3_artifact_root_after_the_checkout_is_deleted(
        s3_env: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure prevented: a worker on another machine gets `task_folder`/`repo_root` paths that do
    not exist there (or, worse, a stale checkout at the same path) and runs the wrong task or none."""
    bucket = f"packs-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=s3_env, region_name="us-east-1").create_bucket(Bucket=bucket)
    root = f"s3://{bucket}/art"
    clone, commit = clone_checkout(tmp_path)
    origin = source_commit_of(clone / TASKS_SUBDIR / TASK)
    payload = pickle.dumps(specs_for(clone, commit, root, ["off", "on"]))  # what the task runner ships to a worker
    shutil.rmtree(clone)
    worker = tmp_path / "elsewhere"
    worker.mkdir()
    monkeypatch.chdir(worker)
    monkeypatch.setenv(PACK_CACHE_ENV, str(worker / "packs"))

    assert str(tmp_path).encode() not in payload, "an arm spec carries a path of the flow's machine"
    records = [run_attempt(*arm_attempt(spec)) for spec in pickle.loads(payload)]

    by_condition = {r.condition: r for r in records}
    assert by_condition["on"].outcome == "pass" and by_condition["on"].injection == "yes"
    assert by_condition["off"].injection != "yes"
    assert {r.worker for r in records} == {f"{socket.gethostname()}:{os.getpid()}"}
    assert origin is not None and {r.source_commit for r in records} == {origin}, "the pack has no history; the record must keep the checkout's"
    stored = bucket_objects(s3_env, bucket)
    assert any(k.startswith("art/objects/corpus/") for k in stored)
    leaking = [k for k, body in stored.items() if str(tmp_path).encode() in body]
    assert leaking == [], f"absolute local paths stored in {leaking}"


def test_arm_cache_identity_holds_no_location(tmp_path: Path) -> None:
    """The failure prevented: the arm cache key held the absolute artifact-root string, so the same arm
    read through another mount or machine missed its cache (or a path leaked into the key)."""
    clone, commit = clone_checkout(tmp_path)
    (spec,) = specs_for(clone, commit, str(tmp_path / "a"), ["on"])
    moved = spec.model_copy(update={"artifact_root": "s3://elsewhere/x", "task_folder": "renamed", "commit": "f" * 40})
    assert moved.cache_identity() == spec.cache_identity()
    changed = spec.model_copy(update={"task_tree_oid": "e" * 40})
    assert changed.cache_identity() != spec.cache_identity(), "the task's content must still key the arm"


def test_publishing_a_pack_leaves_the_source_repository_untouched(tmp_path: Path) -> None:
    """The failure prevented: the synthetic pack commit written into the user's repository (new loose
    objects or refs in their checkout)."""
    clone, commit = clone_checkout(tmp_path)
    before = (git(clone, "count-objects", "-v"), git(clone, "for-each-ref"), git(clone, "status", "--porcelain"))
    store = LocalStore(tmp_path / "store")
    first = publish_corpus_pack(store, clone, commit, TASKS_SUBDIR)
    again = publish_corpus_pack(store, clone, commit, TASKS_SUBDIR)
    assert (git(clone, "count-objects", "-v"), git(clone, "for-each-ref"), git(clone, "status", "--porcelain")) == before
    assert first == again and store.list_keys("objects/corpus/") == [first.key], "same content, same single pack"


def test_a_pack_replaced_in_the_artifact_store_is_refused(tmp_path: Path, make_repo, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The failure prevented: a worker running arms from a pack whose tasks tree is not the one the
    flow certified (a bucket object overwritten with another corpus)."""
    monkeypatch.setenv(PACK_CACHE_ENV, str(tmp_path / "cache"))
    store = LocalStore(tmp_path / "store")
    real_repo, real = make_repo({"tasks/a/task.json": "{}\n"})
    fake_repo, fake = make_repo({"tasks/a/task.json": '{"planted": "answer"}\n'})
    pack = publish_corpus_pack(store, real_repo, real, "tasks")
    forged = publish_corpus_pack(store, fake_repo, fake, "tasks")
    store.put_bytes(pack.key, store.get_bytes(forged.key))

    with pytest.raises(CorpusPackError, match=f"{pack.key}.*"):
        open_corpus_pack(store, pack)
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [], "a refused pack left a half-built checkout"


def test_a_pack_missing_from_the_artifact_root_names_the_key_and_the_fix(tmp_path: Path, make_repo,  # type: ignore[no-untyped-def]
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """The failure prevented: a worker pointed at another artifact root failing with a bare KeyError."""
    monkeypatch.setenv(PACK_CACHE_ENV, str(tmp_path / "cache"))
    repo, commit = make_repo({"tasks/a/task.json": "{}\n"})
    pack = publish_corpus_pack(LocalStore(tmp_path / "store"), repo, commit, "tasks")
    with pytest.raises(CorpusPackError, match="missing from the artifact root.*MEMTRIAL_ARTIFACT_ROOT"):
        open_corpus_pack(LocalStore(tmp_path / "other"), pack)


def test_the_pack_cache_is_hidden_from_the_agent(tmp_path: Path, make_repo, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The failure prevented: an agent reading another task's solution from the worker's pack cache,
    which holds every task of every revision it fetched."""
    monkeypatch.setenv(PACK_CACHE_ENV, str(tmp_path / "cache"))
    repo, commit = make_repo({"tasks/a/task.json": "{}\n"})
    store = LocalStore(tmp_path / "store")
    checkout = open_corpus_pack(store, publish_corpus_pack(store, repo, commit, "tasks"))
    task = load_task(REPO / TASKS_SUBDIR / TASK)
    assert pack_cache_root() in runner_owned_paths(task)
    assert checkout.parent == pack_cache_root() and oct(pack_cache_root().stat().st_mode & 0o777) == "0o700"
