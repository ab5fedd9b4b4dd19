"""Client side of the external provisioner protocol: the memory-system boundary of a paired task.

A memory system joins memtrial through one executable, the provisioner, that speaks three verbs.
memtrial runs `<argv prefix> <verb>` with `asyncio.create_subprocess_exec` (never a shell),
writes exactly one compact JSON object to its stdin and closes it, and reads exactly one JSON
object from its stdout:

    restore   stdin  {fixture, graph_arm, run_identity, artifacts: {evidence_corpus, graph}}
              stdout {project, queue_before_count, restore_seconds, env?}
    snapshot  stdin  {project, probes: [{name, lane, query, expect_ids, expect_text}]}
              stdout {state, probes: [{name, hits, found}], queue_after_count, snapshot_seconds}
    destroy   stdin  {project}
              stdout {"ok": true}

Restore makes a frozen memory state live for one run and names it (`project`); its optional `env`
holds the variables the agent CLI and its hooks need to reach that state (a socket path, a store
file), which memtrial exports to them. A restore that fails must leave nothing live: memtrial
kills the provisioner's process group on a timeout, and when the response is rejected but names a
`project`, memtrial destroys that project before raising. Snapshot re-reads what is live and runs
named retrieval probes, so a run can prove that the memory it was meant to have was present and
retrievable. Destroy tears the state down; `provisioned()` runs it in a
finalizer. Stderr is operator diagnostics only: its tail is kept for error messages and never
parsed. Each way a provisioner can be subtly wrong has its own exception class below; none of
them can hang the caller, because every call has a timeout that kills the whole process group.

A confined provisioner (`ProvisionerConfig.confined`, what every run uses unless its config says
`unconfined: true`) runs each verb in its attempt's sandbox (`jail`): `Provisioner.close` ends that
sandbox and whatever still runs in it, so call it once the project is destroyed (`provisioned()` does).

The provisioner runs as the leader of a new session. On timeout, output past the limit or
cancellation, memtrial kills that session's process group; after a clean exit it leaves alone any
process the provisioner deliberately kept running (a memory server it started), which must not
hold the provisioner's stdout open.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import shlex
import signal
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, StringConstraints, ValidationError, model_validator

from tasks_lib.contracts import ArmArtifacts, ContractModel, Identifier, NonEmptyText, violations_of
from tasks_lib.errors import DigestMismatchError, MemtrialError
from tasks_lib.memory.env import SWITCHES
from tasks_lib.memory.provisioner.jail import ProvisionerConfinementError, ProvisionerJail
from tasks_lib.settings import MCP_MEMORY_SERVER
from tasks_lib.trees import sha256_file

VERBS = ("restore", "snapshot", "destroy")
"""The whole integration surface of a memory system."""

DEFAULT_TIMEOUT_SECONDS = 300.0
DEFAULT_OUTPUT_LIMIT_BYTES = 1024 * 1024
DEFAULT_STDERR_TAIL_BYTES = 64 * 1024
MESSAGE_STDERR_CHARS = 2000
"""How much of the stderr tail an error message quotes (the error object keeps the whole tail)."""
BASE_ENV = ("PATH", "HOME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "PYTHONPATH", "VIRTUAL_ENV",
            MCP_MEMORY_SERVER.name)
"""The runner's variables every provisioner inherits (where programs, the interpreter's packages, temp files
and the bundled mcp-memory server are); the rest (API keys, cloud credentials, the runner's other settings)
only when named in `pass_env`."""

Verb = Literal["restore", "snapshot", "destroy"]
Lane = Literal["fulltext", "semantic", "graph"]

ProjectName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,255}$")]
"""A provisioner-chosen handle of live state: letters, digits, '.', '_', ':' and '-'."""

AbsolutePath = Annotated[str, StringConstraints(pattern=r"^/.*")]
"""An absolute POSIX path on the machine that runs the provisioner."""

Count = Annotated[int, Field(ge=0)]
Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")]
"""An environment variable's name."""
EnvValue = Annotated[str, StringConstraints(max_length=4096, pattern=r"^[^\x00]*$")]

RESERVED_ENV = frozenset({*SWITCHES, "PATH", "HOME"})
"""Variables a provisioner may not set for the agent (nor any LD_*): memtrial's own switches, and
what confines the agent."""


# --------------------------------------------------------------------------- errors


class ProvisionerError(MemtrialError):
    """A provisioner call failed; subclasses say how."""

    def __init__(self, message: str, *, verb: str, argv: Sequence[str], stderr_tail: bytes = b"") -> None:
        self.verb = verb
        self.argv = tuple(argv)
        self.stderr_tail = stderr_tail
        self.stdout = b""
        """The stdout of a response that was rejected (output and schema errors), else empty."""
        super().__init__(message)

    def __reduce__(self) -> tuple[object, tuple[str], dict[str, object]]:
        """Pickle with the keyword fields (an arm's error crosses from a Dask worker to the flow intact)."""
        rebuild = functools.partial(type(self), verb=self.verb, argv=self.argv, stderr_tail=self.stderr_tail)
        return rebuild, (str(self),), dict(self.__dict__)


class FixtureArtifactEscapeError(ProvisionerError):
    """A fixture artifact's resolved path (symlinks followed) lies outside the fixture root."""


class FixtureArtifactMissingError(ProvisionerError):
    """A fixture artifact (or the fixture root) does not exist or is not a regular file."""


class FixtureArtifactDigestError(ProvisionerError, DigestMismatchError):
    """A fixture artifact's SHA-256 differs from the digest its manifest pins."""


class ProvisionerLaunchError(ProvisionerError):
    """The provisioner executable could not be started."""


class ProvisionerTimeoutError(ProvisionerError):
    """The provisioner did not finish in time; its whole process group was killed."""


class ProvisionerOutputLimitError(ProvisionerError):
    """The provisioner wrote more stdout than the byte limit; it was killed mid-stream."""


class ProvisionerExitError(ProvisionerError):
    """The provisioner exited with a non-zero status (or was killed by a signal)."""


class ProvisionerOutputError(ProvisionerError):
    """The provisioner's stdout is not exactly one strict JSON object."""


class ProvisionerSchemaError(ProvisionerError):
    """The provisioner's JSON object has unknown, missing or mistyped fields."""


class ProbeReceiptError(ProvisionerError):
    """A snapshot's probe results contradict the probes asked (names, order or `found` flags)."""


# --------------------------------------------------------------------------- protocol models


class RestoreArtifacts(ContractModel):
    """Artifacts the client resolved inside the fixture root and verified by SHA-256."""

    evidence_corpus: AbsolutePath | None
    """Absolute path of the evidence corpus (documents the memory was built from); null for none."""
    graph: AbsolutePath | None
    """Absolute path of the graph/memory state to restore; null for an arm without one."""


class RestoreRequest(ContractModel):
    """stdin of `restore`: make one arm's frozen memory state live for one run."""

    fixture: Identifier
    """Id of the fixture the artifacts belong to."""
    graph_arm: Identifier
    """Name of the graph arm being restored."""
    run_identity: Identifier
    """Identity of the run this state serves; two identities must never share live state."""
    artifacts: RestoreArtifacts
    """The verified artifacts to load."""


class RestoreResponse(ContractModel):
    """stdout of `restore`."""

    project: ProjectName
    """Handle of the live state; passed back to `snapshot` and `destroy`."""
    queue_before_count: Count
    """Items waiting in the memory system's ingestion queue once restore returned."""
    restore_seconds: Seconds
    """Wall time the provisioner spent restoring, as it measured it."""
    env: dict[EnvName, EnvValue] = {}
    """Variables memtrial exports to the agent CLI and its hooks so they reach this live state."""

    @model_validator(mode="after")
    def _no_reserved_env(self) -> RestoreResponse:
        taken = sorted(name for name in self.env if name in RESERVED_ENV or name.startswith("LD_"))
        if taken:
            raise ValueError(f"env may not set {taken}: memtrial sets the memory switches and the agent's confinement itself")
        return self


class Probe(ContractModel):
    """A named retrieval the snapshot must run; exactly one of `expect_ids`, `expect_text` is set.

    It is found when every id in `expect_ids` is among the hit ids, or when some hit's text
    contains `expect_text` (case-sensitive substring).
    """

    name: Identifier
    """Name of the probe, unique within one snapshot request."""
    lane: Lane
    """Retrieval lane to query: `fulltext` (keyword), `semantic` (similarity) or `graph` (node and neighbours)."""
    query: NonEmptyText
    """Query text handed to that lane."""
    expect_ids: tuple[NonEmptyText, ...] | None = Field(default=None, min_length=1)
    """Ids (as named in the artifacts) that must all be among the hits; null when `expect_text` is used."""
    expect_text: NonEmptyText | None = None
    """Text that some hit must contain; null when `expect_ids` is used."""

    @model_validator(mode="after")
    def _one_expectation(self) -> Probe:
        if (self.expect_ids is None) == (self.expect_text is None):
            raise ValueError(f"probe {self.name!r} must set exactly one of expect_ids and expect_text")
        return self

    def is_met_by(self, hits: Sequence[ProbeHit]) -> bool:
        """Return whether `hits` satisfy this probe's expectation."""
        if self.expect_ids is not None:
            return set(self.expect_ids) <= {hit.id for hit in hits}
        return any(self.expect_text in hit.text for hit in hits)  # type: ignore[operator]


class SnapshotRequest(ContractModel):
    """stdin of `snapshot`: re-read the live state of a project and run the probes."""

    project: ProjectName
    """The handle `restore` returned."""
    probes: tuple[Probe, ...] = ()
    """Probes to run, in order."""

    @model_validator(mode="after")
    def _unique_names(self) -> SnapshotRequest:
        names = [probe.name for probe in self.probes]
        if len(names) != len(set(names)):
            raise ValueError(f"probe names must be unique, got {names}")
        return self


class ProbeHit(ContractModel):
    """One item a probe retrieved."""

    id: NonEmptyText
    """Id of the item as named in the restored artifacts (document id or node id)."""
    text: str
    """The item's text (or the part the lane matched)."""


class ProbeResult(ContractModel):
    """Outcome of one probe."""

    name: Identifier
    """Name of the probe, as requested."""
    hits: tuple[ProbeHit, ...]
    """What the lane returned, best first."""
    found: bool
    """Whether the hits meet the probe's expectation; memtrial recomputes and must agree."""


class SnapshotState(ContractModel):
    """What the provisioner re-read as live, independently of what restore reported."""

    exists: bool
    """Whether the project is live at all; false after destroy."""
    evidence_documents: Count
    """Evidence documents live in the project."""
    graph_nodes: Count
    """Graph nodes (memories, entities) live in the project."""
    graph_edges: Count
    """Graph edges live in the project."""


class SnapshotResponse(ContractModel):
    """stdout of `snapshot`."""

    state: SnapshotState
    """What is live."""
    probes: tuple[ProbeResult, ...]
    """One result per requested probe, in request order."""
    queue_after_count: Count
    """Items still waiting in the ingestion queue."""
    snapshot_seconds: Seconds
    """Wall time the provisioner spent on the snapshot."""


class DestroyRequest(ContractModel):
    """stdin of `destroy`: tear down a project; destroying an absent project is not an error."""

    project: ProjectName
    """The handle `restore` returned."""


class DestroyResponse(ContractModel):
    """stdout of `destroy`."""

    ok: Literal[True]
    """Always true; a failed destroy exits non-zero instead."""


class ProvisionerConfig(ContractModel):
    """How to reach one provisioner."""

    argv: tuple[NonEmptyText, ...] = Field(min_length=1)
    """Command prefix; the verb is appended as the last argument."""
    fixture_root: Path
    """Folder the fixture's artifact paths are relative to; no artifact may resolve outside it."""
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0)
    """Wall-clock limit of one verb; past it the provisioner's process group is killed."""
    output_limit_bytes: int = Field(default=DEFAULT_OUTPUT_LIMIT_BYTES, ge=1024)
    """Most stdout bytes accepted from one verb."""
    stderr_tail_bytes: int = Field(default=DEFAULT_STDERR_TAIL_BYTES, ge=0)
    """How much of the end of stderr is kept for error messages."""
    env: dict[str, str] = {}
    """Variables the provisioner gets beside the BASE_ENV ones it inherits (nothing else of the runner's)."""
    pass_env: tuple[EnvName, ...] = ()
    """Names of further runner variables the provisioner needs (an API key, a cache folder); passed when set."""
    confined: bool = False
    """True: every verb runs in the provisioner's sandbox (`jail`), with `state` and the grants below;
    a run always confines its provisioner unless its config says `unconfined: true`."""
    state: Path | None = None
    """The provisioner's state folder (MEMTRIAL_PROVISIONER_STATE), shown read-write in its sandbox."""
    read_paths: tuple[AbsolutePath, ...] = ()
    """Further host paths the sandbox shows read-only."""
    write_paths: tuple[AbsolutePath, ...] = ()
    """Further host paths the sandbox shows read-write."""
    network: bool = False
    """True: the sandbox shares the host network (default: none; it serves over a unix socket)."""


