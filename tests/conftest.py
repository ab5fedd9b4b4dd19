"""Shared test fixtures: real git repositories in tmp_path and a real S3-compatible server on 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from gitrepo import MakeRepo, git, write_files

SHARED_DATA = Path(__file__).resolve().parents[2] / "shared" / "data"


def unavailable(variable: str, reason: str) -> None:
    """Skip with `reason`, or fail when `variable`=1 says the part is required (CI sets it)."""
    import os

    if os.environ.get(variable) == "1":
        pytest.fail(f"{reason} ({variable}=1 requires it)")
    pytest.skip(reason)


@pytest.fixture(scope="session")
def private_docker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    """A private dockerd (own socket, data and exec roots) with the sandbox image, for the session:
    yields the `docker` provider's options (base_url, image)."""
    from tasks_lib.sandbox.dockerd import PrivateDockerd, dockerd_problem
    from tasks_lib.sandbox.errors import DockerdError
    from tasks_lib.sandbox.rootfs import ensure_image

    problem = dockerd_problem()
    if problem is not None:
        unavailable("MEMTRIAL_REQUIRE_DOCKER", f"docker provider not tested: {problem}")
    daemon = PrivateDockerd()
    try:
        daemon.start()
    except DockerdError as error:
        unavailable("MEMTRIAL_REQUIRE_DOCKER", f"docker provider not tested: {error}")
    try:
        yield {"base_url": daemon.base_url, "image": ensure_image(daemon.base_url, tmp_path_factory.mktemp("image"))}
    finally:
        daemon.stop()

@pytest.fixture
def make_repo(tmp_path: Path) -> MakeRepo:
    """Factory: a real git repository with `files` committed; returns (path, commit id)."""
    counter = iter(range(1000))

    def make(files: dict[str, str | bytes]) -> tuple[Path, str]:
        repo = tmp_path / f"repo{next(counter)}"
        repo.mkdir()
        git(repo, "init", "-q", "-b", "main")
        write_files(repo, files)
        git(repo, "add", "-A")
        git(repo, "commit", "-q", "-m", "initial")
        return repo, git(repo, "rev-parse", "HEAD")

    return make


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3-compatible HTTP server (moto's server mode) on 127.0.0.1, stopped after the session."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.fixture
def s3_env(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> str:
    """Environment pointing boto3 at the local S3 server with throwaway credentials."""
    monkeypatch.setenv("MEMTRIAL_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_REGION", "us-east-1")
    return s3_endpoint


def pytest_configure(config: pytest.Config) -> None:
    """Keep Prefect's state and memtrial's home out of the checkout during tests."""
    import os
    import tempfile

    home = Path(tempfile.mkdtemp(prefix="memtrial-test-home-"))
    os.environ.setdefault("MEMTRIAL_HOME", str(home))
    # Pinned upstream sources are content-addressed and verified on every read, so one cache per
    # machine serves every test session: each release is fetched once, not once per session.
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "memtrial" / "upstream"
    os.environ.setdefault("MEMTRIAL_UPSTREAM_CACHE", str(cache))
    os.environ.setdefault("PREFECT_HOME", str(home / "prefect"))
    os.environ.setdefault("MEMTRIAL_PACK_CACHE", str(home / "packs"))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "180")
    os.environ.setdefault("PREFECT_SERVER_LOGGING_LEVEL", "CRITICAL")
    if not hasattr(config, "workerinput"):  # once per session, before any xdist worker starts
        _fetch_bundled_releases()


def _fetch_bundled_releases() -> None:
    """The test session's set-up, as `make demo`'s: `memtrial corpus fetch` for the bundled corpus when a
    pinned release is missing from the machine's cache (runs never download; the tests run flows)."""
    import sys

    from tasks_lib.corpus.prepare import fetch_upstream_sources
    from tasks_lib.corpus.tasks import load_tasks
    from tasks_lib.corpus.upstream import is_fetched

    root = Path(__file__).resolve().parents[1]
    tasks = root / "corpora" / "tasks"
    if all(is_fetched(t.manifest.upstream) for t in load_tasks(tasks) if t.manifest.upstream is not None):
        return
    for failed in (f for f in fetch_upstream_sources(root, "HEAD", tasks) if f.error):
        print(f"conftest: {failed.error}", file=sys.stderr)


@pytest.fixture(scope="session")
def prefect_harness() -> Iterator[None]:
    """A real Prefect API on a temporary database for the whole session."""
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=180):
        yield


# --------------------------------------------------------------------------- `make test-fast`

INTEGRATION_FILES = ("test_flow_*.py", "test_deployment_*.py", "test_hostile_*.py", "test_*provision*.py", "test_arms.py")
"""Test files of the flows, the deployments, the attacks and the arms (each drives real arms end to end) and the
provisioners (real provisioner processes and memory servers)."""
INTEGRATION_FIXTURES = frozenset({"prefect_harness", "private_docker"})
"""Fixtures that start a Prefect API or a private dockerd."""
INTEGRATION_IMPORTS = ("prefect", "flows.nightly", "flows.paired", "flows.suites", "flows.writepath", "flows.stages",
                       "flows.runtime.localserver", "tasks_lib.agents.claude_code", "tasks_lib.sandbox.dockerd")
"""Modules whose import by a test file means it drives Prefect flows, the Claude Code CLI or docker."""


_integration_files: dict[Path, bool] = {}


def _imports_integration(path: Path) -> bool:
    """True when the test file at `path` imports one of INTEGRATION_IMPORTS (at any depth of its code)."""
    cache = _integration_files
    if path not in cache:
        import ast

        names = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module:
                names.add(node.module)
        cache[path] = any(name == root or name.startswith(root + ".") for name in names for root in INTEGRATION_IMPORTS)
    return cache[path]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark `integration` (the rule `make test-fast` leaves out; `make test` and CI run everything): a test
    marked slow; one using a fixture that starts Prefect or docker; one in a file named in INTEGRATION_FILES
    or that imports a Prefect flow, Prefect itself, the Claude Code agent or dockerd; and one marked
    integration itself (a real run or the whole bundled corpus behind one test)."""
    for item in items:
        if item.get_closest_marker("integration"):
            continue
        path = Path(str(item.fspath))
        if (item.get_closest_marker("slow") or INTEGRATION_FIXTURES & set(getattr(item, "fixturenames", ()))
                or any(path.match(pattern) for pattern in INTEGRATION_FILES) or _imports_integration(path)):
            item.add_marker(pytest.mark.integration)
