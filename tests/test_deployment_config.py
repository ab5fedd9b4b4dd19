"""The deployment files, checked without a registry or a cluster: parsed, cross-checked, and run
through Prefect's own parsers where Prefect has them.

Docker and Kubernetes workers cannot run on this machine (no registry, no cluster, no compose
plugin); test_deployment_server.py runs the process-pool deployment for real.
"""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from flows.runtime.settings import PROJECT_ROOT

DEPLOYMENTS = PROJECT_ROOT / "deployments"
POOL_KINDS = ("process", "docker", "kubernetes")


def load(name: str) -> Any:
    return yaml.safe_load((DEPLOYMENTS / name).read_text())


def strings(node: Any) -> Iterator[str]:
    """Every string (keys and values) in a parsed YAML document."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from strings(key)
            yield from strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from strings(item)


LOCAL_PATH = re.compile(r"(^|[\s:=\"'])(/(home|root|work|tmp|Users|var/folders)/|[A-Za-z]:\\)")


@pytest.fixture(scope="module")
def prefect_yaml() -> dict[str, Any]:
    return load("prefect.yaml")


def test_prefect_yaml_parses_with_prefects_own_model(prefect_yaml: dict[str, Any]) -> None:
    from prefect.cli.deploy._models import PrefectYamlModel

    model = PrefectYamlModel.model_validate(prefect_yaml)
    assert [d.name for d in model.deployments] == [f"nightly-{kind}" for kind in POOL_KINDS]
    for deployment in model.deployments:
        assert deployment.entrypoint == "flows/nightly.py:nightly"
        assert deployment.pull, f"{deployment.name}: an explicit pull step (else prefect deploy records the local folder)"


def test_nightly_schedule_is_a_valid_cron_shared_by_anchor(prefect_yaml: dict[str, Any]) -> None:
    from prefect.client.schemas.schedules import CronSchedule

    shared = prefect_yaml["definitions"]["schedules"]["nightly"]
    schedule = CronSchedule(cron=shared["cron"], timezone=shared["timezone"])
    assert schedule.cron == "30 2 * * *"
    for deployment in prefect_yaml["deployments"]:
        # A YAML alias loads as the very same object: the schedule is defined once.
        assert deployment["schedules"][0] is shared, deployment["name"]
        assert deployment["tags"] is prefect_yaml["definitions"]["tags"]
        assert deployment["parameters"] is prefect_yaml["definitions"]["parameters"]


def test_each_pool_kind_has_its_deployment(prefect_yaml: dict[str, Any]) -> None:
    pools = prefect_yaml["definitions"]["work_pools"]
    assert set(pools) == set(POOL_KINDS)
    by_name = {d["name"]: d for d in prefect_yaml["deployments"]}
    for kind in POOL_KINDS:
        assert by_name[f"nightly-{kind}"]["work_pool"] is pools[kind]
        assert pools[kind]["name"] == f"memtrial-{kind}"
    for kind in ("docker", "kubernetes"):
        assert pools[kind]["job_variables"]["image"].endswith(":{{ git-sha.stdout }}"), "image tag = deployed commit"
    assert by_name["nightly-process"]["pull"][0]["prefect.deployments.steps.git_clone"]["commit_sha"] == "{{ git-sha.stdout }}"


def test_version_resolves_to_the_checkout_commit(prefect_yaml: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Run the file's build step with Prefect's own step function, then template the deployments with its output."""
    from prefect.deployments.steps.utility import run_shell_script
    from prefect.utilities.templating import apply_values

    (step,) = prefect_yaml["build"]
    settings = dict(step["prefect.deployments.steps.run_shell_script"])
    step_id = settings.pop("id")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True).stdout.strip()
    monkeypatch.chdir(PROJECT_ROOT)  # `prefect deploy` runs from the checkout root
    result = run_shell_script(**settings)
    outputs = {step_id: asyncio.run(result) if asyncio.iscoroutine(result) else result}
    for deployment in prefect_yaml["deployments"]:
        resolved = apply_values(deployment, outputs, remove_notset=False)
        assert resolved["version"] == head, deployment["name"]
    docker = apply_values(prefect_yaml["definitions"]["work_pools"]["docker"], outputs, remove_notset=False)
    assert docker["job_variables"]["image"] == f"memtrial:{head}"


