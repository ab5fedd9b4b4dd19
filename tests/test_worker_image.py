"""The worker container runs arms: the worker image, built offline on a private engine from this
machine's files (`tasks_lib.sandbox.worker_image`; nothing pulled), runs the smoke matrix (2 tasks,
off/on, calibration agent) with the container privileges the deployment files give it, and every
attempt is gradable, its check sandboxed by bubblewrap inside the container.

The privileges are read from the files users deploy, not restated here: compose.yaml's worker
`security_opt` (uid 1000, as the Dockerfile's USER) and the Kubernetes base job template's container
`securityContext` (translated to the docker options it stands for; docker jobs get the same, see
test_deployment_sandbox). Cost: 6 min 17 s for this file on a 2-core machine under load 15 (the image's
~780 MB tar built and imported once, then two smoke runs); marked slow, CI runs it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import yaml

from flows.runtime.settings import PROJECT_ROOT

pytestmark = pytest.mark.slow

DEPLOYMENTS = PROJECT_ROOT / "deployments"
RUN_SECONDS = 900
PROBE = ("import shutil; from tasks_lib.sandbox.local import bwrap_problem; "
         "print(bwrap_problem(shutil.which('bwrap')) or 'bwrap works')")


def compose_privileges() -> dict[str, Any]:
    """compose.yaml's worker: its security options, as the image's own user."""
    worker = yaml.safe_load((DEPLOYMENTS / "compose.yaml").read_text())["services"]["worker"]
    return {"security_opt": list(worker["security_opt"]), **({"user": worker["user"]} if "user" in worker else {})}


def kubernetes_privileges() -> dict[str, Any]:
    """The Kubernetes base job template's container securityContext as the docker options it stands for."""
    template = json.loads((DEPLOYMENTS / "kubernetes" / "base-job-template.json").read_text())
    (container,) = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"]
    context = container["securityContext"]
    options: dict[str, Any] = {"security_opt": [], "cap_add": list(context.get("capabilities", {}).get("add", []))}
    if "runAsUser" in context:
        options["user"] = f"{context['runAsUser']}:{context.get('runAsGroup', context['runAsUser'])}"
    if context.get("seccompProfile", {}).get("type") == "Unconfined":
        options["security_opt"].append("seccomp=unconfined")
    if context.get("appArmorProfile", {}).get("type") == "Unconfined":
        options["security_opt"].append("apparmor=unconfined")
    if context.get("procMount") == "Unmasked":
        options["security_opt"].append("systempaths=unconfined")
    assert set(context) <= {"runAsUser", "runAsGroup", "capabilities", "seccompProfile", "appArmorProfile", "procMount"}, \
        f"a securityContext field this translation does not know: {sorted(context)}"
    return options


PRIVILEGES = {"compose": compose_privileges, "kubernetes": kubernetes_privileges}


@pytest.fixture(scope="module")
def worker_image(private_docker: dict[str, str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Any, str]]:
    """(a docker client of the private engine, the worker image built on it from this machine's files)."""
    import docker

    from tasks_lib.sandbox.worker_image import build_worker_image

    if shutil.which("git") is None:
        pytest.skip("git is needed to clone the checkout into the image")
    reference = build_worker_image(private_docker["base_url"], PROJECT_ROOT, "HEAD", DEPLOYMENTS / "Dockerfile",
                                   tmp_path_factory.mktemp("worker-image"))
    client = docker.DockerClient(base_url=private_docker["base_url"], timeout=RUN_SECONDS)
    try:
        yield client, reference
    finally:
        client.close()


def run_in_worker(client: Any, image: str, command: list[str], privileges: dict[str, Any],
                  artifacts: Path | None = None) -> tuple[int, str]:
    """Run `command` in a container of the worker image with `privileges`; (exit status, output)."""
    api = client.api
    options = dict(privileges)
    security_opt = list(options.pop("security_opt", []))
    unmasked = "systempaths=unconfined" in security_opt  # a docker CLI / compose option, not an API one:
    security_opt = [o for o in security_opt if o != "systempaths=unconfined"]  # they send empty masked paths
    host_config = api.create_host_config(network_mode="none", security_opt=security_opt or None,
                                         cap_add=options.pop("cap_add", None) or None,
                                         binds=[f"{artifacts}:/artifacts:rw"] if artifacts else None)
    if unmasked:
        host_config.update({"MaskedPaths": [], "ReadonlyPaths": []})
    created = api.create_container(image, command, user=options.pop("user", None), host_config=host_config,
                                   environment={"PREFECT_HOME": "/tmp/prefect"}, volumes=["/artifacts"] if artifacts else None)
    assert not options, f"privileges this helper does not pass on: {options}"
    try:
        api.start(created["Id"])
        status = api.wait(created["Id"], timeout=RUN_SECONDS)["StatusCode"]
        return status, api.logs(created["Id"]).decode(errors="replace")
    finally:
        api.remove_container(created["Id"], force=True)


def test_without_the_deployed_privileges_bubblewrap_cannot_run_in_the_worker(worker_image: tuple[Any, str]) -> None:
    """The control: with docker's defaults (what compose and the manifests gave the worker before) the
    sandbox cannot create its namespaces, so every attempt would be ungradable; the privileges below are
    what makes the difference, not the image."""
    client, image = worker_image
    status, output = run_in_worker(client, image, ["python3", "-c", PROBE], {})
    assert status == 0 and "cannot create namespaces here" in output, output


@pytest.mark.parametrize("where", list(PRIVILEGES))
def test_the_worker_container_runs_the_smoke_matrix_with_every_attempt_gradable(
        worker_image: tuple[Any, str], tmp_path: Path, where: str) -> None:
    """Regression: in the worker container as compose and the Kubernetes manifests ran it, bubblewrap
    could not create its namespaces ("No permissions to create new namespace", "Operation not
    permitted", "Can't mount proc"), so every attempt of a deployed run was ungradable. With the
    privileges the deployment files now set, `memtrial run` on the smoke config exits 0, every attempt
    is graded, and every check ran in `local/namespace` inside the container."""
    client, image = worker_image
    privileges = PRIVILEGES[where]()
    artifacts = tmp_path / "artifacts"
    artifacts.mkdir()
    artifacts.chmod(0o777)  # the compose worker is uid 1000
    status, output = run_in_worker(client, image, ["memtrial", "run", "--config", "configs/smoke.yaml", "--artifacts",
                                                   "/artifacts", "--json"], privileges, artifacts)
    assert status == 0, output[-4000:]
    runs = sorted(p for p in (artifacts / "runs").iterdir() if p.name.endswith("-calibration"))
    (run,) = runs
    records = pq.read_table(run / "records.parquet").to_pylist()
    assert len(records) == 4, records
    assert [r for r in records if r["outcome"] == "ungradable"] == [], records
    assert {r["check_sandbox"].removesuffix(" (judged apart)") for r in records} == {"local/namespace"}, [r["check_sandbox"] for r in records]
    assert all(r["outcome"] == "pass" for r in records), [(r["task_id"], r["condition"], r["outcome"]) for r in records]
