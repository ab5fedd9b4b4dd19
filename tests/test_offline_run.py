"""Runs never touch the network (issue #28, item 2): pinned upstream releases are fetched once at set-up
(`memtrial corpus fetch`) into the machine's cache, outside every artifact root; a run composes them
from there and publishes them in the corpus pack, so workers need neither the cache nor the network.

The registries are `tests/upstream_index.PackageIndex` on 127.0.0.1; "no network" is a network namespace
with only loopback (`unshare -n`, root) or, for the worker, registries on a closed port and no cache.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.cli.main import main
from gitrepo import MakeRepo
from tasks_lib.contracts import NpmTarball, PypiSdist, TaskManifest
from tasks_lib.corpus.upstream import upstream_cache_root
from upstream_index import PackageIndex, serving, tar_gz

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "corpora" / "tasks"
TWO_TASKS = ("ms-rota-month", "pytimeparse-default-timeout")
"""One npm and one PyPI real-project task of the bundled corpus."""
CACHE_ENV = "MEMTRIAL_UPSTREAM_CACHE"
NO_NETWORK = ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "memtrial-offline"]
"""Prefix that runs a command in a network namespace of its own with only loopback up."""


def _no_network_reason() -> str | None:
    """Why a command cannot be run without network here (None when it can)."""
    if os.geteuid() != 0:
        return "unshare -n needs root (CAP_SYS_ADMIN) to make a network namespace"
    try:
        probe = subprocess.run([*NO_NETWORK, "true"], capture_output=True, timeout=20)
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unshare -n cannot run: {error}"
    return None if probe.returncode == 0 else f"unshare -n is not permitted here: {probe.stderr.decode(errors='replace').strip()}"


def _config(tmp_path: Path, tasks: tuple[str, ...]) -> Path:
    config = tmp_path / "offline.yaml"
    config.write_text(f"name: offline\ntasks: [{', '.join(tasks)}]\nconditions: ['off', 'on']\ntrials: 1\n"
                      "runner: {kind: thread, workers: 2}\nsuites: []\n")
    return config


def _memtrial(*argv: str, env: dict[str, str], prefix: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("memtrial")
    return subprocess.run([*(prefix or []), str(exe), *argv], capture_output=True, text=True, env=env, timeout=600)


def _bundled_index() -> PackageIndex:
    """A registry on 127.0.0.1 serving every bundled upstream release: the bytes the session's set-up
    (conftest) fetched and verified into the machine's cache."""
    index = PackageIndex()
    archives = upstream_cache_root() / "archives" / "sha256"
    for manifest in sorted(TASKS.glob("*/task.json")):
        source = TaskManifest.model_validate_json(manifest.read_text()).upstream
        if source is None:
            continue
        assert isinstance(source, (PypiSdist, NpmTarball))
        archive = archives / source.sha256
        if not archive.is_file():
            pytest.skip(f"{archive}: the bundled release {source.name}=={source.version} is not in this machine's cache "
                        "(the session's set-up could not fetch it)")
        if isinstance(source, NpmTarball):
            index.add_tarball(source.name, source.version, archive.read_bytes())
            continue
        index.add_sdist(source.name, source.version, archive.read_bytes())
        normalized = re.sub(r"[-_.]+", "-", source.name).lower()  # PEP 503: the page of semantic_version is semantic-version
        index.files[f"/simple/{normalized}/"] = index.files.pop(f"/simple/{source.name}/")
    return index


@pytest.mark.slow  # a whole `memtrial run` (its own Prefect server) in a network namespace
def test_a_run_on_an_empty_artifact_root_without_network_completes_after_setup(tmp_path: Path) -> None:
    """Regression: with a fresh artifact root and only loopback, `memtrial run` exited 2 on a failed name
    resolution, because the real-project tasks' releases were downloaded during the run into the artifact
    root. After set-up (`memtrial corpus fetch`, here against a registry on 127.0.0.1) the releases are in
    the machine's cache (~/.cache/memtrial/upstream) and a run in a network namespace completes."""
    reason = _no_network_reason()
    if reason:
        pytest.skip(reason)
    if shutil.which("bwrap") is None:
        pytest.skip("bubblewrap is not installed: the post-turn check needs a sandbox for the run to pass")
    home, artifacts = tmp_path / "home", tmp_path / "artifacts"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in (CACHE_ENV, "XDG_CACHE_HOME", "MEMTRIAL_ARTIFACT_ROOT")}
    env.update({"HOME": str(home), "MEMTRIAL_HOME": str(tmp_path / "memtrial-home"), "PREFECT_HOME": str(tmp_path / "prefect"),
                "PREFECT_SERVER_ANALYTICS_ENABLED": "false", "COLUMNS": "400", "MEMTRIAL_FETCH_TIMEOUT": "5"})
    index = _bundled_index()
    with serving(index):
        env.update({"MEMTRIAL_PYPI_INDEX": index.url + "/simple", "MEMTRIAL_NPM_REGISTRY": index.url + "/npm"})
        fetched = _memtrial("corpus", "fetch", "--json", env=env)
    assert fetched.returncode == 0, fetched.stderr
    assert json.loads(fetched.stdout)["cache"] == str(home / ".cache" / "memtrial" / "upstream")
    sent = sum(index.requests.values())

    done = _memtrial("run", "--config", str(_config(tmp_path, TWO_TASKS[:1])), "--artifacts", str(artifacts), env=env, prefix=NO_NETWORK)
    assert done.returncode == 0, done.stderr[-3000:]
    assert sum(index.requests.values()) == sent
    assert not (artifacts / "upstream").exists(), "the releases stay in the machine's cache, not in the artifact root"
    (records,) = artifacts.glob("runs/*-calibration/records.parquet")
    rows = pq.read_table(records).to_pylist()
    assert sorted((r["task_id"], r["condition"]) for r in rows) == [(TWO_TASKS[0], "off"), (TWO_TASKS[0], "on")]
    assert not any(r["infra_failure"] for r in rows) and {r["outcome"] for r in rows if r["condition"] == "on"} == {"pass"}


