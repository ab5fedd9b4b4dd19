"""The `docker` provider: one container per command, network `none`, the workspace bind-mounted.

The container's root filesystem is read-only; `/tmp` and HOME are private tmpfs; the workspace is
bound read-write at `/workspace` and nothing else of the host is mounted except the request's
read-only mounts, so the runner-owned area is invisible by construction (a hidden path inside the
workspace or a mount is covered by an empty tmpfs). CPUs, memory (memory+swap equal, so no
swap), process count and file size come from the limits; all capabilities are dropped and the
command never runs as root: a root runner lends the workspace to a uid of its own for the run
(see `identity`), any other runner runs it as itself. On timeout the container is killed, which
kills every process in it. Isolation is `container`. A container is the engine's child, not this
process's, so each one is registered with a stop action (`tasks_lib.sandbox.stops`) from its creation
to its removal: a Ctrl-C of the run removes it (`flows.runtime.interrupt`).

The engine is the one the caller names (`base_url`, e.g. a private dockerd's socket in the tests), else
the user's own: `DOCKER_HOST` (with `DOCKER_TLS_VERIFY` / `DOCKER_CERT_PATH`, as the docker CLI reads
them), else the default socket `unix:///var/run/docker.sock`. The image is the pinned reference the
caller names (`name@sha256:...`, pulled when the engine lacks it), else one built on that engine from
this machine's files (`rootfs.ensure_image`: nothing is pulled; tag = hash of its inputs), once per
process and engine.
"""

from __future__ import annotations

import os
import re
import time
from typing import Literal

from tasks_lib.sandbox.base import (
    DEFAULT_PATH,
    SANDBOX_HOME,
    Sandbox,
    SandboxCapabilities,
    SandboxRequest,
    SandboxResult,
)
from tasks_lib.sandbox.capture import BoundedSink, drain_chunks
from tasks_lib.sandbox.errors import SandboxError, SandboxUnavailable, SandboxUnsupported
from tasks_lib.sandbox.identity import RunIdentity, lent_workspace, run_identity
from tasks_lib.sandbox.rootfs import ensure_image
from tasks_lib.sandbox.stops import forget, register

WORKSPACE_INSIDE = "/workspace"
TMPFS_OPTIONS = "rw,nosuid,nodev,size=512m,mode=1777"
READER_JOIN_SECONDS = 10.0
API_TIMEOUT_SECONDS = 60
DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock"
"""The engine used when neither the caller nor `DOCKER_HOST` names one (the docker CLI's default)."""
ENGINE_URL_PATTERN = r"^(unix|tcp|ssh|npipe)://\S+$"
"""What an engine address looks like (as `DOCKER_HOST` takes it)."""
PINNED_IMAGE_PATTERN = r"^[a-z0-9][a-z0-9._/:-]*@sha256:[0-9a-f]{64}$"
"""A pinned image reference: `name@sha256:<64 hex digits>` (a tag alone can move)."""
PING_SECONDS = 10
"""How long the engine has to answer the first ping."""

_BUILT_IMAGES: dict[str, str] = {}
"""engine address -> the image this process built (or found) there from host files."""


def engine_url(base_url: str | None = None) -> str:
    """The engine a `DockerSandbox(base_url=...)` talks to: `base_url`, else `DOCKER_HOST`, else the default socket."""
    return base_url or os.environ.get("DOCKER_HOST") or DEFAULT_DOCKER_HOST


def local_image(base_url: str | None = None) -> str:
    """The sandbox image built from this machine's files on the engine (built once per process and engine).

    Raises:
        SandboxUnavailable: the rootfs cannot be assembled or the engine refuses the import.
    """
    url = engine_url(base_url)
    if url not in _BUILT_IMAGES:
        _BUILT_IMAGES[url] = ensure_image(url)
    return _BUILT_IMAGES[url]


