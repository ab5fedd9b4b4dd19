"""Confined parties (`LocalSandbox.start`, `tasks_lib.sandbox.party`): the judged check's jail, judge
and verifier are started through this public API, with the same command line as `LocalSandbox.run`.

The judged check used to rebuild that command line from the provider's private helpers, and a
merge that changed one of them broke every judged attempt. These tests hold the two paths to one
view, one identity rule and one set of limits, and hold what only parties have (a channel, a shared
folder, nothing else inherited, each in its own PID namespace) to what the judged check relies on.
"""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest

from tasks_lib.sandbox.base import SandboxLimits, SandboxRequest
from tasks_lib.sandbox.capture import BoundedSink, drain_file
from tasks_lib.sandbox.cgroups import make_run_cgroup
from tasks_lib.sandbox.errors import SandboxUnavailable
from tasks_lib.sandbox.identity import lent_workspace, reap_uids, run_identity
from tasks_lib.sandbox.local import LocalSandbox
from tasks_lib.sandbox.party import Party

needs_bwrap = pytest.mark.skipif(LocalSandbox().capabilities().isolation != "namespace",
                                 reason="a confined party needs a working bwrap (install bubblewrap)")

PROBE = """
import json, os, resource
status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line)
print(json.dumps({
    "root": sorted(os.listdir("/")),
    "cwd": os.getcwd(),
    "no_new_privs": status["NoNewPrivs"].strip(),
    "cap_eff": status["CapEff"].strip(),
    "uid": os.getuid(),
    "address_space": resource.getrlimit(resource.RLIMIT_AS)[0],
    "hidden_visible": os.path.exists("/workspace/secret/answer.txt"),
    "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit()),
    "fds": sorted(int(fd) for fd in os.listdir("/proc/self/fd")),
    "home": os.environ["HOME"],
}))
"""