def test_entrypoint_names_a_flow_function_in_the_checkout(prefect_yaml: dict[str, Any]) -> None:
    path, _, function = prefect_yaml["deployments"][0]["entrypoint"].partition(":")
    source = PROJECT_ROOT / path
    assert source.is_file(), f"{path} does not exist"
    tree = ast.parse(source.read_text())
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == function]
    assert found and any("flow" in ast.unparse(d) for d in found[0].decorator_list), f"{function} is not a @flow in {path}"
    parameters = {a.arg for a in found[0].args.args}
    assert set(prefect_yaml["definitions"]["parameters"]) <= parameters, "deployment parameters the flow does not take"


@pytest.mark.parametrize("name", ["prefect.yaml", "compose.yaml", "kubernetes/values.yaml"])
def test_no_absolute_local_paths(name: str) -> None:
    text = (DEPLOYMENTS / name).read_text()
    offending = [s for s in strings(yaml.safe_load(text)) if LOCAL_PATH.search(s) or str(PROJECT_ROOT) in s]
    assert not offending, f"{name} has machine-local paths: {offending}"


def test_the_path_check_catches_local_paths() -> None:
    """The check above is not vacuous."""
    bad = {"pull": [{"set_working_directory": {"directory": "/work/main"}}], "x": "C:\\repo", "y": "/home/me/src"}
    assert len([s for s in strings(bad) if LOCAL_PATH.search(s)]) == 3
    assert not [s for s in strings({"u": "http://minio:9000", "c": "git rev-parse HEAD", "d": "."}) if LOCAL_PATH.search(s)]


# ------------------------------------------------------------------ compose


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return load("compose.yaml")


def test_compose_brings_up_postgres_server_s3_and_n_workers(compose: dict[str, Any], prefect_yaml: dict[str, Any]) -> None:
    services = compose["services"]
    assert {"postgres", "prefect-server", "minio", "worker"} <= set(services)
    server = services["prefect-server"]
    assert server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"].startswith("postgresql+asyncpg://")
    assert "@postgres:5432/" in server["environment"]["PREFECT_API_DATABASE_CONNECTION_URL"]
    assert server["depends_on"]["postgres"]["condition"] == "service_healthy"
    worker = services["worker"]
    assert worker["deploy"]["replicas"] == "${MEMTRIAL_WORKERS:-2}"
    pool = prefect_yaml["definitions"]["work_pools"]["process"]["name"]
    assert worker["command"][worker["command"].index("--pool") + 1] == pool
    assert worker["environment"]["PREFECT_API_URL"] == "http://prefect-server:4200/api"
    assert worker["environment"]["MEMTRIAL_ARTIFACT_ROOT"].startswith("s3://")
    assert worker["environment"]["MEMTRIAL_S3_ENDPOINT_URL"] == "http://minio:9000"


