"""The sandbox interface: run one command for one arm, confined, and say what was enforced.

A provider runs `argv` with the workspace as its working directory and read-write, optional
read-only mounts, an environment that holds only what the runner passes (plus the provider's
private HOME and TMPDIR), and the limits of the arm. It returns the exit status, bounded
stdout/stderr, the wall time, whether the command timed out or was killed, how many of its
processes outlived the final kill, and, per run, every limit it could not enforce: a guarantee a
provider cannot give is reported, never assumed. What the command sees of the host is an
allow-list (the toolchain, the workspace, the request's mounts), and it never runs as root.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import ClassVar, Literal

from pydantic import Field, model_validator

from tasks_lib.contracts import ContractModel, Document, Environment, NonEmptyText
from tasks_lib.sandbox.errors import SandboxRequestError, SandboxUnsupported

Isolation = Literal["process", "namespace", "container"]
"""How a provider confines a command: a plain process group, Linux namespaces (bwrap), a container."""

Guarantee = Literal[
    "workspace-writable",
    "private-home-tmpdir",
    "private-tmp",
    "env-scrubbed",
    "hidden-paths",
    "host-allowlist",
    "write-confinement",
    "network-none",
    "timeout-kills-tree",
    "memory-limit",
    "output-bounded",
    "unprivileged",
]
"""A property the conformance suite checks; a provider lists the ones it cannot enforce."""

RESERVED_ENV = frozenset({"HOME", "TMPDIR"})
"""Variables the provider sets itself (private per run); a request may not pass them."""

DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
"""PATH inside the sandbox when the runner passes none."""

SANDBOX_HOME = "/home/user"
"""HOME inside a namespace or container sandbox (an empty private tmpfs; a neutral name on purpose)."""


class SandboxLimits(ContractModel):
    """Resource limits of one sandboxed command."""

    cpus: float = Field(default=1.0, gt=0, le=64)
    """CPU cores the command may use."""
    memory_mb: int = Field(default=2048, ge=16, le=262144)
    """Memory limit in MiB of the whole process tree and its private tmpfs pages (the run's cgroup for
    `local`, with address space per process as well; the container's cgroup for `docker`)."""
    timeout_seconds: float = Field(default=900.0, gt=0, le=86400)
    """Wall-clock limit; past it the whole process tree is killed."""
    network: Literal["none", "loopback"] = "none"
    """`none`: a private network namespace, nothing outside reachable; `loopback`: the host's loopback too."""
    max_processes: int = Field(default=512, ge=1, le=65536)
    """Process limit of the whole tree (the run's pids cgroup, and RLIMIT_NPROC, for `local`; the pids cgroup for `docker`)."""
    max_file_mb: int = Field(default=4096, ge=1, le=1048576)
    """Largest file the command may write, in MiB."""
    max_output_bytes: int = Field(default=1 << 20, ge=1024, le=1 << 30)
    """Bytes of stdout and of stderr kept; the rest is read, counted and dropped."""
    tmpfs_mb: int = Field(default=512, ge=1, le=262144)
    """Size cap in MiB of each private tmpfs folder (`/tmp`, `/var/tmp`, HOME); what is written there
    counts against `memory_mb` as well where the run's memory cgroup holds."""

    @classmethod
    def from_environment(cls, environment: Environment, timeout_seconds: float, **overrides: object) -> SandboxLimits:
        """Limits of a task's `environment`; raises SandboxUnsupported for network mode `public`."""
        if environment.network_mode == "public":
            raise SandboxUnsupported(
                "environment.network_mode 'public' is not offered by any sandbox provider; "
                "use 'none' or 'loopback' in the task manifest"
            )
        return cls(
            cpus=environment.cpus,
            memory_mb=environment.memory_mb,
            timeout_seconds=timeout_seconds,
            network=environment.network_mode,
            **overrides,  # type: ignore[arg-type]
        )


class ReadOnlyMount(ContractModel):
    """A host directory or file shown read-only inside the sandbox."""

    source: Path
    """Absolute host path."""
    target: str | None = None
    """Absolute path inside the sandbox; the same as `source` when absent."""

    @property
    def inside(self) -> str:
        """Where the mount appears inside the sandbox."""
        return self.target or str(self.source)


class SandboxRequest(ContractModel):
    """One command to run for one arm."""

    argv: tuple[NonEmptyText, ...] = Field(min_length=1)
    """The command, never through a shell unless argv names one."""
    workspace: Path
    """Absolute host path of the workspace; the working directory, read-write."""
    env: dict[str, str] = Field(default_factory=dict)
    """The whole environment of the command (HOME and TMPDIR are set by the provider)."""
    mounts: tuple[ReadOnlyMount, ...] = ()
    """Extra read-only mounts (toolchains, a memory replica socket directory)."""
    hidden_paths: tuple[Path, ...] = ()
    """Absolute host paths that must be invisible (the runner-owned area: hidden tests, verifier)."""
    limits: SandboxLimits = SandboxLimits()
    """Resource limits."""

    @model_validator(mode="after")
    def _check(self) -> SandboxRequest:
        if not self.workspace.is_absolute():
            raise ValueError(f"workspace {self.workspace} must be an absolute host path")
        reserved = sorted(RESERVED_ENV & set(self.env))
        if reserved:
            raise ValueError(f"env sets {', '.join(reserved)}; the provider sets these itself (private per run)")
        for key in self.env:
            if not key or "=" in key or "\x00" in key:
                raise ValueError(f"env key {key!r} is not a valid variable name")
        for mount in self.mounts:
            if not mount.source.is_absolute() or not mount.inside.startswith("/"):
                raise ValueError(f"mount {mount.source} -> {mount.inside}: both ends must be absolute paths")
        for hidden in self.hidden_paths:
            if not hidden.is_absolute():
                raise ValueError(f"hidden path {hidden} must be an absolute host path")
        return self

    def validate_host_paths(self) -> None:
        """Raise SandboxRequestError when the workspace or a mount source does not exist."""
        if not self.workspace.is_dir():
            raise SandboxRequestError(f"workspace {self.workspace} is not a directory; create it before running")
        for mount in self.mounts:
            if not mount.source.exists():
                raise SandboxRequestError(f"mount source {mount.source} does not exist")


class CapturedOutput(ContractModel):
    """One output stream, bounded."""

    text: str
    """The first `max_output_bytes` bytes, decoded as UTF-8 with replacement."""
    total_bytes: int = Field(ge=0)
    """Bytes the command wrote to the stream (all of them, kept or not)."""
    truncated: bool
    """True when bytes past the limit were dropped."""


class SandboxResult(Document):
    """What happened to one sandboxed command."""

    KIND: ClassVar[str] = "sandbox result"

    provider: NonEmptyText
    """Registry name of the provider."""
    isolation: Isolation
    """How the command was confined."""
    exit_code: int | None
    """Exit status, or None when a signal ended the command."""
    signal: int | None = None
    """The signal that ended the command, if one did."""
    stdout: CapturedOutput
    """Standard output, bounded."""
    stderr: CapturedOutput
    """Standard error, bounded."""
    wall_seconds: float = Field(ge=0)
    """Wall time from start to exit (or kill)."""
    timed_out: bool
    """True when the wall-clock limit was reached and the process tree was killed."""
    killed: bool
    """True when the command was killed (timeout, out of memory) rather than exiting by itself."""
    kill_reason: Literal["timeout", "memory", "signal"] | None = None
    """Why it was killed, when it was."""
    workspace_path: str
    """Where the workspace appeared inside the sandbox."""
    unenforced: tuple[str, ...] = ()
    """Each requested limit or guarantee this provider could not enforce for this run."""
    survivors: int = Field(default=0, ge=0)
    """Processes of the command still alive after the provider's final kill (0: none survived)."""

    @property
    def ok(self) -> bool:
        """True when the command exited 0 by itself."""
        return self.exit_code == 0 and not self.killed


class SandboxCapabilities(ContractModel):
    """What a provider can enforce where it runs."""

    provider: NonEmptyText
    """Registry name."""
    isolation: Isolation
    """How commands are confined."""
    unenforceable: dict[str, str] = Field(default_factory=dict)
    """Guarantee name -> why this provider cannot enforce it here."""
    network_modes: tuple[Literal["none", "loopback"], ...]
    """Network modes the provider accepts."""

    def enforces(self, guarantee: Guarantee) -> bool:
        """True when the provider claims `guarantee` here."""
        return guarantee not in self.unenforceable


class Sandbox(abc.ABC):
    """A way to run a command for an arm. Implementations are found by name in the registry."""

    name: ClassVar[str]

    @abc.abstractmethod
    def capabilities(self) -> SandboxCapabilities:
        """What this provider enforces here. Never raises."""

    @abc.abstractmethod
    def run(self, request: SandboxRequest) -> SandboxResult:
        """Run `request.argv` confined by the request's limits and return what happened.

        A command that fails, times out or is killed is a result, not an error.

        Raises:
            SandboxRequestError: the workspace or a mount source does not exist.
            SandboxUnsupported: the provider cannot give what the request asks (network mode,
                mount target).
            SandboxUnavailable: the provider cannot run here (bwrap broken, daemon gone, image missing).
            SandboxError: the command could not be started (e.g. argv[0] not found where it runs).
        """

    def close(self) -> None:  # noqa: B027 - a default no-op; providers holding an engine override it
        """Release what the provider holds (clients, connections). Never raises."""

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
