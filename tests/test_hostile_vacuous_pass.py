"""Hostile class 2: vacuous passes from allowed paths. The check used to pass on the verifier's exit 0
alone, so code in an allowed path that exits 0 at import time, stale bytecode the agent planted, a
monkeypatched test framework or a post-turn test rewritten on disk all passed. Through the real
paired flow with a hostile `command` agent (unprivileged, in the real sandbox), each attempt must
fail with the post-turn harness's reason named in its record; and the corpus invariant refuses a
manifest whose allowed paths let the agent change the post-turn tests or their entry points."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from hostile_flow import run_hostile
from tasks_lib.contracts import RunRecord
from tasks_lib.corpus.post_turn import expected_cases, verdict
from tasks_lib.corpus.tasks import check_post_turn_owned, load_task

TASKS_ROOT = Path(__file__).resolve().parents[1] / "corpora" / "tasks"

HOSTILE = r'''
import os, py_compile, importlib.util
def prepend(path, code):
    with open(path) as f:
        body = f.read()
    with open(path, "w") as f:
        f.write(code + "\n" + body)
if os.path.isdir("logship"):  # exit 0 as soon as the tests import the package
    prepend("logship/__init__.py", "import os; os._exit(0)")
elif os.path.isdir("tabmill"):  # an unchecked-hash .pyc for tabmill/cli.py that exits 0 when imported
    with open("/tmp/evil.py", "w") as f:
        f.write("import os; os._exit(0)\n")
    tag = importlib.util.cache_from_source("tabmill/cli.py")
    py_compile.compile("/tmp/evil.py", cfile=tag, invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
elif os.path.isdir("stockroom"):  # every TestCase reports success without running
    prepend("stockroom/__init__.py", "import unittest\n"
            "def _run(self, result=None):\n"
            "    result.startTest(self); result.addSuccess(self); result.stopTest(self)\n"
            "unittest.TestCase.run = _run\n")
elif os.path.isdir("cronlite"):  # rewrite the post-turn test on disk into stubs that pass
    stub = "import unittest\nclass CompoundDurationTest(unittest.TestCase):\n    def test_parts_add_up(self):\n        pass\n"
    prepend("cronlite/__init__.py", "import os\n"
            f"open(os.path.join('tests', 'test_compound_durations.py'), 'w').write({stub!r})\n")
else:  # urlkit-slug-accents: a Node module that exits 0 when required
    prepend("src/index.js", "process.exit(0);")
'''
REASON_OF = {  # the stale .pyc is never read, so the untouched code fails the post-turn tests
    "logship-partial-exit": "post-turn tests not proven: post-turn case tests/test_partial_delivery.py::",
    "tabmill-delimiter": "post-turn tests not proven: post-turn case tests/test_delimiter.py::",  # judged apart: the visible suite passes
    # judged apart: the patch lands in the jail's unittest, never in the judge's
    "stockroom-adjust-event": "post-turn tests not proven: post-turn case tests/test_adjustments.py::",
    # judged apart: the rewrite lands in the jail's workspace, never on the judge's pinned copy
    "cronlite-compound-duration": "post-turn tests not proven: post-turn case tests/test_compound_durations.py::",
    # judged apart: the jail's Node shim exits with the module, so every case of the judge's errs
    "urlkit-slug-accents": "post-turn tests not proven: post-turn case tests/test_slug_folding.py::",
}


@pytest.fixture(scope="module")
def hostile_records(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> list[RunRecord]:
    tmp_path = tmp_path_factory.mktemp("vacuous-pass")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return run_hostile(tmp_path, monkeypatch, HOSTILE, sorted(REASON_OF), conditions=["off"])


@pytest.mark.parametrize("task_id", sorted(REASON_OF), ids=[
    "cronlite-post-turn-test-rewritten-on-disk", "logship-exit-0-at-import", "stockroom-test-framework-monkeypatched",
    "tabmill-unchecked-hash-pyc", "urlkit-node-module-exits-0"])
def test_an_attack_from_an_allowed_path_cannot_pass_the_check(hostile_records: list[RunRecord], task_id: str) -> None:
    """Regression: each of these attacks used to pass, since only the verifier's exit status counted."""
    (record,) = [r for r in hostile_records if r.task_id == task_id]
    assert record.audit_passed, record.failure_reason
    assert record.outcome == "fail", record
    assert record.failure_reason and record.failure_reason.startswith(REASON_OF[task_id])


def test_a_result_without_this_attempts_nonce_or_a_case_does_not_prove_a_pass() -> None:
    """Regression: a result printed by code under test (a stale nonce, a case left out) must not count."""
    hidden = TASKS_ROOT / "logship-partial-exit" / "hidden"
    expected = expected_cases(hidden)
    assert len(expected) == 3 and expected[0].startswith("tests/test_partial_delivery.py::PartialDeliveryTest.")
    passing = {"nonce": "n1", "cases": [{"case": c, "outcome": "pass"} for c in expected], "files": [], "flags": []}
    assert verdict(json.dumps(passing), "n1", expected).passed
    assert "nonce" in (verdict(json.dumps(passing), "n2", expected).problem or "")
    short = {**passing, "cases": passing["cases"][:2]}
    assert "did not run" in (verdict(json.dumps(short), "n1", expected).problem or "")
    assert "no result" in (verdict("", "n1", expected).problem or "")


@pytest.mark.parametrize(("task_id", "allowed"), [
    ("cronlite-compound-duration", "tests"),
    ("logship-partial-exit", "tests/__init__.py"),
    ("logship-partial-exit", "tests/test_partial_delivery.py"),
    ("urlkit-slug-accents", "tests"),
    ("urlkit-slug-accents", "package.json"),
    ("rotlog-keep-count", "tests/basic.sh"),
])
def test_a_manifest_letting_the_agent_change_the_post_turn_tests_is_refused(tmp_path: Path, task_id: str, allowed: str) -> None:
    """Regression: allowed paths covered the post-turn test folder, so the agent could plant a runner there."""
    folder = tmp_path / task_id
    shutil.copytree(TASKS_ROOT / task_id, folder)
    manifest = json.loads((folder / "task.json").read_text())
    manifest["allowed_output_paths"].append(allowed)
    (folder / "task.json").write_text(json.dumps(manifest))
    failures = check_post_turn_owned(load_task(folder))
    assert failures and all(f.invariant == "post-turn-owned" for f in failures)
    assert any(repr(allowed) in f.message for f in failures)


def test_the_bundled_manifests_keep_the_post_turn_tests_runner_owned() -> None:
    """Regression: seven bundled tasks let the agent write into the post-turn test folders."""
    for folder in sorted(p for p in TASKS_ROOT.iterdir() if (p / "task.json").is_file()):
        assert check_post_turn_owned(load_task(folder)) == [], folder.name


def test_hidden_without_a_test_case_is_refused(tmp_path: Path) -> None:
    """Regression: an empty set of expected cases would make the proof vacuous."""
    folder = tmp_path / "logship-partial-exit"
    shutil.copytree(TASKS_ROOT / "logship-partial-exit", folder)
    (folder / "hidden" / "tests" / "test_partial_delivery.py").write_text("import unittest\n")
    (failure,) = check_post_turn_owned(load_task(folder))
    assert failure.invariant == "post-turn-owned" and "no post-turn test case" in failure.message