class ProvisionerSpec(ContractModel):
    """A memory system reached through its provisioner, as a run configuration names it.

    The fixture root is not part of it: memtrial writes each attempt's artifact into a
    runner-owned folder of that attempt.
    """

    argv: tuple[NonEmptyText, ...] = Field(min_length=1)
    """Command prefix of the provisioner; the verb is appended (e.g. ["memtrial-reference-provisioner"])."""
    env: dict[str, str] = {}
    """Variables added to the provisioner's environment (its state folder, a serving mode, ...)."""
    pass_env: tuple[EnvName, ...] = ()
    """Names of runner variables the provisioner needs beyond BASE_ENV (declared here, so the run config
    records them); every other variable of the runner's environment is withheld."""
    timeout_seconds: float = Field(default=DEFAULT_TIMEOUT_SECONDS, gt=0)
    """Wall-clock limit of one verb."""
    read_paths: tuple[AbsolutePath, ...] = ()
    """Host paths beyond its default view (interpreter, packages, its executable) the provisioner's sandbox
    shows read-only (its own data, a model cache); recorded with the run config."""
    write_paths: tuple[AbsolutePath, ...] = ()
    """Host paths beyond its state and fixture folders the sandbox shows read-write; recorded with the run config."""
    network: bool = False
    """True: the provisioner shares the host network (a hosted memory service); default none, recorded."""
    unconfined: bool = False
    """True: the provisioner runs without a sandbox, as the runner's user with the whole host in view
    (where bubblewrap cannot run); recorded, and named in the report's warnings."""

    @model_validator(mode="after")
    def _grants_need_a_sandbox(self) -> ProvisionerSpec:
        if self.unconfined and (self.read_paths or self.write_paths or self.network):
            raise ValueError("read_paths, write_paths and network grant a sandbox more; an unconfined provisioner has "
                             "no sandbox, so drop them or drop unconfined")
        return self

    def grants(self) -> str:
        """One line naming how the provisioner is confined and what it is granted beyond the default view."""
        if self.unconfined:
            return "unconfined: the provisioner ran as the runner's user with the whole host in view"
        extra = [f"read {p}" for p in self.read_paths] + [f"write {p}" for p in self.write_paths]
        return "confined, " + ("network shared" if self.network else "network none") + "".join(f", {e}" for e in extra)


