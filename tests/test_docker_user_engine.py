"""`sandbox: docker` on the user's own Docker engine: `DOCKER_HOST` (else the default socket), with an
image built there from this machine's files; an engine that does not answer is refused in preflight.

"The user's engine" is a dockerd this module starts itself on a default-style socket
(`unix:///tmp/<x>/docker.sock`, `--bridge=none --iptables=false`, its own data root), named to memtrial
only through `DOCKER_HOST`, as a user's shell would: memtrial is never told it is a test daemon.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from flows.cli.main import main
from tasks_lib.run.config import DockerSpec, RunConfig

SMOKE_TASKS = "[rotlog-keep-count, pagekit-last-page]"
"""A shell task and a Node task, both judged apart (as every bundled task is): the agent's turn runs
in a container on the user's engine, the check in the judge's bubblewrap namespaces whatever the
sandbox."""


@pytest.fixture(scope="module")
def user_engine() -> Iterator[str]:
    """A dockerd on its own default-style socket, as a user's engine: yields its DOCKER_HOST value."""
    from tasks_lib.sandbox.dockerd import PrivateDockerd, dockerd_problem
    from tasks_lib.sandbox.errors import DockerdError

    problem = dockerd_problem()
    if problem is not None:
        pytest.skip(f"no engine to stand in for the user's: {problem}")
    daemon = PrivateDockerd()
    try:
        daemon.start()
    except DockerdError as error:
        pytest.skip(f"no engine to stand in for the user's: {error}")
    try:
        yield daemon.base_url
    finally:
        daemon.stop()


def _config(tmp_path: Path, extra: str = "") -> Path:
    config = tmp_path / "docker.yaml"
    config.write_text(f"name: docker-smoke\ntasks: {SMOKE_TASKS}\nconditions: ['off', 'on']\nsuites: []\nsandbox: docker\n{extra}")
    return config


@pytest.mark.slow  # a smoke run: about 60 s on 2 busy cores
def test_a_smoke_run_on_the_users_engine_grades_every_attempt_in_a_container(
        prefect_harness: None, user_engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: `sandbox: docker` knew only a private engine the caller started and handed over
    (`DockerSandbox(base_url=..., image=...)` both required), so a run config saying `sandbox: docker`
    could not run an attempt on the engine a user already has. Named only by DOCKER_HOST, the engine
    gets an image built from this machine's files and runs every agent turn in it: every attempt is
    gradable, and its record says the check ran in the judge's own namespaces (every bundled task is
    judged apart)."""
    monkeypatch.setenv("DOCKER_HOST", user_engine)
    root = tmp_path / "artifacts"
    assert main(["run", "--config", str(_config(tmp_path)), "--artifacts", str(root), "--json"]) == 0, capsys.readouterr().err
    (agent,) = json.loads(capsys.readouterr().out)["agents"]
    records = pq.read_table(root / "runs" / agent["run_id"] / "records.parquet").to_pylist()
    assert len(records) == 4, records
    assert [r["outcome"] for r in records if r["outcome"] == "ungradable"] == [], [r.get("reason") for r in records]
    checks = {r["task_id"]: r["check_sandbox"] for r in records}
    assert checks == {"rotlog-keep-count": "local/namespace (judged apart)", "pagekit-last-page": "local/namespace (judged apart)"}, checks

    import docker

    client = docker.DockerClient(base_url=user_engine)
    try:
        tags = [tag for image in client.images.list() for tag in image.tags]
    finally:
        client.close()
    assert any(tag.startswith("memtrial-sandbox:") for tag in tags), f"the image was built on the user's engine: {tags}"


def test_an_engine_that_does_not_answer_is_refused_in_one_line_before_the_flow(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Regression: with `sandbox: docker` and no engine, the run started, prepared every task and graded
    every attempt `ungradable` (no daemon for the check). Preflight now refuses it: exit 2, one line
    naming the config, the field, the engine and the fix; no run id, nothing stored."""
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/docker.sock")  # nothing listens there
    root = tmp_path / "artifacts"
    config = _config(tmp_path)
    assert main(["run", "--config", str(config), "--artifacts", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"{config}: field 'docker': sandbox 'docker' is unavailable: docker engine at unix://{tmp_path}/docker.sock does not answer" in err, err
    assert "point DOCKER_HOST (docker.host in the run config) at one that runs" in err, err
    assert not root.exists(), "nothing started, nothing stored"


CONFIG_ERRORS = {
    "docker-without-the-docker-sandbox": ("sandbox: local\ndocker: {host: 'unix:///run/docker.sock'}\n",
                                          "document", "docker: is read only with sandbox: docker (this config has sandbox: local)"),
    "unpinned-image": ("sandbox: docker\ndocker: {image: 'debian:12'}\n", "field 'docker.image'",
                       "'debian:12' is not pinned; use name@sha256:<64 hex digits>"),
    "host-without-a-scheme": ("sandbox: docker\ndocker: {host: '/var/run/docker.sock'}\n", "field 'docker.host'",
                              "'/var/run/docker.sock' is not an engine address; use unix:///path/docker.sock"),
}


@pytest.mark.parametrize(("text", "field", "problem"), list(CONFIG_ERRORS.values()), ids=list(CONFIG_ERRORS))
def test_a_wrong_docker_block_is_refused_when_the_config_loads(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                               text: str, field: str, problem: str) -> None:
    """Regression: nothing in a run config named an engine or an image, so a wrong one could only fail
    inside an arm. Each wrong `docker:` block is one line naming the file and the field."""
    config = tmp_path / "run.yaml"
    config.write_text(f"name: d\ntasks: [rotlog-keep-count]\nconditions: ['off', 'on']\nsuites: []\n{text}")
    assert main(["run", "--config", str(config), "--artifacts", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err
    assert f"{config}: {field}: " in err and problem in err and err.count("\n") == 1, err


def test_the_engines_address_is_a_location_and_the_pinned_image_part_of_the_arms_identity() -> None:
    """The failure prevented: moving to another engine must not rerun cached arms, and a different pinned
    image must (it is what the commands run in)."""
    image = "example.org/sandbox@sha256:" + "a" * 64
    plain = RunConfig(sandbox="docker")
    assert plain.config_digest() == RunConfig(sandbox="docker", docker=DockerSpec(host="tcp://10.0.0.1:2376")).config_digest()
    assert plain.config_digest() != RunConfig(sandbox="docker", docker=DockerSpec(image=image)).config_digest()
    assert DockerSpec(host="unix:///x.sock", image=image).sandbox_options() == {"base_url": "unix:///x.sock", "image": image}


def test_a_pinned_image_the_engine_cannot_pull_is_refused_in_one_line(
        user_engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """The failure prevented: a pinned `docker.image` the engine lacks and cannot pull (no registry here)
    surfacing only inside every arm as an ungradable check. Preflight tries the pull once and refuses
    the run in one line naming the image and both fixes."""
    monkeypatch.setenv("DOCKER_HOST", user_engine)
    image = "127.0.0.1:9/sandbox@sha256:" + "a" * 64  # a registry on loopback where nothing listens: no traffic leaves
    root = tmp_path / "artifacts"
    config = _config(tmp_path, f"docker: {{image: '{image}'}}\n")
    assert main(["run", "--config", str(config), "--artifacts", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"field 'docker': sandbox 'docker' is unavailable: docker engine at {user_engine} has no image {image} and cannot pull it" in err, err
    assert "load it into the engine, or leave docker.image unset" in err and not root.exists(), err
