"""Conformance suite every sandbox provider must pass (run from tests/test_sandbox.py).

Each check is a plain function `check(sandbox, base_dir) -> ConformanceOutcome` that builds what it
needs under `base_dir` (a workspace and, next to it, a runner-owned area with hidden tests and a
verifier), runs real commands and inspects real effects. A check the provider says it cannot
enforce returns `not-enforceable` with the provider's reason; it never passes silently. Every
check that passes also confirmed its control case (the command really ran, the allocation below
the limit succeeded, the listener really accepted connections from outside the sandbox).

The commands use `sh` and `python3` from the sandbox's PATH.
"""

from __future__ import annotations

import fnmatch
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from tasks_lib.contracts import ContractModel, NonEmptyText
from tasks_lib.sandbox.base import Guarantee, Sandbox, SandboxLimits, SandboxRequest, SandboxResult
from tasks_lib.sandbox.hostview import ETC_ALLOWED, VIEW_ROOTS
from tasks_lib.sandbox.loopback import loopback_listener
from tasks_lib.sandbox.procs import is_running, pids_matching

FAST = SandboxLimits(timeout_seconds=30, memory_mb=512, max_output_bytes=64 * 1024)

ALLOWED_TOP = VIEW_ROOTS | {"workspace", "sys", ".dockerenv"}
"""Top-level names a sandbox may show: the bwrap view, the workspace, a container's own /sys and marker."""
ALLOWED_ETC = (*ETC_ALLOWED, "hostname", "resolv.conf", "mtab")
"""`/etc` names a sandbox may show: the bwrap allow-list and the files a container engine writes."""


class ConformanceOutcome(ContractModel):
    """Result of one conformance check against one provider."""

    check: NonEmptyText
    """Name of the check."""
    status: Literal["passed", "failed", "not-enforceable"]
    """`not-enforceable` only when the provider itself declared it cannot enforce the guarantee."""
    detail: str
    """What was seen, in one or two lines."""


Check = Callable[[Sandbox, Path], ConformanceOutcome]


def _layout(base: Path) -> tuple[Path, Path]:
    """A workspace and, next to it, a runner-owned area holding hidden tests and a verifier."""
    workspace, runner = base / "workspace", base / "runner"
    workspace.mkdir(parents=True, exist_ok=True)
    (runner / "hidden").mkdir(parents=True, exist_ok=True)
    (runner / "hidden" / "test_secret.py").write_text("EXPECTED = 'runner-secret-7f3a'\n")
    (runner / "verifier.sh").write_text("#!/bin/sh\necho runner-secret-7f3a\n")
    return workspace, runner


def _run(sandbox: Sandbox, workspace: Path, script: str, limits: SandboxLimits = FAST, **kw: object) -> SandboxResult:
    return sandbox.run(SandboxRequest(argv=("sh", "-c", script), workspace=workspace, limits=limits, **kw))  # type: ignore[arg-type]


def _unenforceable(sandbox: Sandbox, name: str, guarantee: Guarantee) -> ConformanceOutcome | None:
    caps = sandbox.capabilities()
    if caps.enforces(guarantee):
        return None
    return ConformanceOutcome(check=name, status="not-enforceable", detail=caps.unenforceable[guarantee])


def _outcome(name: str, ok: bool, detail: str) -> ConformanceOutcome:
    return ConformanceOutcome(check=name, status="passed" if ok else "failed", detail=detail)


def _brief(result: SandboxResult) -> str:
    return f"exit={result.exit_code} killed={result.killed} stdout={result.stdout.text[-300:]!r} stderr={result.stderr.text[-300:]!r}"


# --------------------------------------------------------------------------- checks


