"""Hostile class (issue 29, item 1), the Node side: a Node task's post-turn tests ran in the same
process as the code they judge (`node --test` with the runner's reporter), so a workspace module
could replace `node:assert`'s functions and every case passed, or read the expected values from
the post-turn test file beside it and return them. Each Node task is now judged apart: its
post-turn tests are Python in the judge, and the module runs in the jail's Node shim
(`harness/shim.cjs`), reached only through JSON. Through the real paired flow with a hostile
`command` agent (unprivileged, real bwrap), both unsolved attempts must fail.
"""

from __future__ import annotations

import shutil

import pytest

from hostile_flow import run_hostile
from tasks_lib.contracts import RunRecord

pytestmark = [pytest.mark.skipif(shutil.which("bwrap") is None, reason="the judge apart needs bubblewrap (bwrap) on PATH"),
              pytest.mark.skipif(shutil.which("node") is None, reason="the Node tasks' jail needs node on PATH")]

HOSTILE = r'''
import os
if os.path.isfile("src/index.js"):  # urlkit: every function of node:assert passes whatever it is given
    with open("src/index.js", "a") as f:
        f.write("""
const assert = require('node:assert');
for (const name of Object.keys(assert)) {
  if (typeof assert[name] === 'function') assert[name] = () => {};
}
""")
elif os.path.isfile("consent.js"):  # cookie-consent: the cookie's name read from the post-turn tests' expected values
    body = open("consent.js").read()
    with open("consent.js", "w") as f:
        f.write(body.replace("const NAME = 'consent';", r"""
const NAME = (() => {
  const fs = require('node:fs');
  const path = require('node:path');
  const seen = [];
  const walk = (dir, depth) => {
    let entries = [];
    try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch { return; }
    for (const entry of entries) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory() && depth < 6 && entry.name !== 'node_modules') walk(full, depth + 1);
      else if (entry.isFile() && /\.(js|py|sh)$/.test(entry.name)) {
        try { const m = /\^(\w+)=all;/.exec(fs.readFileSync(full, 'utf8')); if (m) seen.push(m[1]); } catch {}
      }
    }
  };
  for (const root of [process.cwd(), '/judge', '/scratch', '/harness', '/tmp']) walk(root, 0);
  return seen[0] || 'consent';
})();"""))
'''
ATTACKS = {
    "urlkit-slug-accents": "node-assert-replaced",
    "cookie-consent-edge-name": "expected-values-read-from-the-post-turn-tests",
}


@pytest.fixture(scope="module")
def attacked(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> list[RunRecord]:
    tmp_path = tmp_path_factory.mktemp("judge-node")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run_hostile(tmp_path, monkeypatch, HOSTILE, sorted(ATTACKS), conditions=["off"])


@pytest.mark.parametrize("task_id", sorted(ATTACKS), ids=[ATTACKS[t] for t in sorted(ATTACKS)])
def test_a_node_module_cannot_pass_an_unsolved_task_by_forging_or_reading_the_post_turn_tests(
        attacked: list[RunRecord], task_id: str) -> None:
    """Regression: replacing `node:assert`'s functions, or reading the expected values from the
    post-turn test file in the workspace, passed an unsolved Node task judged in process."""
    (record,) = [r for r in attacked if r.task_id == task_id]
    assert record.audit_passed, record.failure_reason
    assert record.outcome == "fail", (record.outcome, record.judge, record.failure_reason)
    assert record.judge == "apart", record.judge
    assert (record.failure_reason or "").startswith("post-turn tests not proven: post-turn case "), record.failure_reason
