"""Hostile class: an agent that floods the runner's delivery witness.

The witness runs inside the runner (a thread per connection) and noted every refused request as a
line of its receipt, so 1,000 held connections and 100,000 refused requests raised the runner to
1,013 threads and wrote a 204 MB `delivery.json`. Now it serves at most a few connections at once
(the rest are closed and counted), answers a bounded request rate, counts refusals instead of
storing them, and says `flooded` in the receipt, the record and the report's delivery table. One
real paired matrix (`hostile_matrix`) with a flooding `command` agent (unprivileged, in the real
sandbox); the runner's threads are sampled while it runs.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from hostile_matrix import run_command_matrix
from tasks_lib.agents.base import Transcript
from tasks_lib.analysis.grading import delivery_rates
from tasks_lib.memory import env as memory_env_names
from tasks_lib.memory.delivery.witness import MAX_CONNECTIONS, DeliveryReceipt
from tasks_lib.sandbox.local import LocalSandbox

TASK = "logship-partial-exit"
HELD = 1_000
REQUESTS = 100_000
MAX_EXTRA_THREADS = 40
"""Threads the runner may gain while the hostile arm runs (its own steps, the witness's few connections)."""
MAX_RECEIPT_BYTES = 64 * 1024
FLOOD = f"""
import json, os, resource, socket, time
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
path = os.environ[{memory_env_names.SOCKET_ENV!r}]
line = (json.dumps({{"op": "recall", "realm": "project:0000000000000000", "query": "x" * 64, "k": 5}}) + "\\n").encode()
sent = 0
while sent < {REQUESTS}:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        try:
            conn.connect(path)
            conn.sendall(line * 500)
        except OSError:
            pass
    sent += 500
held = []
for _ in range({HELD}):
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(path)
        conn.send(b'{{"op": "pi')
        held.append(conn)
    except OSError:
        conn.close()
time.sleep(3)
print(json.dumps({{"kind": "message", "text": json.dumps({{"sent": sent, "held": len(held)}})}}))
"""
"""The flooding agent: 100,000 recall requests for a realm that is not its own, in pipelined batches of
500 per connection (their answers fit the socket buffer unread), then 1,000 connections each holding
half a request for three seconds."""


def test_a_flooding_agent_cannot_raise_the_runners_threads_or_the_receipts_size(
        tmp_path: Path) -> None:
    """Regression: 1,000 held connections and 100,000 refused requests raised the runner to 1,013
    threads and wrote a 204 MB delivery.json. The runner's thread count and the receipt's size must stay
    bounded, the flood be counted and named (receipt, record, report), and the attempt stay gradable."""
    if LocalSandbox().capabilities().isolation != "namespace":
        pytest.skip("bubblewrap is not usable here; the agent's view would not be the sandbox's")
    peak = [threading.active_count()]
    baseline = peak[0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], threading.active_count())
            time.sleep(0.01)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        records, store = run_command_matrix(tmp_path / "artifacts", FLOOD, [TASK], ("on",), "flood")
    finally:
        done.set()
        sampler.join()
    (on,) = [r for r in records if r.condition == "on"]
    transcript = store.get_json(on.transcript or "", Transcript)
    (message,) = [s.text for s in transcript.steps if s.source == "agent" and s.kind == "message"]
    flood = json.loads(message)
    assert flood["sent"] >= REQUESTS and flood["held"] >= MAX_CONNECTIONS, f"the flood did not happen: {flood}"
    assert peak[0] - baseline <= MAX_EXTRA_THREADS, f"the runner went from {baseline} to {peak[0]} threads under the flood"
    receipt_path = tmp_path / "artifacts" / (on.delivery_receipt or "")
    assert receipt_path.stat().st_size <= MAX_RECEIPT_BYTES, f"delivery.json is {receipt_path.stat().st_size} bytes"
    receipt = store.get_json(on.delivery_receipt or "", DeliveryReceipt)
    assert receipt.flooded and receipt.refused_count + receipt.connections_refused > 1_000, receipt.model_dump(exclude={"recalls"})
    assert on.witness_flooded and on.outcome in ("pass", "fail"), (on.witness_flooded, on.outcome)
    (rate,) = [d for d in delivery_rates(records) if d.condition == "on"]
    assert rate.warning and "flooded" in rate.warning, rate