# --------------------------------------------------------------------------- artifacts


def resolve_artifact(fixture_root: Path, path: str, sha256: str, *, verb: str, argv: Sequence[str]) -> Path:
    """Resolve `path` under `fixture_root` (symlinks followed), check it stays inside and matches `sha256`.

    The manifest contracts already refuse '..' and absolute paths; this check runs again on the
    resolved path because a symlink inside the fixture can point anywhere.
    """
    where = f"{verb} via {_show(argv)}"
    try:
        root = fixture_root.resolve(strict=True)
    except (FileNotFoundError, NotADirectoryError):
        raise FixtureArtifactMissingError(
            f"{where}: fixture root {fixture_root} does not exist; point fixture_root at the fixture folder",
            verb=verb, argv=argv) from None
    resolved = (root / path).resolve()
    if not resolved.is_relative_to(root):
        raise FixtureArtifactEscapeError(
            f"{where}: artifact {path!r} resolves to {resolved}, outside the fixture root {root}; "
            "keep artifacts (and symlink targets) inside the fixture folder", verb=verb, argv=argv)
    if not resolved.is_file():
        raise FixtureArtifactMissingError(
            f"{where}: artifact {path!r} ({resolved}) is not a regular file; rebuild the fixture",
            verb=verb, argv=argv)
    actual = sha256_file(resolved)
    if actual != sha256:
        raise FixtureArtifactDigestError(
            f"{where}: artifact {path!r} has sha256 {actual}, the manifest pins {sha256}; "
            "rebuild the fixture or update its manifest", verb=verb, argv=argv)
    return resolved


