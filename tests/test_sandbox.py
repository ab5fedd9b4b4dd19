"""Sandbox providers: the conformance suite against every provider, plus the interface's errors.

Providers: `local` with bwrap (namespace isolation), `local` without it (process isolation; the
checks that need bwrap report not-enforceable and skip with the reason), and `docker` on a
private dockerd started for the session. A provider that cannot run here skips with the reason;
set MEMTRIAL_REQUIRE_BWRAP=1 / MEMTRIAL_REQUIRE_DOCKER=1 (CI does, after
scripts/install_test_deps.sh) to make that a failure instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import unavailable
from tasks_lib.contracts import Environment
from tasks_lib.sandbox import (
    Sandbox,
    SandboxLimits,
    SandboxRequest,
    SandboxRequestError,
    SandboxUnavailable,
    SandboxUnsupported,
    UnknownSandboxError,
    get_sandbox,
    sandbox_names,
)
from tasks_lib.sandbox.conformance import CHECKS, run_conformance
from tasks_lib.sandbox.local import LocalSandbox

PROVIDERS = ("local-bwrap", "local-process", "docker")


@pytest.fixture(scope="session")
def docker_sandbox(private_docker: dict[str, str]) -> Iterator[Sandbox]:
    """A docker provider on a private dockerd (own socket, data and exec roots) for the session."""
    with get_sandbox("docker", **private_docker) as sandbox:
        yield sandbox


@pytest.fixture(scope="session")
def bwrap_sandbox() -> Sandbox:
    try:
        return LocalSandbox(bwrap=True)
    except SandboxUnavailable as error:
        unavailable("MEMTRIAL_REQUIRE_BWRAP", f"local provider with bwrap not tested: {error}")
        raise


@pytest.fixture(params=PROVIDERS)
def sandbox(request: pytest.FixtureRequest) -> Sandbox:
    if request.param == "local-bwrap":
        return request.getfixturevalue("bwrap_sandbox")
    if request.param == "local-process":
        return LocalSandbox(bwrap=False)
    return request.getfixturevalue("docker_sandbox")


@pytest.mark.parametrize("check_name", list(CHECKS))
def test_conformance(sandbox: Sandbox, check_name: str, tmp_path: Path) -> None:
    """Every provider passes every check it claims; the others skip with the provider's reason."""
    outcome = CHECKS[check_name](sandbox, tmp_path)
    if outcome.status == "not-enforceable":
        pytest.skip(f"{sandbox.capabilities().isolation} isolation cannot enforce {check_name}: {outcome.detail}")
    assert outcome.status == "passed", outcome.detail


def test_run_conformance_covers_every_check(tmp_path: Path) -> None:
    """The whole suite runs in one call and names every check once (process mode is enough)."""
    outcomes = run_conformance(LocalSandbox(bwrap=False), tmp_path)
    assert [o.check for o in outcomes] == list(CHECKS)
    assert {o.status for o in outcomes} <= {"passed", "not-enforceable"}, [o for o in outcomes if o.status == "failed"]


def test_unknown_sandbox_lists_the_known_ones() -> None:
    with pytest.raises(UnknownSandboxError, match="known providers: docker, local"):
        get_sandbox("firecracker")
    assert {"local", "docker"} <= set(sandbox_names())


def test_request_refuses_reserved_variables(tmp_path: Path) -> None:
    """HOME and TMPDIR are the provider's (private per run); a runner cannot pass its own."""
    with pytest.raises(ValueError, match="HOME"):
        SandboxRequest(argv=("true",), workspace=tmp_path, env={"HOME": "/root"})


def test_missing_workspace_is_a_request_error(tmp_path: Path) -> None:
    request = SandboxRequest(argv=("true",), workspace=tmp_path / "absent")
    with pytest.raises(SandboxRequestError, match="absent"):
        LocalSandbox(bwrap=False).run(request)


def test_public_network_is_refused() -> None:
    with pytest.raises(SandboxUnsupported, match="public"):
        SandboxLimits.from_environment(Environment(network_mode="public"), timeout_seconds=60)
    limits = SandboxLimits.from_environment(Environment(cpus=2, memory_mb=1024), timeout_seconds=60)
    assert (limits.cpus, limits.memory_mb, limits.network) == (2, 1024, "none")


def test_docker_refuses_loopback(docker_sandbox: Sandbox, tmp_path: Path) -> None:
    """Containers get network none only."""
    request = SandboxRequest(argv=("true",), workspace=tmp_path, limits=SandboxLimits(network="loopback"))
    with pytest.raises(SandboxUnsupported, match="none only"):
        docker_sandbox.run(request)


def test_process_mode_records_what_it_did_not_enforce(tmp_path: Path) -> None:
    """Without bwrap a run still happens, and its result says network and hidden paths were not enforced."""
    result = LocalSandbox(bwrap=False).run(SandboxRequest(argv=("true",), workspace=tmp_path))
    assert result.ok and result.isolation == "process"
    assert any(note.startswith("network-none") for note in result.unenforced)
    assert any(note.startswith("hidden-paths") for note in result.unenforced)


def test_bwrap_process_list_does_not_reveal_host_paths(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    """Regression: bwrap's own command line (PID 1 inside) must not name the workspace or hidden paths."""
    runner = tmp_path / "runner-owned-area"
    runner.mkdir()
    workspace = tmp_path / "ws"
    workspace.mkdir()
    result = bwrap_sandbox.run(SandboxRequest(argv=("sh", "-c", "cat /proc/*/cmdline | tr '\\0' ' '"),
                                              workspace=workspace, hidden_paths=(runner,)))
    assert result.ok, result.stderr.text
    assert str(tmp_path) not in result.stdout.text and "runner-owned-area" not in result.stdout.text


def test_bwrap_mount_target_inside_workspace_is_refused(bwrap_sandbox: Sandbox, tmp_path: Path) -> None:
    """A mount point inside /workspace would be created in the workspace and fail the mutation audit."""
    from tasks_lib.sandbox import ReadOnlyMount

    request = SandboxRequest(argv=("true",), workspace=tmp_path,
                             mounts=(ReadOnlyMount(source=Path("/usr"), target="/workspace/usr"),))
    with pytest.raises(SandboxUnsupported, match="inside /workspace"):
        bwrap_sandbox.run(request)
