"""`memtrial task new|check|try`: the authoring workflow on real git repositories in tmp_path.

A scaffold must fail the corpus check, naming every unfinished part, until it is written; the
check and the try run from a snapshot of the working tree without moving HEAD, the branch or the
index; bad input is one line and leaves nothing behind.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from flows.cli.main import main
from gitrepo import git
from tasks_lib.contracts import TaskManifest, load_document
from tasks_lib.corpus.authoring import TASK_KINDS, TOOLCHAINS, scaffold_task, snapshot_commit
from tasks_lib.corpus.tasks import SCAFFOLD_TODO, TaskCorpusError, check_corpus

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "corpora" / "tasks"
PROBE = "diskwatch-critical-default"


def corpus_repo(tmp_path: Path, *task_ids: str) -> Path:
    """A git repository whose corpora/tasks holds copies of `task_ids` and their key-lane entries, committed."""
    repo = tmp_path / "repo"
    tasks = repo / "corpora" / "tasks"
    tasks.mkdir(parents=True)
    declared = json.loads((TASKS / "key_lanes.json").read_text())
    declared["tasks"] = {t: declared["tasks"][t] for t in task_ids}
    (tasks / "key_lanes.json").write_text(json.dumps(declared))
    for task_id in task_ids:
        shutil.copytree(TASKS / task_id, tasks / task_id, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "corpus")
    return tasks


def repo_state(repo: Path) -> tuple[str, str, str]:
    return git(repo, "rev-parse", "HEAD"), git(repo, "symbolic-ref", "HEAD"), git(repo, "status", "--porcelain")


@pytest.mark.parametrize("kind", TASK_KINDS)
@pytest.mark.parametrize("toolchain", TOOLCHAINS)
def test_every_scaffold_is_a_valid_manifest_that_the_check_refuses_as_unfinished(tmp_path: Path, kind: str, toolchain: str) -> None:
    """A scaffold must never pass (or be checked as if sound): every TODO is a named layout failure."""
    tasks = corpus_repo(tmp_path)
    scaffold_task(tasks, "new-task", kind, toolchain)
    manifest = load_document(tasks / "new-task" / "task.json", TaskManifest)
    assert manifest.kind == kind and manifest.task_id == "new-task"
    git(tasks.parents[1], "add", "-A")
    git(tasks.parents[1], "commit", "-q", "-m", "scaffold")
    report = check_corpus(tasks, tasks.parents[1], only=["new-task"])
    assert not report.ok
    assert {f.invariant for f in report.failures} == {"layout"}
    paths = {f.path.split(":")[0] for f in report.failures}
    assert {"task.json", "verifier.sh"} & paths == {"task.json"}, "the verifier is complete and pinned; the manifest is not"
    assert any(p.startswith("fixture/") for p in paths) and any(p.startswith("hidden/") for p in paths) and any(p.startswith("solution/") for p in paths)
    assert all("unfinished scaffold" in f.message and SCAFFOLD_TODO in f.message for f in report.failures)


def test_task_new_then_check_names_each_todo_without_a_commit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = corpus_repo(tmp_path, PROBE)
    before = repo_state(tasks.parents[1])
    assert main(["task", "new", "fresh-task", "--kind", "convention", "--toolchain", "python", "--tasks-root", str(tasks)]) == 0
    assert "wrote task.json" in capsys.readouterr().out.replace("fresh-task/", "")
    assert main(["task", "check", "fresh-task", "--tasks-root", str(tasks), "--json"]) == 1
    result = json.loads(capsys.readouterr().out)
    assert not result["ok"] and result["failures"]
    assert {f["invariant"] for f in result["failures"]} == {"layout"}
    assert any(f["path"].startswith("fixture/app/__init__.py:") for f in result["failures"])
    head, branch, _ = repo_state(tasks.parents[1])
    assert (head, branch) == before[:2], "the snapshot must not move HEAD or the branch"
    assert git(tasks.parents[1], "diff", "--cached", "--name-only") == "", "the snapshot must not stage anything"


def test_task_check_checks_the_uncommitted_working_tree(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An edit not yet committed is what `task check` checks; `--revision HEAD` checks the commit."""
    tasks = corpus_repo(tmp_path, PROBE)
    assert main(["task", "check", PROBE, "--tasks-root", str(tasks)]) == 0
    text = capsys.readouterr().out
    assert "passes-with-solution" in text and "ok: 0 failures" in text
    script = tasks / PROBE / "fixture" / "diskwatch.sh"
    script.write_text(script.read_text().replace("warn=80\n", "warn=80\n# storage wants the critical level at 92\n"))
    assert main(["task", "check", PROBE, "--tasks-root", str(tasks), "--json"]) == 1
    assert {f["invariant"] for f in json.loads(capsys.readouterr().out)["failures"]} == {"no-answer-leak"}
    assert main(["task", "check", PROBE, "--tasks-root", str(tasks), "--revision", "HEAD"]) == 0
    capsys.readouterr()
    assert git(tasks.parents[1], "status", "--porcelain").strip().endswith("diskwatch.sh")


