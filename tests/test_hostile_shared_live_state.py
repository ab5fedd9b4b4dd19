"""Hostile class 12: a provisioner that keys live state on fixture and arm and ignores the run identity,
so two trials of one task share (and accumulate) one memory. Its project names differ per run
identity, so nothing but a check that restores the same fixture and arm twice can see it; the
provisioner check must fail it (it passed 9/9 before `restore-isolates-trials`)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tasks_lib.memory.provisioner.check import check_provisioner, format_results

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "minimal_provisioner.py"

SHARING = '''
import hashlib, json, shutil, sys
sys.path.insert(0, {example_dir!r})
import minimal_provisioner as m

ACCUMULATE = {accumulate!r}
own_dir = m.project_dir

def live_dir(project):
    """Every run identity of one fixture and arm lands in one folder (recorded per project name)."""
    names = m.state_root() / "names"
    key = (names / project).read_text() if (names / project).is_file() else project
    return own_dir(key)

def restore():
    request = m.read_request({{"fixture", "graph_arm", "run_identity", "artifacts"}})
    shared = "s-" + hashlib.sha256((request["fixture"] + "\\0" + request["graph_arm"]).encode()).hexdigest()[:16]
    project = "p-" + hashlib.sha256((shared + request["run_identity"]).encode()).hexdigest()[:16]
    (m.state_root() / "names").mkdir(parents=True, exist_ok=True)
    (m.state_root() / "names" / project).write_text(shared)
    folder = own_dir(shared)
    evidence = m.load_evidence(request["artifacts"]["evidence_corpus"])
    if folder.exists() and ACCUMULATE:
        evidence = json.loads((folder / "evidence.json").read_text()) + evidence
    elif folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True, exist_ok=True)
    m.write_json(folder / "evidence.json", evidence)
    m.write_json(folder / "graph.json", m.load_graph(request["artifacts"]["graph"]))
    return {{"project": project, "queue_before_count": 0, "restore_seconds": 0.0}}

m.project_dir = live_dir
m.VERBS["restore"] = restore
sys.exit(m.main(sys.argv[1:]))
'''


@pytest.mark.parametrize("accumulate", [True, False], ids=["accumulating", "replacing"])
def test_trials_sharing_one_live_state_fail_the_provisioner_check(tmp_path: Path, accumulate: bool) -> None:
    """Regression: the isolation check restored two different fixtures, so state keyed on fixture and
    arm (two trials of one task sharing one memory) passed every check."""
    script = tmp_path / "sharing_provisioner.py"
    script.write_text(SHARING.format(example_dir=str(EXAMPLE.parent), accumulate=accumulate), encoding="utf-8")
    results = check_provisioner([sys.executable, str(script)], tmp_path / "fixture", timeout_seconds=10,
                                env={"MINIMAL_PROVISIONER_STATE": str(tmp_path / "state")})
    failed = {r.name for r in results if not r.passed}
    assert "restore-isolates-trials" in failed, format_results(results)
    why = next(r.why for r in results if r.name == "restore-isolates-trials")
    assert ("accumulated" in why) if accumulate else ("destroying" in why), why


def test_the_honest_minimal_provisioner_keeps_trials_apart(tmp_path: Path) -> None:
    """The same check passes a provisioner that keys live state on the run identity too."""
    results = check_provisioner([sys.executable, str(EXAMPLE)], tmp_path / "fixture", timeout_seconds=10,
                                env={"MINIMAL_PROVISIONER_STATE": str(tmp_path / "state")})
    trials = next(r for r in results if r.name == "restore-isolates-trials")
    assert trials.passed, format_results(results)