class DockerSandbox(Sandbox):
    """Run each command in a fresh container on the daemon at `base_url` from `image`."""

    name = "docker"

    def __init__(self, *, base_url: str | None = None, image: str | None = None) -> None:
        """Connect to the engine at `engine_url(base_url)` and make sure it has the image: `image` (a
        pinned reference, pulled when missing), else one built there from this machine's files.

        Raises:
            SandboxUnavailable: the engine does not answer, or has no image `image` and cannot pull it,
                or cannot build the local one.
        """
        import docker  # noqa: PLC0415 - the SDK is only loaded for this provider
        from docker.errors import DockerException, ImageNotFound  # noqa: PLC0415
        from requests.exceptions import RequestException  # noqa: PLC0415

        self._docker = docker
        self._api_errors: tuple[type[BaseException], ...] = (DockerException, RequestException, OSError)
        url = engine_url(base_url)
        self.base_url = url
        if not re.match(ENGINE_URL_PATTERN, url):
            raise SandboxUnavailable(f"docker engine address {url!r} is not unix://, tcp://, ssh:// or npipe://; fix DOCKER_HOST or docker.host")
        try:
            if base_url is None:  # the user's engine, with the TLS settings the docker CLI reads
                self._client = docker.DockerClient.from_env(timeout=PING_SECONDS)
            else:
                self._client = docker.DockerClient(base_url=url, timeout=PING_SECONDS)
            self._client.ping()
            self._client.api.timeout = API_TIMEOUT_SECONDS
        except self._api_errors as error:
            raise SandboxUnavailable(f"docker engine at {url} does not answer ({_first_line(error)}); start it, or point "
                                     f"DOCKER_HOST (docker.host in the run config) at one that runs") from error
        if image is None:
            try:
                self.image = local_image(url)
            except SandboxUnavailable:
                self._client.close()
                raise
            return
        self.image = image
        try:
            try:
                self._client.images.get(image)
            except ImageNotFound:
                self._pull(image)
            except self._api_errors as error:
                raise SandboxUnavailable(f"docker engine at {url} does not answer ({_first_line(error)})") from error
        except SandboxUnavailable:
            self._client.close()
            raise

    def _pull(self, image: str) -> None:
        """Pull the pinned `image`; SandboxUnavailable naming the fix when the engine cannot."""
        if not re.match(PINNED_IMAGE_PATTERN, image):
            raise SandboxUnavailable(f"docker engine at {self.base_url} has no image {image!r} and it is not pinned "
                                     "(name@sha256:...); pin it, or leave docker.image unset to build one from this machine's files")
        try:
            self._client.images.pull(image)
        except self._api_errors as error:
            raise SandboxUnavailable(f"docker engine at {self.base_url} has no image {image} and cannot pull it "
                                     f"({_first_line(error)}); load it into the engine, or leave docker.image unset "
                                     "to build one from this machine's files") from error

    def capabilities(self) -> SandboxCapabilities:
        return SandboxCapabilities(provider=self.name, isolation="container", network_modes=("none",))

    def close(self) -> None:
        self._client.close()

    def _mounts(self, request: SandboxRequest) -> tuple[list[object], dict[str, str]]:
        types = self._docker.types
        mounts = [types.Mount(target=WORKSPACE_INSIDE, source=str(request.workspace), type="bind", read_only=False)]
        pairs = [(str(request.workspace), WORKSPACE_INSIDE)]
        for mount in request.mounts:
            if mount.inside == WORKSPACE_INSIDE or mount.inside.startswith(WORKSPACE_INSIDE + "/"):
                raise SandboxUnsupported(f"mount target {mount.inside} lies inside {WORKSPACE_INSIDE}")
            mounts.append(types.Mount(target=mount.inside, source=str(mount.source), type="bind", read_only=True))
            pairs.append((str(mount.source), mount.inside))
        tmpfs = {"/tmp": TMPFS_OPTIONS, SANDBOX_HOME: TMPFS_OPTIONS}
        for hidden in request.hidden_paths:
            text = str(hidden)
            if text == str(request.workspace) or str(request.workspace).startswith(text.rstrip("/") + "/"):
                raise SandboxUnsupported(f"workspace {request.workspace} lies inside hidden path {hidden}")
            for source, inside in pairs:
                if text.startswith(source.rstrip("/") + "/") and hidden.exists():
                    if not hidden.is_dir():
                        raise SandboxUnsupported(f"hidden path {hidden} is a file inside a mount; hide its folder")
                    tmpfs[inside + text[len(source.rstrip("/")):]] = "ro,size=1k"
        return mounts, tmpfs

    def run(self, request: SandboxRequest) -> SandboxResult:
        request.validate_host_paths()
        limits = request.limits
        if limits.network != "none":
            raise SandboxUnsupported(f"network {limits.network!r}: docker containers run with network none only")
        mounts, tmpfs = self._mounts(request)
        identity = run_identity() or RunIdentity(uid=os.getuid(), gid=os.getgid())
        with lent_workspace(request.workspace, identity if os.geteuid() == 0 else None):
            return self._create_and_run(request, mounts, tmpfs, identity)

    def _create_and_run(self, request: SandboxRequest, mounts: list[object], tmpfs: dict[str, str],
                        identity: RunIdentity) -> SandboxResult:
        limits = request.limits
        env = {"PATH": DEFAULT_PATH, **request.env, "HOME": SANDBOX_HOME, "TMPDIR": "/tmp"}
        types = self._docker.types
        try:
            container = self._client.containers.create(
                self.image,
                command=list(request.argv),
                user=f"{identity.uid}:{identity.gid}",
                environment=env,
                working_dir=WORKSPACE_INSIDE,
                mounts=mounts,
                tmpfs=tmpfs,
                network_mode="none",
                nano_cpus=int(limits.cpus * 1e9),
                mem_limit=f"{limits.memory_mb}m",
                memswap_limit=f"{limits.memory_mb}m",
                pids_limit=limits.max_processes,
                ulimits=[types.Ulimit(name="fsize", soft=limits.max_file_mb << 20, hard=limits.max_file_mb << 20),
                         types.Ulimit(name="core", soft=0, hard=0)],
                read_only=True,
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                hostname="localhost",
                log_config=types.LogConfig(type="json-file", config={"max-size": "64m", "max-file": "2"}),
            )
        except self._docker.errors.ImageNotFound as error:
            raise SandboxUnavailable(f"image {self.image!r} disappeared from the daemon") from error
        except self._api_errors as error:
            raise SandboxError(f"docker could not create a container for {request.argv[0]!r}: {error}") from error
        stop = register(f"container {container.short_id} on {self.base_url}", lambda: self._remove(container))
        try:
            result = self._run_container(container, request)
        finally:
            self._remove(container)
            forget(stop)
        if os.geteuid() != 0:
            return result  # the runner's own uid: removing the container is the proof
        return result.model_copy(update={"survivors": len(identity.survivors())})

    def _remove(self, container: object) -> None:
        """Kill and remove `container` (what an interrupt does too); one already gone is fine."""
        try:
            container.remove(force=True)  # type: ignore[attr-defined]
        except self._api_errors:
            pass  # already gone (or being removed by the interrupt); nothing of the run depends on it

    def _run_container(self, container: object, request: SandboxRequest) -> SandboxResult:
        limits = request.limits
        stdout, stderr = BoundedSink(limits.max_output_bytes), BoundedSink(limits.max_output_bytes)
        started = time.monotonic()
        try:
            container.start()  # type: ignore[attr-defined]
        except self._api_errors as error:
            raise SandboxError(f"docker could not start {request.argv[0]!r} in {self.image}: {error}") from error
        readers = [
            drain_chunks(container.logs(stdout=True, stderr=False, stream=True, follow=True), stdout, self._api_errors),  # type: ignore[attr-defined]
            drain_chunks(container.logs(stdout=False, stderr=True, stream=True, follow=True), stderr, self._api_errors),  # type: ignore[attr-defined]
        ]
        timed_out = False
        remaining = limits.timeout_seconds - (time.monotonic() - started)
        try:
            container.wait(timeout=max(0.1, remaining))  # type: ignore[attr-defined]
        except self._api_errors as error:
            if time.monotonic() - started < limits.timeout_seconds - 0.5:
                raise SandboxError(f"docker stopped answering while {request.argv[0]!r} ran: {error}") from error
            timed_out = True
        wall = time.monotonic() - started
        if timed_out:
            try:
                container.kill()  # type: ignore[attr-defined]
            except self._api_errors:
                pass  # it exited between the timeout and the kill
            container.wait(timeout=API_TIMEOUT_SECONDS)  # type: ignore[attr-defined]
        for reader in readers:
            reader.join(READER_JOIN_SECONDS)
        container.reload()  # type: ignore[attr-defined]
        state = container.attrs["State"]  # type: ignore[attr-defined]
        code = int(state["ExitCode"])
        oom = bool(state.get("OOMKilled"))
        killed = timed_out or oom or code == 137
        reason: Literal["timeout", "memory", "signal"] | None = "timeout" if timed_out else ("memory" if oom else ("signal" if killed else None))
        unenforced = []
        if any(r.is_alive() for r in readers):
            unenforced.append("the log stream did not end; output capture stopped early")
        return SandboxResult(
            provider=self.name,
            isolation="container",
            exit_code=None if killed and code >= 128 else code,
            signal=code - 128 if killed and code >= 128 else None,
            stdout=stdout.result(),
            stderr=stderr.result(),
            wall_seconds=round(wall, 6),
            timed_out=timed_out,
            killed=killed,
            kill_reason=reason,
            workspace_path=WORKSPACE_INSIDE,
            unenforced=tuple(unenforced),
        )


def _first_line(error: BaseException) -> str:
    """The first line of an SDK error (they can span a whole HTTP response)."""
    text = str(error).strip() or type(error).__name__
    return text.splitlines()[0][:300]