def test_task_check_times_every_invariant(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    tasks = corpus_repo(tmp_path, PROBE)
    assert main(["task", "check", PROBE, "--tasks-root", str(tasks), "--json"]) == 0
    checks = {row["check"]: row for row in json.loads(capsys.readouterr().out)["checks"]}
    assert all(checks[name]["result"] == "ok" and checks[name]["seconds"] != "-" for name in ("fails-on-fixture", "passes-with-solution", "key-lanes"))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["task", "new", "Bad_Id", "--kind", "tare"], "task id 'Bad_Id'"),
        (["task", "new", "good-id", "--kind", "telepathy"], "--kind 'telepathy' is not a task kind"),
        (["task", "new", "good-id", "--kind", "tare", "--toolchain", "cobol"], "--toolchain 'cobol'"),
        (["task", "new", PROBE, "--kind", "tare"], "already exists"),
        (["task", "check", "no-such-task"], "no task folder 'no-such-task'"),
        (["task", "try", "no-such-task"], "no-such-task"),
        (["task", "check", PROBE, "--revision", "no-such-rev"], "revision 'no-such-rev' does not resolve to a commit; check the id"),
    ],
    ids=["bad-id", "unknown-kind", "unknown-toolchain", "existing-folder", "check-unknown-task", "try-unknown-task",
         "check-unknown-revision"],
)
def test_bad_authoring_input_is_one_line_and_leaves_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str) -> None:
    tasks = corpus_repo(tmp_path, PROBE)
    before = sorted(p.relative_to(tasks).as_posix() for p in tasks.rglob("*"))
    code = main([*args, "--tasks-root", str(tasks)])
    captured = capsys.readouterr()
    assert code in (1, 2)
    assert message in captured.err + captured.out
    assert "Traceback" not in captured.err
    assert sorted(p.relative_to(tasks).as_posix() for p in tasks.rglob("*")) == before


def test_task_try_runs_the_calibration_pair_and_matches_the_prediction(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A convention task: off fails, on passes because the graph lane delivers the key memory."""
    tasks = corpus_repo(tmp_path, PROBE)
    assert main(["task", "try", PROBE, "--tasks-root", str(tasks), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    rows = {row["condition"]: row for row in result["conditions"]}
    assert (rows["off"]["outcome"], rows["on"]["outcome"]) == ("fail", "pass")
    assert rows["on"]["key memory predicted"] == "yes" and rows["off"]["memories delivered"] == "0/0"


def test_task_try_says_when_the_memory_never_reaches_the_agent(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An author whose key memory shares nothing with the prompt sees the pair not flip, predicted as such."""
    tasks = corpus_repo(tmp_path, "logship-partial-exit")
    manifest_path = tasks / "logship-partial-exit" / "task.json"
    data = json.loads(manifest_path.read_text())
    data["memories"] = [{"text": "Quarterly offsite venues are booked by facilities in January.", "lane": "keyword", "kind": "convention"}]
    for state in ("placebo_memories", "harm"):  # the optional cells built from the original memories
        data.pop(state, None)
    manifest_path.write_text(json.dumps(data, indent=2))
    assert main(["task", "try", "logship-partial-exit", "--tasks-root", str(tasks), "--json"]) == 0
    rows = {row["condition"]: row for row in json.loads(capsys.readouterr().out)["conditions"]}
    assert (rows["off"]["outcome"], rows["on"]["outcome"]) == ("fail", "fail")
    assert rows["on"]["key memory predicted"] == "no"


def test_a_snapshot_of_no_paths_is_refused_not_the_whole_tree(tmp_path: Path) -> None:
    """`git add -A` with no pathspec would take every untracked file of the checkout into the snapshot."""
    tasks = corpus_repo(tmp_path, PROBE)
    with pytest.raises(TaskCorpusError, match="name the paths"):
        snapshot_commit(tasks.parents[1], [])