def check_workspace_writable(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """The command runs in the workspace, can read what is there and write new files to the host."""
    workspace, _ = _layout(base)
    (workspace / "given.txt").write_text("given\n")
    result = _run(sandbox, workspace, "cat given.txt && mkdir -p out && echo written > out/new.txt && echo done")
    made = workspace / "out" / "new.txt"
    ok = result.ok and "given" in result.stdout.text and made.is_file() and made.read_text() == "written\n"
    return _outcome("workspace-writable", ok, _brief(result))


def check_private_home_tmpdir(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """HOME and TMPDIR exist, start empty, are writable, and are not shared between two runs."""
    workspace, _ = _layout(base)
    script = ('set -e; test -n "$HOME"; test -n "$TMPDIR"; echo "home:$(ls -A "$HOME" | wc -l)"; '
              'echo "tmp:$(ls -A "$TMPDIR" | wc -l)"; touch "$HOME/mark" "$TMPDIR/mark"; echo ok')
    first, second = _run(sandbox, workspace, script), _run(sandbox, workspace, script)
    ok = all(r.ok and "home:0" in r.stdout.text and "tmp:0" in r.stdout.text and "ok" in r.stdout.text
             for r in (first, second))
    return _outcome("private-home-tmpdir", ok, f"second run: {_brief(second)}")


def check_private_tmp(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """/tmp is private and empty: a file the runner put in the host's /tmp is not visible."""
    if (skip := _unenforceable(sandbox, "private-tmp", "private-tmp")) is not None:
        return skip
    workspace, _ = _layout(base)
    marker = Path("/tmp") / f"conformance-{secrets.token_hex(6)}"
    marker.write_text("host tmp\n")
    try:
        result = _run(sandbox, workspace, f'echo "tmp:$(ls -A /tmp | wc -l)"; test -e {marker} && echo LEAK; echo ok')
    finally:
        marker.unlink()
    ok = result.ok and "tmp:0" in result.stdout.text and "LEAK" not in result.stdout.text
    return _outcome("private-tmp", ok, _brief(result))


def check_env_scrubbed(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """Only what the runner passes is in the environment: a parent variable is absent."""
    workspace, _ = _layout(base)
    parent_key, parent_value = "CONFORMANCE_PARENT_SECRET", secrets.token_hex(8)
    old = os.environ.get(parent_key)
    os.environ[parent_key] = parent_value
    try:
        result = sandbox.run(SandboxRequest(argv=("sh", "-c", "env"), workspace=workspace, limits=FAST,
                                            env={"PASSED_BY_RUNNER": "yes"}))
    finally:
        if old is None:
            del os.environ[parent_key]
        else:
            os.environ[parent_key] = old
    text = result.stdout.text
    ok = result.ok and "PASSED_BY_RUNNER=yes" in text and parent_key not in text and parent_value not in text
    return _outcome("env-scrubbed", ok, _brief(result))


def check_hidden_paths(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """The runner-owned area next to the workspace (hidden tests, verifier) cannot be read."""
    if (skip := _unenforceable(sandbox, "hidden-paths", "hidden-paths")) is not None:
        return skip
    workspace, runner = _layout(base)
    staged = workspace / ".graded"  # a runner-owned folder inside the workspace, masked explicitly
    staged.mkdir(exist_ok=True)
    (staged / "answer.txt").write_text("runner-secret-7f3a\n")
    script = (f"cat {runner}/verifier.sh {runner}/hidden/test_secret.py 2>/dev/null; "
              f"cat ../runner/verifier.sh .graded/answer.txt 2>/dev/null; ls -A {runner} 2>/dev/null; echo probe-done")
    result = _run(sandbox, workspace, script, hidden_paths=(runner, staged))
    ok = result.ok and "probe-done" in result.stdout.text and "runner-secret" not in result.stdout.text + result.stderr.text
    return _outcome("hidden-paths", ok, _brief(result))


def check_host_allowlist(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """The host is seen through an allow-list: `/` and `/etc` hold only allowed names, and the
    memtrial checkout (never named as hidden here) cannot be read unless it is part of the toolchain."""
    if (skip := _unenforceable(sandbox, "host-allowlist", "host-allowlist")) is not None:
        return skip
    workspace, _ = _layout(base)
    source = Path(__file__).resolve()
    result = _run(sandbox, workspace, f"ls -A /; echo ==etc; ls -A /etc; echo ==src; if cat {source} >/dev/null 2>&1; then echo READ; fi")
    top, _, rest = result.stdout.text.partition("==etc\n")
    etc, _, probe = rest.partition("==src\n")
    extra = sorted(set(top.split()) - ALLOWED_TOP)
    extra += sorted(f"/etc/{n}" for n in etc.split() if not any(fnmatch.fnmatch(n, p) for p in ALLOWED_ETC))
    in_toolchain = str(source).startswith(("/usr/", "/lib"))
    read = "READ" in probe and not in_toolchain
    ok = result.ok and "==src" in result.stdout.text and bool(top.split()) and not extra and not read
    return _outcome("host-allowlist", ok, f"not allowed: {extra} checkout readable: {read} {_brief(result)}")


def check_unprivileged(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """The command is not root on the host (uid mapped out of any user namespace) and holds no capability."""
    if (skip := _unenforceable(sandbox, "unprivileged", "unprivileged")) is not None:
        return skip
    workspace, _ = _layout(base)
    result = _run(sandbox, workspace, "id -u; cat /proc/self/uid_map; grep CapEff /proc/self/status")
    lines = result.stdout.text.split("\n")
    host_uid: int | None = None
    try:
        uid = int(lines[0])
        for inside, outside, count in (map(int, line.split()) for line in lines[1:] if len(line.split()) == 3):
            if inside <= uid < inside + count:
                host_uid = outside + uid - inside
        effective = int(next(line for line in lines if line.startswith("CapEff:")).split()[1], 16)
    except (ValueError, StopIteration):
        return _outcome("unprivileged", False, f"unreadable identity: {_brief(result)}")
    ok = result.ok and host_uid not in (None, 0) and effective == 0
    return _outcome("unprivileged", ok, f"host uid={host_uid} CapEff={effective:x} {_brief(result)}")


def check_write_confinement(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """A write next to the workspace or into the root filesystem does not reach the host."""
    if (skip := _unenforceable(sandbox, "write-confinement", "write-confinement")) is not None:
        return skip
    workspace, _ = _layout(base)
    name = f"escape-{secrets.token_hex(6)}"
    targets = [base / name, Path("/usr") / name]
    script = "; ".join(f"echo x > {t} 2>/dev/null" for t in targets) + "; echo probe-done"
    try:
        result = _run(sandbox, workspace, script)
        leaked = [str(t) for t in targets if t.exists()]
    finally:
        for target in targets:
            target.unlink(missing_ok=True)
    ok = result.ok and "probe-done" in result.stdout.text and not leaked
    return _outcome("write-confinement", ok, f"leaked={leaked} {_brief(result)}")


def check_network_none(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """With network none, a TCP listener the runner opened on 127.0.0.1 cannot be reached."""
    if (skip := _unenforceable(sandbox, "network-none", "network-none")) is not None:
        return skip
    workspace, _ = _layout(base)
    with loopback_listener() as (port, accepted):
        probe = (f"import socket\ns = socket.socket()\ns.settimeout(3)\n"
                 f"try:\n    s.connect(('127.0.0.1', {port})); s.sendall(b'inside'); print('CONNECTED')\n"
                 f"except OSError as e:\n    print('BLOCKED', type(e).__name__)\n")
        with socket.create_connection(("127.0.0.1", port), timeout=3) as control:  # the listener works
            control.sendall(b"control")
        result = sandbox.run(SandboxRequest(argv=("python3", "-c", probe), workspace=workspace, limits=FAST))
        time.sleep(0.2)
    ok = (result.ok and "BLOCKED" in result.stdout.text and "CONNECTED" not in result.stdout.text
          and b"control" in accepted and b"inside" not in accepted)
    return _outcome("network-none", ok, f"accepted={accepted} {_brief(result)}")


def check_timeout_kills_tree(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """On timeout every process of the command dies, including one that left the session (by PID)."""
    workspace, _ = _layout(base)
    marker = f"{300 + secrets.randbelow(99)}.{secrets.randbelow(10**6):06d}"
    script = f"setsid sleep {marker} & sleep {marker} & (sleep {marker} &) ; sleep {marker}"
    limits = FAST.model_copy(update={"timeout_seconds": 2.0})
    seen: dict[int, int] = {}
    done = threading.Event()
    box: list[SandboxResult] = []

    def run() -> None:
        try:
            box.append(_run(sandbox, workspace, script, limits=limits))
        finally:
            done.set()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    while not done.wait(0.05):
        seen.update(pids_matching(f"sleep {marker}"))
    thread.join()
    if not box:
        return _outcome("timeout-kills-tree", False, "the run raised instead of returning a result")
    result = box[0]
    time.sleep(0.3)
    alive = [pid for pid, start in seen.items() if is_running(pid, start)]
    alive += [pid for pid in pids_matching(f"sleep {marker}") if pid not in alive]
    ok = result.timed_out and result.killed and len(seen) >= 4 and not alive and result.wall_seconds < 2.0 + 10
    return _outcome("timeout-kills-tree", ok,
                    f"seen={sorted(seen)} alive={alive} wall={result.wall_seconds:.2f}s timed_out={result.timed_out}")


def check_memory_limit(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """A process allocating past the memory limit dies; one staying well below it survives."""
    if (skip := _unenforceable(sandbox, "memory-limit", "memory-limit")) is not None:
        return skip
    workspace, _ = _layout(base)
    limits = FAST.model_copy(update={"memory_mb": 256})
    alloc = "import sys\nb = bytearray(b'\\x01') * ({} << 20)\nprint('survived', len(b) >> 20)\n"
    below = sandbox.run(SandboxRequest(argv=("python3", "-c", alloc.format(32)), workspace=workspace, limits=limits))
    above = sandbox.run(SandboxRequest(argv=("python3", "-c", alloc.format(768)), workspace=workspace, limits=limits))
    ok = below.ok and "survived 32" in below.stdout.text and not above.ok and "survived" not in above.stdout.text
    return _outcome("memory-limit", ok, f"below: {_brief(below)} | above: {_brief(above)} reason={above.kill_reason}")


def check_output_bounded(sandbox: Sandbox, base: Path) -> ConformanceOutcome:
    """Output past the limit is counted and dropped; the command is not blocked by it."""
    workspace, _ = _layout(base)
    limits = FAST.model_copy(update={"max_output_bytes": 16 * 1024})
    script = "import sys\nsys.stdout.write('o' * (1 << 20)); sys.stderr.write('e' * (1 << 20))\n"
    result = sandbox.run(SandboxRequest(argv=("python3", "-c", script), workspace=workspace, limits=limits))
    ok = (result.ok and len(result.stdout.text.encode()) <= limits.max_output_bytes
          and len(result.stderr.text.encode()) <= limits.max_output_bytes
          and result.stdout.truncated and result.stderr.truncated
          and result.stdout.total_bytes == 1 << 20 and result.stderr.total_bytes == 1 << 20)
    return _outcome("output-bounded", ok,
                    f"kept={len(result.stdout.text)}/{len(result.stderr.text)} total={result.stdout.total_bytes}/"
                    f"{result.stderr.total_bytes} exit={result.exit_code}")


CHECKS: dict[str, Check] = {
    "workspace-writable": check_workspace_writable,
    "private-home-tmpdir": check_private_home_tmpdir,
    "private-tmp": check_private_tmp,
    "env-scrubbed": check_env_scrubbed,
    "hidden-paths": check_hidden_paths,
    "host-allowlist": check_host_allowlist,
    "write-confinement": check_write_confinement,
    "network-none": check_network_none,
    "timeout-kills-tree": check_timeout_kills_tree,
    "memory-limit": check_memory_limit,
    "output-bounded": check_output_bounded,
    "unprivileged": check_unprivileged,
}
"""Every check by name, in the order they run."""


def run_conformance(sandbox: Sandbox, base: Path) -> list[ConformanceOutcome]:
    """Run every check against `sandbox`, each in its own folder under `base`."""
    return [check(sandbox, base / name) for name, check in CHECKS.items()]