# --------------------------------------------------------------------------- transport


class _OverLimit(Exception):
    """Internal: stdout passed the byte limit."""


class _Tail:
    """The last `keep` bytes of a stream, readable while the stream is still open."""

    def __init__(self, keep: int) -> None:
        self.keep = keep
        self.data = bytearray()

    async def drain(self, stream: asyncio.StreamReader) -> None:
        while chunk := await stream.read(65536):
            self.data += chunk
            if len(self.data) > self.keep:
                del self.data[: len(self.data) - self.keep]


async def _read_bounded(stream: asyncio.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    total = 0
    while chunk := await stream.read(65536):
        total += len(chunk)
        if total > limit:
            raise _OverLimit(total)
        chunks.append(chunk)
    return b"".join(chunks)


async def _feed(stdin: asyncio.StreamWriter, payload: bytes) -> None:
    try:
        stdin.write(payload)
        await stdin.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the child stopped reading; its exit status tells the rest
    finally:
        stdin.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await stdin.wait_closed()


async def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group (it leads a new session) and reap the child."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    # Close our pipe ends before waiting: a pipe left undrained (stdout past the limit) or held
    # open by a process outside the group would keep wait() from returning, since asyncio only
    # reports the exit once every pipe is closed. Process has no public close, hence _transport.
    transport = getattr(process, "_transport", None)
    if transport is not None:
        transport.close()
    await process.wait()


def _show(argv: Sequence[str]) -> str:
    return shlex.join(argv)


def _stderr_excerpt(tail: bytes | bytearray) -> str:
    text = tail.decode("utf-8", errors="replace").strip()
    if not text:
        return "stderr was empty"
    if len(text) > MESSAGE_STDERR_CHARS:
        text = "..." + text[-MESSAGE_STDERR_CHARS:]
    return f"stderr tail: {text}"


def provisioner_env(config: ProvisionerConfig) -> dict[str, str]:
    """The provisioner's whole environment: the runner's BASE_ENV and `pass_env` variables that are set,
    then `config.env`; nothing else of the runner's environment."""
    inherited = {name: os.environ[name] for name in (*BASE_ENV, *config.pass_env) if name in os.environ}
    return {**inherited, **config.env}


def jail_of(config: ProvisionerConfig) -> ProvisionerJail | None:
    """The sandbox a confined provisioner's verbs run in (not started yet); None for an unconfined one."""
    if not config.confined:
        return None
    state = config.state if config.state is not None else config.fixture_root.parent / "provisioner-state"
    return ProvisionerJail(config.argv, config.fixture_root, state, read_paths=config.read_paths,
                           write_paths=config.write_paths, network=config.network)


async def run_verb(config: ProvisionerConfig, verb: Verb, payload: bytes, jail: ProvisionerJail | None = None) -> bytes:
    """Run `<argv> <verb>` with `payload` on stdin and return its stdout; enforce timeout, limits, exit status.

    With `jail` the verb runs in that sandbox (started on first use)."""
    argv: tuple[str, ...] = (*config.argv, verb)
    where = f"provisioner {verb!r} via {_show(config.argv)}"
    env = provisioner_env(config)
    if jail is not None:
        try:
            if not jail.running:
                jail.start()
            argv, env = (*jail.prefix(), *argv), jail.env(env)
        except (ProvisionerConfinementError, OSError) as error:
            raise ProvisionerLaunchError(f"{where}: {error}", verb=verb, argv=config.argv) from None
    try:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            start_new_session=True, env=env)
    except OSError as error:
        raise ProvisionerLaunchError(
            f"{where}: cannot start ({error}); check that the argv prefix names an executable",
            verb=verb, argv=config.argv) from None
    assert process.stdin and process.stdout and process.stderr
    tail = _Tail(config.stderr_tail_bytes)
    feed = asyncio.create_task(_feed(process.stdin, payload))
    read = asyncio.create_task(_read_bounded(process.stdout, config.output_limit_bytes))
    drain = asyncio.create_task(tail.drain(process.stderr))
    tasks: list[asyncio.Task[Any]] = [feed, read, drain]
    try:
        async with asyncio.timeout(config.timeout_seconds):
            _, stdout, _ = await asyncio.gather(feed, read, drain)
            returncode = await process.wait()
    except BaseException as error:
        for task in tasks:
            task.cancel()
        await _kill_group(process)
        await asyncio.gather(*tasks, return_exceptions=True)
        if isinstance(error, TimeoutError):
            raise ProvisionerTimeoutError(
                f"{where}: no result within {config.timeout_seconds:g} s; killed its process group. "
                f"Make the verb finish sooner (and close stdout) or raise timeout_seconds; {_stderr_excerpt(tail.data)}",
                verb=verb, argv=config.argv, stderr_tail=bytes(tail.data)) from None
        if isinstance(error, _OverLimit):
            raise ProvisionerOutputLimitError(
                f"{where}: stdout passed {config.output_limit_bytes} bytes; killed it. Write only the one "
                f"response object to stdout (diagnostics go to stderr); {_stderr_excerpt(tail.data)}",
                verb=verb, argv=config.argv, stderr_tail=bytes(tail.data)) from None
        raise
    if returncode != 0:
        status = f"was killed by signal {-returncode}" if returncode < 0 else f"exited with status {returncode}"
        raise ProvisionerExitError(
            f"{where}: {status}; fix the provisioner (see its stderr); {_stderr_excerpt(tail.data)}",
            verb=verb, argv=config.argv, stderr_tail=bytes(tail.data))
    return stdout