ASK = """
import json, os, socket
channel = socket.socket(fileno=int(os.environ["CHANNEL"]))
links = {fd: os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}
channel.sendall(b"ping\\n")
print(json.dumps({"answer": channel.makefile().readline(), "links": links, "cwd": os.getcwd(),
                  "pids": sorted(int(p) for p in os.listdir("/proc") if p.isdigit())}))
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    folder = tmp_path / "ws"
    (folder / "secret").mkdir(parents=True)
    (folder / "secret" / "answer.txt").write_text("42\n")
    folder.chmod(0o755)
    return folder


def _request(workspace: Path, argv: tuple[str, ...] = ("python3", "-c", PROBE), env: dict[str, str] | None = None) -> SandboxRequest:
    return SandboxRequest(argv=argv, workspace=workspace, env=env or {}, hidden_paths=(workspace / "secret",),
                          limits=SandboxLimits(memory_mb=512, timeout_seconds=30, max_processes=64))


def _start_and_read(sandbox: LocalSandbox, party: Party) -> tuple[dict[str, object], int | None]:
    """Start `party` alone in a cgroup of its limits; (its probe's JSON, its exit status)."""
    limits = party.request.limits
    cgroup = make_run_cgroup(limits.memory_mb << 20, limits.max_processes, limits.cpus)
    out, err = BoundedSink(1 << 20), BoundedSink(1 << 20)
    try:
        with lent_workspace(party.request.workspace, party.identity):
            proc = sandbox.start(party, cgroup)
            readers = [drain_file(proc.stdout, out), drain_file(proc.stderr, err)]  # type: ignore[arg-type]
            finished = proc.wait(time.monotonic() + 30)
            proc.kill()
            if party.identity is not None:
                reap_uids({party.identity.uid})
        for reader in readers:
            reader.join(5)
    finally:
        cgroup.remove()
    assert finished, err.result().text
    return json.loads(out.result().text or "{}"), proc.returncode


@needs_bwrap
def test_a_party_and_a_run_of_one_request_get_the_same_view_uid_and_limits(workspace: Path) -> None:
    """Regression: the judged check built its parties' command lines from LocalSandbox's private helpers,
    and a merge that changed one broke every judged attempt; a party must be confined exactly as `run`
    confines the same request (view, hidden paths, no new privileges, no capabilities, never root, limits)."""
    sandbox = LocalSandbox()
    ran = sandbox.run(_request(workspace))
    assert ran.ok, ran.stderr.text
    by_run = json.loads(ran.stdout.text)
    by_party, code = _start_and_read(sandbox, Party(_request(workspace), run_identity()))
    assert code == 0
    for key in ("root", "cwd", "no_new_privs", "cap_eff", "address_space", "hidden_visible", "home"):
        assert by_party[key] == by_run[key], (key, by_party[key], by_run[key])
    assert by_party["hidden_visible"] is False and by_party["no_new_privs"] == "1" and by_party["cap_eff"] == "0000000000000000"
    assert by_party["uid"] != 0 and by_run["uid"] != 0
    assert by_party["address_space"] == 512 << 20


@needs_bwrap
def test_a_party_inherits_only_its_channel_sees_only_its_own_processes_and_shares_only_the_named_folder(
        workspace: Path, tmp_path: Path) -> None:
    """A party must hold no descriptor of the runner but the ones it is given (an inheritable one the
    runner has open stays out), see no process but its own (its PID namespace), and see the shared
    folder read-write at the path named; the two ends of a socketpair reach each other."""
    sandbox = LocalSandbox()
    leak = os.open(tmp_path, os.O_RDONLY)
    os.set_inheritable(leak, True)
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    jail_end, judge_end = socket.socketpair()
    judge_fd = judge_end.fileno()
    echo = ("python3", "-c", "import sys; line = sys.stdin.readline(); open('/scratch/seen', 'w').write(line); "
                             "sys.stdout.write(line.upper()); sys.stdout.flush()")
    ask = ("python3", "-c", ASK)
    identity = run_identity()
    cgroup = make_run_cgroup(512 << 20, 64, 1.0)
    out, err, jail_err = BoundedSink(1 << 20), BoundedSink(1 << 20), BoundedSink(1 << 20)
    try:
        with lent_workspace(workspace, identity):
            jail = sandbox.start(Party(_request(workspace, echo), identity, shared=((shared, "/scratch"),),
                                       stdin=jail_end.fileno(), stdout=jail_end.fileno()), cgroup)
            judge = sandbox.start(Party(_request(workspace, ask, env={"CHANNEL": str(judge_end.fileno())}), identity,
                                        chdir="/tmp", pass_fds=(judge_end.fileno(),)), cgroup)
            jail_end.close()
            judge_end.close()
            readers = [drain_file(judge.stdout, out), drain_file(judge.stderr, err), drain_file(jail.stderr, jail_err)]  # type: ignore[arg-type]
            finished = judge.wait(time.monotonic() + 30) and jail.wait(time.monotonic() + 30)
            for proc in (jail, judge):
                proc.kill()
            if identity is not None:
                reap_uids({identity.uid})
        for reader in readers:
            reader.join(5)
    finally:
        os.close(leak)
        jail_end.close()
        judge_end.close()
        cgroup.remove()
    assert finished, (err.result().text, jail_err.result().text)
    seen = json.loads(out.result().text)
    assert seen["answer"] == "PING\n", (seen, err.result().text, jail_err.result().text)
    assert (shared / "seen").read_text() == "ping\n"
    assert seen["cwd"] == "/tmp"
    assert sorted(map(int, seen["links"])) == [0, 1, 2, judge_fd], seen["links"]  # the runner's open folder is not among them
    assert seen["links"][str(judge_fd)].startswith("socket:"), seen["links"]
    assert len(seen["pids"]) <= 3, seen["pids"]  # its own PID namespace: bwrap's init and python


def test_a_party_without_bwrap_is_refused_not_run_unconfined(workspace: Path) -> None:
    """A party is always namespaced: a provider without bwrap refuses to start one, naming why."""
    sandbox = LocalSandbox(bwrap=False)
    cgroup = make_run_cgroup(64 << 20, 16, 1.0)
    try:
        with pytest.raises(SandboxUnavailable, match="a confined party needs bwrap: disabled by the caller"):
            sandbox.start(Party(_request(workspace, ("true",))), cgroup)
    finally:
        cgroup.remove()