@pytest.mark.parametrize("command", ["run", "paired"])
def test_a_release_missing_from_the_cache_is_refused_in_preflight_before_any_arm(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, command: str) -> None:
    """Regression: a release missing from the cache was downloaded in the middle of the run (or failed it
    there, after Prefect had started and arms had run). Now `memtrial run` and `memtrial paired` exit 2 in preflight with one
    line naming each task, its source and `memtrial corpus fetch`; nothing is stored or downloaded."""
    closed = PackageIndex()
    closed.server.server_close()
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "empty-cache"))
    monkeypatch.setenv("MEMTRIAL_PYPI_INDEX", closed.url + "/simple")
    monkeypatch.setenv("MEMTRIAL_NPM_REGISTRY", closed.url + "/npm")
    artifacts = tmp_path / "artifacts"
    argv = (["run", "--config", str(_config(tmp_path, TWO_TASKS))] if command == "run"
            else ["paired", "--tasks", ",".join(TWO_TASKS), "--conditions", "off,on"])
    assert main([*argv, "--artifacts", str(artifacts)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert "task ms-rota-month (npm tarball ms==2.1.3" in err and "task pytimeparse-default-timeout (pypi sdist pytimeparse==1.1.8" in err
    assert "run `memtrial corpus fetch`" in err and "memtrial: " not in err.replace("memtrial: error:", ""), err
    assert not artifacts.exists() and not (tmp_path / "empty-cache").exists(), "nothing stored, nothing fetched"


VERIFIER = "#!/bin/sh\nset -u\nexec node --test\n"
TARBALL = tar_gz("package", {
    "index.js": "'use strict';\nmodule.exports = function label(name) { return 'user:' + name; };\n",
    "package.json": '{"name": "nicklabel", "version": "2.0.0", "main": "index.js"}\n',
})


def _upstream_task(digest: str) -> dict[str, str | bytes]:
    manifest = {
        "schema_version": 1, "task_id": "nicklabel-prefix", "kind": "convention",
        "instruction": "Our directory service rejects the labels nicklabel makes. Switch the prefix to the one the directory expects.",
        "check_command": ["sh", "{verifier}"],
        "verifier": {"kind": "script", "runtime": "posix-shell",
                     "asset": {"path": "verifier.sh", "sha256": __import__("hashlib").sha256(VERIFIER.encode()).hexdigest()},
                     "timeout_seconds": 60},
        "memories": [{"text": "The directory service only accepts labels of the form dir:<name>.", "lane": "keyword", "kind": "convention"}],
        "answer_terms": ["dir:"],
        "allowed_output_paths": ["index.js"],
        "upstream": {"kind": "npm-tarball", "name": "nicklabel", "version": "2.0.0", "sha256": digest},
    }
    prefix = "corpora/tasks/nicklabel-prefix"
    return {f"{prefix}/task.json": json.dumps(manifest, indent=2), f"{prefix}/verifier.sh": VERIFIER,
            f"{prefix}/fixture/test/basic.test.js": "'use strict';\nrequire('../index.js');\n",
            f"{prefix}/hidden/test/label.test.js": "'use strict';\n", f"{prefix}/solution/index.js": "'use strict';\n"}


WORKER = """
import json, sys
from tasks_lib.artifacts import open_store
from tasks_lib.corpus.packs import CorpusPack
from tasks_lib.corpus.prepare import prepare_packed_task
prepared = prepare_packed_task(open_store(sys.argv[1]), CorpusPack.model_validate_json(sys.argv[2]), "nicklabel-prefix")
print(json.dumps({"corpus_id": prepared.build.corpus_id, "files": sorted(f.path for f in prepared.build.files),
                  "repository": prepared.build.source.repository}))
"""


def test_a_worker_without_cache_or_network_builds_an_upstream_fixture_from_the_corpus_pack(
        tmp_path: Path, make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: a worker (a Dask worker, another machine sharing only the artifact root) composed an
    upstream fixture by downloading the release itself, so it needed the network or a cache of its own.
    Now the flow publishes the composed fixture in the corpus pack: a worker with no HOME, no cache and
    only a closed registry port builds the same fixture (same corpus id) from the pack's git objects."""
    from tasks_lib.artifacts import open_store
    from tasks_lib.corpus.packs import publish_corpus_pack
    from tasks_lib.corpus.prepare import fetch_upstream_sources, prepare_task

    index = PackageIndex()
    digest = index.add_tarball("nicklabel", "2.0.0", TARBALL)
    repo, commit = make_repo(_upstream_task(digest))
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "flow-cache"))
    with serving(index):
        monkeypatch.setenv("MEMTRIAL_NPM_REGISTRY", index.url + "/npm")
        assert [f.error for f in fetch_upstream_sources(repo, commit, repo / "corpora" / "tasks")] == [None]
    flow_side = prepare_task(repo, commit, repo / "corpora/tasks/nicklabel-prefix/task.json")
    artifacts = str(tmp_path / "artifacts")
    pack = publish_corpus_pack(open_store(artifacts), repo, commit, "corpora/tasks")

    env = {key: value for key, value in os.environ.items() if key not in (CACHE_ENV, "XDG_CACHE_HOME", "HOME")}
    env.update({"MEMTRIAL_PACK_CACHE": str(tmp_path / "worker-packs"), "MEMTRIAL_NPM_REGISTRY": index.url + "/npm",
                "MEMTRIAL_PYPI_INDEX": index.url + "/simple", "MEMTRIAL_FETCH_TIMEOUT": "2"})
    prefix = NO_NETWORK if _no_network_reason() is None else []
    worker = subprocess.run([*prefix, sys.executable, "-c", WORKER, artifacts, pack.model_dump_json()],
                            capture_output=True, text=True, env=env, timeout=300)
    assert worker.returncode == 0, worker.stderr[-2000:]
    built = json.loads(worker.stdout)
    assert built["corpus_id"] == flow_side.build.corpus_id
    assert built["files"] == ["index.js", "package.json", "test/basic.test.js"]
    assert built["repository"] == f"corpus pack {pack.key}"


def test_the_upstream_cache_is_per_machine_and_never_under_the_artifact_root(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the cache lived under the artifact root, so every fresh artifact root (a new S3 bucket,
    a CI workspace) started empty and the run downloaded. It is $MEMTRIAL_UPSTREAM_CACHE, else
    $XDG_CACHE_HOME/memtrial/upstream, else ~/.cache/memtrial/upstream, with the password database's home
    when HOME is empty (a CI runner or container without one)."""
    import pwd

    monkeypatch.delenv(CACHE_ENV, raising=False)
    monkeypatch.setenv("MEMTRIAL_ARTIFACT_ROOT", str(tmp_path / "artifacts"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert upstream_cache_root() == tmp_path / "xdg" / "memtrial" / "upstream"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert upstream_cache_root() == tmp_path / "home" / ".cache" / "memtrial" / "upstream"
    monkeypatch.setenv("HOME", "")
    assert upstream_cache_root() == Path(pwd.getpwuid(os.getuid()).pw_dir) / ".cache" / "memtrial" / "upstream"
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "explicit"))
    assert upstream_cache_root() == tmp_path / "explicit"


def test_a_checkout_cannot_pass_off_its_own_tree_as_a_packed_upstream_fixture(
        tmp_path: Path, make_repo: MakeRepo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression guard: a packed fixture is used without the cache, so a source commit holding a tree at
    the packed path (`.memtrial-upstream/<compose key>`) could have replaced the SHA-256-pinned release
    unseen. Only a corpus pack's own commit is read that way; a checkout composes from the verified release."""
    from gitrepo import git, write_files
    from tasks_lib.corpus.prepare import fetch_upstream_sources, prepare_task
    from tasks_lib.corpus.upstream import packed_fixture_path

    index = PackageIndex()
    digest = index.add_tarball("nicklabel", "2.0.0", TARBALL)
    repo, commit = make_repo(_upstream_task(digest))
    source = TaskManifest.model_validate_json((repo / "corpora/tasks/nicklabel-prefix/task.json").read_text()).upstream
    assert source is not None
    packed = packed_fixture_path(source, git(repo, "rev-parse", f"{commit}:corpora/tasks/nicklabel-prefix/fixture"))
    write_files(repo, {f"{packed}/index.js": "module.exports = () => 'forged';\n"})
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "a tree at the packed path")
    monkeypatch.setenv(CACHE_ENV, str(tmp_path / "cache"))
    with serving(index):
        monkeypatch.setenv("MEMTRIAL_NPM_REGISTRY", index.url + "/npm")
        assert [f.error for f in fetch_upstream_sources(repo, "HEAD", repo / "corpora" / "tasks")] == [None]
    prepared = prepare_task(repo, "HEAD", repo / "corpora/tasks/nicklabel-prefix/task.json")
    assert prepared.build.source.subdir == "fixture" and prepared.build.source.repository != str(repo)
    assert sorted(f.path for f in prepared.build.files) == ["index.js", "package.json", "test/basic.test.js"]