def _reject_constant(name: str) -> Any:
    raise ValueError(f"stdout contains {name}, which is not valid JSON")


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [key for key, _ in pairs]
    duplicates = sorted({key for key in keys if keys.count(key) > 1})
    if duplicates:
        raise ValueError(f"stdout has duplicate keys {duplicates}")
    return dict(pairs)


def parse_single_object(stdout: bytes) -> str:
    """Return stdout as text if it is exactly one strict JSON object (surrounding whitespace allowed).

    Raises ValueError saying what is wrong: empty, not UTF-8, not an object, more than one value,
    trailing text, duplicate keys, NaN/Infinity.
    """
    try:
        text = stdout.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"stdout is not UTF-8 ({error})") from None
    text = text.strip()
    if not text:
        raise ValueError("stdout is empty")
    decoder = json.JSONDecoder(object_pairs_hook=_no_duplicate_keys, parse_constant=_reject_constant)
    try:
        value, end = decoder.raw_decode(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"stdout is not JSON: {error.msg} at line {error.lineno} column {error.colno}") from None
    if not isinstance(value, dict):
        raise ValueError(f"stdout is a JSON {type(value).__name__}, not an object")
    if end != len(text):
        extra = text[end:].lstrip()[:60]
        raise ValueError(f"stdout has more after the first object (starting {extra!r}); write exactly one object")
    return text