def test_compose_publishes_on_loopback_only_and_uses_named_volumes(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert str(port).startswith("127.0.0.1:"), f"{name} publishes {port} beyond loopback"
        for volume in service.get("volumes", []):
            source = volume.split(":", 1)[0]
            assert source in compose["volumes"], f"{name} mounts host path {source}; use a named volume"


def test_compose_images_are_pinned_never_latest(compose: dict[str, Any]) -> None:
    """The failure prevented: `minio/minio:latest` pulling a different server (and S3 behaviour) on
    every machine; the memtrial image's tag is the deployed commit."""
    for name, service in compose["services"].items():
        image = service["image"]
        repository, _, tag = image.partition(":")
        assert repository and tag and tag != "latest", f"{name}: image {image!r} is not pinned to a release tag"
        assert re.fullmatch(r"\d+\.\d+(\.\d+)?(-[a-z0-9.]+)?|RELEASE\.[0-9TZ-]+|\$\{MEMTRIAL_TAG:\?.*\}", tag), \
            f"{name}: tag {tag!r} floats (a major-only or moving tag)"


def test_compose_secrets_come_from_the_environment(compose: dict[str, Any]) -> None:
    text = (DEPLOYMENTS / "compose.yaml").read_text()
    assert "${POSTGRES_PASSWORD:?" in text and "${MINIO_ROOT_PASSWORD:?" in text
    assert not re.search(r"PASSWORD:\s*[A-Za-z0-9]{6,}\s*$", text, re.MULTILINE), "a literal password in compose.yaml"


def test_docker_compose_config_accepts_the_file(tmp_path: Path) -> None:
    docker = shutil.which("docker")
    if not docker or subprocess.run([docker, "compose", "version"], capture_output=True).returncode != 0:
        pytest.skip("the docker compose plugin is not installed here; compose.yaml is checked by parsing only")
    env = {"POSTGRES_PASSWORD": "x", "MINIO_ROOT_PASSWORD": "y", "MEMTRIAL_TAG": "0" * 40, "PATH": "/usr/bin:/bin"}
    done = subprocess.run([docker, "compose", "-f", str(DEPLOYMENTS / "compose.yaml"), "config", "--quiet"],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


# ------------------------------------------------------------------ kubernetes and the image


def test_helm_values_point_a_kubernetes_worker_at_the_pool(prefect_yaml: dict[str, Any]) -> None:
    values = load("kubernetes/values.yaml")
    worker = values["worker"]
    assert worker["config"]["workPool"] == prefect_yaml["definitions"]["work_pools"]["kubernetes"]["name"]
    assert worker["config"]["workQueues"] == [prefect_yaml["definitions"]["work_pools"]["kubernetes"]["work_queue_name"]]
    assert worker["config"]["type"] == "kubernetes"
    assert worker["apiConfig"] == "selfHostedServer"
    assert worker["selfHostedServerApiConfig"]["apiUrl"].endswith("/api")
    assert isinstance(worker["replicaCount"], int) and isinstance(worker["config"]["limit"], int)
    for section in ("requests", "limits"):
        assert all(isinstance(v, str) for v in worker["resources"][section].values()), "the chart's schema wants strings"


def ignore_rules(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_the_classic_builder_reads_the_same_dockerignore_as_buildkit() -> None:
    """The failure prevented: `DOCKER_BUILDKIT=0 docker build` ignoring deployments/Dockerfile.dockerignore
    (only BuildKit reads it) and sending a 2.5 GB context, the venv included."""
    classic = ignore_rules(PROJECT_ROOT / ".dockerignore")
    assert classic == ignore_rules(DEPLOYMENTS / "Dockerfile.dockerignore")
    assert ".venv" in classic and ".memtrial" in classic and ".git" not in classic


def test_secrets_stay_references_in_the_deployment(prefect_yaml: dict[str, Any]) -> None:
    """The failure prevented: `{{ prefect.blocks.secret.x }}` in job variables, which Prefect renders
    into the stored deployment in plain text at deploy time."""
    assert not [s for s in strings(prefect_yaml) if "prefect.blocks" in s], "a block template is rendered at deploy time"
    env = prefect_yaml["definitions"]["env"]
    references = {k: v for k, v in env.items() if k.startswith("MEMTRIAL_SECRET_")}
    assert set(references) == {"MEMTRIAL_SECRET_AWS_ACCESS_KEY_ID", "MEMTRIAL_SECRET_AWS_SECRET_ACCESS_KEY"}
    assert all(re.fullmatch(r"[a-z0-9-]+", v) for v in references.values()), references
    assert not {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} & set(env)


def test_dockerfile_keeps_git_objects_and_installs_editable() -> None:
    dockerfile = (DEPLOYMENTS / "Dockerfile").read_text()
    ignored = [line.strip() for line in (DEPLOYMENTS / "Dockerfile.dockerignore").read_text().splitlines()
               if line.strip() and not line.startswith("#")]
    assert ".git" not in ignored, "fixtures are built from git objects; the image needs .git"
    assert ".venv" in ignored
    assert re.search(r"^FROM python:3\.11", dockerfile, re.MULTILINE)
    assert "pip install --no-cache-dir -e" in dockerfile, "editable: PROJECT_ROOT must be the project folder"
    assert re.search(r"apt-get install[^\n]*\bgit\b", dockerfile)
