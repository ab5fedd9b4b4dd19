"""The jail's Node shim (`harness/shim.cjs`) over a real socketpair and a real node: the protocol the
judge's Python tests of a Node task rely on (`harness/jail.py`), with no test framework in the jail."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tasks_lib.corpus.post_turn import HARNESS_DIR, jail_argv

pytestmark = pytest.mark.skipif(shutil.which("node") is None, reason="the Node jail needs node on PATH")

MODULE = """'use strict';
console.log('loading');
class Meter {
  constructor(start) { this.total = start; }
  add(n) { console.log('adding', n); this.total += n; return this.total; }
}
async function later(value) { await new Promise((resolve) => setTimeout(resolve, 5)); return { value }; }
function limits() { return new Map([['alice', 300]]); }
function boom() { throw new RangeError('no such size'); }
module.exports = { Meter, later, limits, boom };
"""


class Shim:
    """A Node shim process over `workspace`, asked one JSON line at a time."""

    def __init__(self, workspace: Path) -> None:
        ours, theirs = socket.socketpair()
        argv = list(jail_argv("node", str(HARNESS_DIR)))
        self.proc = subprocess.Popen(argv, cwd=workspace, stdin=theirs, stdout=theirs, stderr=subprocess.PIPE)
        theirs.close()
        self.sock = ours
        self.answers = ours.makefile("rb")

    def ask(self, **request: object) -> dict[str, object]:
        self.sock.sendall(json.dumps(request).encode() + b"\n")
        return json.loads(self.answers.readline())

    def close(self) -> tuple[int, str]:
        self.answers.close()
        self.sock.close()
        _, err = self.proc.communicate(timeout=10)
        return self.proc.returncode, err.decode()


@pytest.fixture
def shim(tmp_path: Path) -> Iterator[Shim]:
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "meter.js").write_text(MODULE)
    jail = Shim(tmp_path)
    yield jail
    jail.close()


def test_the_node_jail_answers_values_awaits_promises_and_keeps_objects_as_handles(shim: Shim) -> None:
    """Regression: a Node task's post-turn tests could only run in process (no Node shim), beside the
    code they judge; the judge's Python tests need values, awaited promises, `new` and bound methods."""
    assert shim.ask(op="call", target="lib/meter.js:later", args=[7]) == {"value": {"value": 7}}
    meter = shim.ask(op="call", target="lib/meter.js:Meter", args=[10], new=True, keep=True)
    assert meter == {"handle": 1, "type": "Meter"}
    add = shim.ask(op="get", target={"$handle": 1}, attr="add")
    assert shim.ask(op="call", target={"$handle": add["handle"]}, args=[5]) == {"value": 15}
    limits = shim.ask(op="call", target="lib/meter.js:limits")
    get = shim.ask(op="get", target={"$handle": limits["handle"]}, attr="get")
    assert shim.ask(op="call", target={"$handle": get["handle"]}, args=["alice"]) == {"value": 300}
    assert shim.ask(op="call", target="lib/meter.js:boom") == {"error": "RangeError", "message": "no such size"}
    assert shim.ask(op="call", target="lib/meter.js:missing")["error"] == "TypeError"


def test_what_the_code_under_test_prints_never_reaches_the_judges_channel(shim: Shim) -> None:
    """Regression: a console.log of the code under test on the answers' stream would break a line."""
    assert shim.ask(op="call", target="lib/meter.js:Meter", args=[1], new=True)["handle"] == 1
    add = shim.ask(op="get", target={"$handle": 1}, attr="add")
    assert shim.ask(op="call", target={"$handle": add["handle"]}, args=[2], stdout=True) == {"value": 3, "stdout": "adding 2\n"}
    assert shim.ask(op="call", target={"$handle": add["handle"]}, args=[3]) == {"value": 6}
    status, err = shim.close()
    assert status == 0
    assert "loading" in err and "adding 3" in err


def test_a_recorder_on_a_virtual_clock_stands_in_for_an_async_transport(shim: Shim) -> None:
    """Regression: a Node test's `async (request) => { calls.push(t); ... }` transport had no form the judge could send."""
    clock = shim.ask(op="clock", start=0)["handle"]
    calls = shim.ask(op="recorder", returns={"status": 200}, clock={"$handle": clock})["handle"]
    send = shim.ask(op="get", target={"$handle": calls}, attr="send")["handle"]
    sleep = shim.ask(op="get", target={"$handle": clock}, attr="sleep")["handle"]
    assert shim.ask(op="call", target={"$handle": send}, args=[{"q": "a"}]) == {"value": {"status": 200}}
    assert shim.ask(op="call", target={"$handle": sleep}, args=[1500]) == {"value": None}
    date = shim.ask(op="call", target="globalThis:Date", args=["2024-05-01T08:00:00Z"], new=True)["handle"]
    shim.ask(op="call", target={"$handle": send}, args=[{"at": {"$handle": date}}])
    assert shim.ask(op="value", target={"$handle": calls}) == {"value": [
        {"name": "send", "args": [{"q": "a"}], "at": 0},
        {"name": "send", "args": [{"at": "2024-05-01T08:00:00.000Z"}], "at": 1500}]}