R = TypeVar("R", bound=ContractModel)


def parse_response(stdout: bytes, model: type[R], *, verb: str, argv: Sequence[str]) -> R:
    """Validate a provisioner's stdout as exactly one object of `model`, strictly (no type coercion)."""
    where = f"provisioner {verb!r} via {_show(argv)}"
    try:
        text = parse_single_object(stdout)
    except ValueError as error:
        raise ProvisionerOutputError(
            f"{where}: {error}; print exactly one JSON object on stdout and send diagnostics to stderr",
            verb=verb, argv=argv) from None
    try:
        return model.model_validate_json(text, strict=True)
    except ValidationError as error:
        problems = "; ".join(str(v) for v in violations_of(error, f"{verb} response"))
        raise ProvisionerSchemaError(
            f"{where}: {problems}; answer with exactly the fields of {model.__name__}", verb=verb, argv=argv) from None


def encode_request(request: ContractModel) -> bytes:
    """Serialize a request as one compact JSON object and a newline."""
    return (json.dumps(request.model_dump(mode="json"), separators=(",", ":"), sort_keys=True,
                       ensure_ascii=False) + "\n").encode()


def named_project(stdout: bytes) -> str | None:
    """The valid `project` the first JSON object of a (possibly rejected) restore response names, if any."""
    try:
        value, _ = json.JSONDecoder().raw_decode(stdout.decode("utf-8").strip())
    except (UnicodeDecodeError, ValueError):
        return None
    project = value.get("project") if isinstance(value, dict) else None
    try:
        return DestroyRequest(project=project).project if isinstance(project, str) else None
    except ValidationError:
        return None


