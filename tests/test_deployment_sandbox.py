"""The deployment files give the worker container what an arm needs: the sandbox's privileges the same
in compose workers and docker jobs, a Kubernetes job template that carries them, and one address for
the object store. Checked as configuration; tests/test_worker_image.py runs arms with these privileges."""

from __future__ import annotations

import json
import os
import re
from typing import Any

import pytest
import yaml

from flows.runtime.settings import PROJECT_ROOT

DEPLOYMENTS = PROJECT_ROOT / "deployments"


def load(name: str) -> Any:
    return yaml.safe_load((DEPLOYMENTS / name).read_text())


def test_the_object_store_address_is_written_once_in_compose() -> None:
    """Regression: `http://minio:9000` was spelled out separately for the workers, the bucket job and
    the jobs, so moving the store meant finding every copy. compose.yaml writes it once and every
    service that talks to the store reads that value."""
    text = (DEPLOYMENTS / "compose.yaml").read_text()
    urls = re.findall(r"https?://minio:\d+", text)
    assert urls == ["http://minio:9000"], urls
    services = load("compose.yaml")["services"]
    readers = {name: s["environment"]["MEMTRIAL_S3_ENDPOINT_URL"] for name, s in services.items()
               if isinstance(s.get("environment"), dict) and "MEMTRIAL_S3_ENDPOINT_URL" in s["environment"]}
    assert set(readers) >= {"worker", "minio-bucket"} and set(readers.values()) == {urls[0]}, readers
    assert "$$MEMTRIAL_S3_ENDPOINT_URL" in " ".join(services["minio-bucket"]["command"])


def test_the_jobs_take_the_store_address_from_the_deploying_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: the docker and kubernetes jobs pointed at `http://minio:9000`, which neither a
    host-network docker job nor a Kubernetes pod resolves. The address now comes from
    MEMTRIAL_S3_ENDPOINT_URL when you deploy, templated by Prefect's own `prefect deploy` step."""
    from prefect.utilities.templating import apply_values

    prefect_yaml = load("prefect.yaml")
    monkeypatch.setenv("MEMTRIAL_S3_ENDPOINT_URL", "http://store.memtrial.svc.cluster.local:9000")
    resolved = apply_values(prefect_yaml, dict(os.environ), remove_notset=False)  # what prefect deploy does first
    for kind in ("docker", "kubernetes"):
        env = resolved["definitions"]["work_pools"][kind]["job_variables"]["env"]
        assert env["MEMTRIAL_S3_ENDPOINT_URL"] == "http://store.memtrial.svc.cluster.local:9000", kind
    assert "minio" not in json.dumps(prefect_yaml["definitions"]["env"]), "no store host is hard-coded for the jobs"
    compose_network = f"{load('compose.yaml')['name']}_default"
    assert prefect_yaml["definitions"]["work_pools"]["docker"]["job_variables"]["networks"] == [compose_network]


def test_compose_workers_and_docker_jobs_get_the_sandboxs_privileges() -> None:
    """Regression: compose workers and docker jobs ran with docker's default privileges, under which
    bubblewrap cannot create its namespaces. The compose worker (uid 1000) gets security options only;
    a docker job, created through the engine API that has no `systempaths=unconfined`, gets what a
    Kubernetes pod gets (tested for real in test_worker_image)."""
    worker = load("compose.yaml")["services"]["worker"]
    assert worker["security_opt"] == ["seccomp=unconfined", "systempaths=unconfined", "apparmor=unconfined"]
    assert "cap_add" not in worker and "privileged" not in worker and "user" not in worker, "uid 1000, no capability"
    job = load("prefect.yaml")["definitions"]["work_pools"]["docker"]["job_variables"]["container_create_kwargs"]
    template = json.loads((DEPLOYMENTS / "kubernetes" / "base-job-template.json").read_text())
    (container,) = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"]
    context = container["securityContext"]
    assert job["user"] == f"{context['runAsUser']}:{context['runAsGroup']}"
    assert job["cap_add"] == context["capabilities"]["add"]
    assert job["security_opt"] == ["seccomp=unconfined", "apparmor=unconfined"]
    assert "privileged" not in job


def test_the_kubernetes_job_template_carries_the_sandbox_privileges_and_every_variable_it_uses() -> None:
    """The failure prevented: a hand-edited base job template whose placeholders name a variable the pool
    does not define (Prefect would leave it unrendered), or pods without the sandbox's privileges."""
    template = json.loads((DEPLOYMENTS / "kubernetes" / "base-job-template.json").read_text())
    variables = set(template["variables"]["properties"])
    used = set(re.findall(r"\{\{\s*([a-z_]+)\s*\}\}", json.dumps(template["job_configuration"])))
    assert used and used <= variables, sorted(used - variables)
    (container,) = template["job_configuration"]["job_manifest"]["spec"]["template"]["spec"]["containers"]
    context = container["securityContext"]
    assert context["capabilities"]["add"] == ["SYS_ADMIN", "NET_ADMIN"] and context["runAsUser"] == 0
    assert context["seccompProfile"] == {"type": "Unconfined"} and context["appArmorProfile"] == {"type": "Unconfined"}
    assert "--base-job-template deployments/kubernetes/base-job-template.json" in (PROJECT_ROOT / "docs" / "DEPLOY.md").read_text()