def check_probe_receipt(request: SnapshotRequest, response: SnapshotResponse, *, argv: Sequence[str]) -> None:
    """Raise ProbeReceiptError unless the response answers each probe, in order, with a truthful `found`."""
    asked = [probe.name for probe in request.probes]
    answered = [result.name for result in response.probes]
    where = f"provisioner 'snapshot' via {_show(argv)}"
    if asked != answered:
        raise ProbeReceiptError(
            f"{where}: answered probes {answered}, asked {asked}; return one result per probe in request order",
            verb="snapshot", argv=argv)
    for probe, result in zip(request.probes, response.probes):
        truth = probe.is_met_by(result.hits)
        if result.found != truth:
            raise ProbeReceiptError(
                f"{where}: probe {probe.name!r} says found={result.found} but its {len(result.hits)} hits "
                f"{'meet' if truth else 'do not meet'} the expectation; compute `found` from the hits returned",
                verb="snapshot", argv=argv)


# --------------------------------------------------------------------------- client


class Provisioner:
    """A provisioner reached through its argv prefix; every method raises a `ProvisionerError` subclass on failure."""

    def __init__(self, config: ProvisionerConfig) -> None:
        self.config = config
        self.jail = jail_of(config)

    def close(self) -> None:
        """End a confined provisioner's sandbox (whatever still runs in it is killed); call it once its project is destroyed."""
        if self.jail is not None:
            self.jail.close()

    async def call(self, verb: Verb, request: ContractModel, response_model: type[R]) -> R:
        """Send one request, return the strictly validated response.

        Raises ProvisionerLaunchError, ProvisionerTimeoutError, ProvisionerOutputLimitError,
        ProvisionerExitError, ProvisionerOutputError or ProvisionerSchemaError.
        """
        stdout = await run_verb(self.config, verb, encode_request(request), self.jail)
        try:
            return parse_response(stdout, response_model, verb=verb, argv=self.config.argv)
        except ProvisionerError as error:
            error.stdout = stdout
            raise

    def resolve_artifacts(self, arm: ArmArtifacts) -> RestoreArtifacts:
        """Resolve and verify the arm's artifacts. Raises FixtureArtifactEscapeError, ...MissingError, ...DigestError."""
        def one(ref: Any) -> str | None:
            if ref is None:
                return None
            return str(resolve_artifact(self.config.fixture_root, ref.path, ref.sha256,
                                        verb="restore", argv=self.config.argv))
        return RestoreArtifacts(evidence_corpus=one(arm.evidence), graph=one(arm.graph))

    async def restore(self, fixture: str, arm: ArmArtifacts, run_identity: str) -> RestoreResponse:
        """Verify the arm's artifacts, then make them live for `run_identity`; the provisioner is not run if they fail.

        When the response is rejected (ProvisionerOutputError / ProvisionerSchemaError) but names a
        valid `project`, that project is destroyed before the error is raised, so nothing is left live.
        """
        request = RestoreRequest(fixture=fixture, graph_arm=arm.arm, run_identity=run_identity,
                                 artifacts=self.resolve_artifacts(arm))
        try:
            return await self.call("restore", request, RestoreResponse)
        except ProvisionerError as error:
            project = named_project(error.stdout)
            if project is not None:
                try:
                    await self.destroy(project)
                except ProvisionerError as destroy_error:
                    error.add_note(f"destroy of the project {project!r} the rejected response named also failed: {destroy_error}")
                else:
                    error.add_note(f"the project {project!r} the rejected response named was destroyed")
            raise

    async def snapshot(self, project: str, probes: Sequence[Probe] = ()) -> SnapshotResponse:
        """Re-read the live state and run `probes`; also raises ProbeReceiptError for untruthful results."""
        request = SnapshotRequest(project=project, probes=tuple(probes))
        response = await self.call("snapshot", request, SnapshotResponse)
        check_probe_receipt(request, response, argv=self.config.argv)
        return response

    async def destroy(self, project: str) -> None:
        """Tear the project down."""
        await self.call("destroy", DestroyRequest(project=project), DestroyResponse)


class Provisioned:
    """Live state inside `provisioned()`: the restore receipt and a way to snapshot it."""

    def __init__(self, provisioner: Provisioner, restored: RestoreResponse) -> None:
        self.provisioner = provisioner
        self.restored = restored

    @property
    def project(self) -> str:
        """Handle of the live state."""
        return self.restored.project

    async def snapshot(self, probes: Sequence[Probe] = ()) -> SnapshotResponse:
        """Snapshot this project."""
        return await self.provisioner.snapshot(self.project, probes)


@contextlib.asynccontextmanager
async def provisioned(provisioner: Provisioner, fixture: str, arm: ArmArtifacts,
                      run_identity: str) -> AsyncIterator[Provisioned]:
    """Restore the arm, yield the live state, and always destroy it, also when the body raises.

    If the body raised and destroy fails too, the body's exception propagates with the destroy
    failure attached as a note. A restore that fails has nothing to destroy (see `Provisioner.restore`).
    """
    try:
        restored = await provisioner.restore(fixture, arm, run_identity)
        try:
            yield Provisioned(provisioner, restored)
        except BaseException as error:
            try:
                await provisioner.destroy(restored.project)
            except ProvisionerError as destroy_error:
                error.add_note(f"destroy of project {restored.project!r} also failed: {destroy_error}")
            raise
        await provisioner.destroy(restored.project)
    finally:
        provisioner.close()


# --------------------------------------------------------------------------- synchronous wrappers


def restore_sync(provisioner: Provisioner, fixture: str, arm: ArmArtifacts, run_identity: str) -> RestoreResponse:
    """`Provisioner.restore` for callers without an event loop."""
    return asyncio.run(provisioner.restore(fixture, arm, run_identity))


def snapshot_sync(provisioner: Provisioner, project: str, probes: Sequence[Probe] = ()) -> SnapshotResponse:
    """`Provisioner.snapshot` for callers without an event loop."""
    return asyncio.run(provisioner.snapshot(project, probes))


def destroy_sync(provisioner: Provisioner, project: str) -> None:
    """`Provisioner.destroy` for callers without an event loop."""
    asyncio.run(provisioner.destroy(project))


@contextlib.contextmanager
def provisioned_sync(provisioner: Provisioner, fixture: str, arm: ArmArtifacts,
                     run_identity: str) -> Iterator[RestoreResponse]:
    """`provisioned()` for callers without an event loop; yields the restore receipt."""
    try:
        restored = restore_sync(provisioner, fixture, arm, run_identity)
        try:
            yield restored
        except BaseException as error:
            destroy_after_failure_sync(provisioner, restored.project, error)
            raise
        else:
            destroy_sync(provisioner, restored.project)
    finally:
        provisioner.close()


def destroy_after_failure_sync(provisioner: Provisioner, project: str, error: BaseException) -> None:
    """Destroy `project` while `error` is propagating; a failed destroy becomes a note on `error`, never a new error."""
    try:
        destroy_sync(provisioner, project)
    except ProvisionerError as destroy_error:
        error.add_note(f"destroy of project {project!r} also failed: {destroy_error}")


def make_provisioner(argv: Sequence[str], fixture_root: Path, *, env: Mapping[str, str] | None = None,
                     pass_env: Sequence[str] = (), **limits: Any) -> Provisioner:
    """Build a Provisioner from an argv prefix and fixture root; `limits` are further ProvisionerConfig fields."""
    return Provisioner(ProvisionerConfig(argv=tuple(argv), fixture_root=fixture_root, env=dict(env or {}),
                                         pass_env=tuple(pass_env), **limits))
