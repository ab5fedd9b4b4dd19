"""Hostile class: one attempt crashing the run. 25 nested folders with 200-byte names in an allowed
path made the runner's hand-back of the workspace build host paths past PATH_MAX (and a tree 1,500
folders deep made Python's recursive tree walks raise RecursionError); `memtrial run`
exited 2 with no records table or report, and a rerun crashed the same way. Through the real nightly
flow with a hostile `command` agent running unprivileged: the deep tree, a fifo, a socket and an
unreadable folder each fail only their own attempt (graded, or `ungradable` naming the step and the
error); the other attempts are graded, the report is written, and a rerun of the same run completes."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hostile_flow import run_hostile
from tasks_lib.artifacts import open_store
from tasks_lib.contracts import RunRecord
from tasks_lib.run.records import read_records

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the command agent runs unprivileged only under a root runner")

HOSTILE = """
import os, socket
if os.path.isdir("logship"):  # a tree deeper than PATH_MAX in an allowed path
    fd = os.open("logship", os.O_RDONLY)
    for i in range(25):
        name = "d%02d" % i + "x" * 197
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep")
    fd = os.open("logship", os.O_RDONLY)
    for _ in range(1500):  # and one deeper than Python's recursion limit (shutil.rmtree, os.walk)
        os.mkdir("a", dir_fd=fd)
        child = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    print("left a tree of", 25 * 201, "bytes of path and one 1500 folders deep")
elif os.path.isdir("tabmill"):  # a fifo, a socket and a folder nobody may read
    os.mkfifo("tabmill/pipe")
    socket.socket(socket.AF_UNIX).bind("tabmill/sock")
    os.makedirs("tabmill/closed/inner")
    open("tabmill/closed/inner/x", "w").close()
    os.chmod("tabmill/closed", 0)
    print("left a fifo, a socket and a closed folder")
else:
    print("did nothing")
"""
TASKS = ("alertfan-sms-channel", "logship-partial-exit", "tabmill-delimiter")
HOSTILE_TASKS = {"logship-partial-exit", "tabmill-delimiter"}


@pytest.fixture(scope="module")
def crashed_run(prefect_harness: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[RunRecord]]:
    tmp_path = tmp_path_factory.mktemp("crash-the-run")
    with pytest.MonkeyPatch.context() as monkeypatch:
        return tmp_path, run_hostile(tmp_path, monkeypatch, HOSTILE, TASKS, conditions=["off"], run_id="crash", flow="nightly")


def test_a_workspace_past_path_max_fails_only_its_own_attempt(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: the deep tree crashed the whole run (no records table, no report) instead of failing itself.
    The hand-back and the audit walk it by folder descriptor, so the attempt is graded like any other
    (never a pass: it did not solve the task), or ungradable naming the step that could not read it."""
    _, records = crashed_run
    (deep,) = [r for r in records if r.task_id == "logship-partial-exit"]
    assert deep.outcome in ("fail", "ungradable") and deep.failure_reason
    if deep.outcome == "ungradable":
        assert deep.failure_reason.startswith("attempt error in "), deep.failure_reason
    assert deep.audit_passed is not None, "the audit never ran over the deep tree"


def test_a_fifo_a_socket_and_an_unreadable_folder_fail_only_their_attempt(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: special files and unreadable folders in the workspace must not hang or crash the run;
    the attempt is graded (a fail naming the audit) or ungradable with its reason, never a pass."""
    _, records = crashed_run
    (odd,) = [r for r in records if r.task_id == "tabmill-delimiter"]
    assert odd.outcome in ("fail", "ungradable") and odd.failure_reason


def test_the_other_attempts_are_graded_and_the_report_is_written(crashed_run: tuple[Path, list[RunRecord]]) -> None:
    """Regression: one attempt's error took every other attempt's grade and the report with it."""
    tmp_path, records = crashed_run
    (plain,) = [r for r in records if r.task_id == "alertfan-sms-channel"]
    assert plain.outcome == "fail" and not plain.infra_failure, plain
    assert plain.failure_reason == "check failed" or plain.failure_reason.startswith("post-turn tests not proven"), plain
    calibration = read_records(open_store(tmp_path / "artifacts"), "crash-calibration")
    assert {r.outcome for r in calibration} <= {"pass", "fail"} and len(calibration) >= len(TASKS)
    reports = list((tmp_path / "artifacts" / "runs" / "crash-command").rglob("report.html"))
    assert reports, "the hostile agent's run has no report"
    summary = json.loads((tmp_path / "artifacts" / "runs" / "crash-command" / "summary.json").read_text())
    ungradable = [r for r in records if r.outcome == "ungradable"]
    if ungradable:  # named in the distrust lines (so `memtrial run` exits 1), each with its step and error
        assert f"{len(ungradable)} attempt(s) are ungradable" in " ".join(summary["distrust"])
        for record in ungradable:
            assert f"{record.task_id}/{record.condition}/t{record.trial}: {record.failure_reason}" in summary["distrust"]


def test_a_rerun_of_the_run_completes(crashed_run: tuple[Path, list[RunRecord]], prefect_harness: None) -> None:
    """Regression: `memtrial rerun` crashed again on the same attempt; it must complete with the same records."""
    from flows.nightly import nightly

    tmp_path, records = crashed_run
    with pytest.MonkeyPatch.context() as monkeypatch:
        from hostile_flow import KEY, KEY_ENV

        monkeypatch.setenv(KEY_ENV, KEY)
        nightly(config_path=str(tmp_path / "run.yaml"), run_id="crash")
    again = read_records(open_store(tmp_path / "artifacts"), "crash-command")
    assert [(r.task_id, r.outcome, r.failure_reason) for r in again] == [(r.task_id, r.outcome, r.failure_reason) for r in records]


def _deep_tree(root: Path, depth: int = 25) -> None:
    """`depth` nested folders with 200-byte names under `root`, a file at the bottom (made by descriptor)."""
    fd = os.open(root, os.O_RDONLY)
    for i in range(depth):
        name = f"d{i:02d}" + "x" * 197
        os.mkdir(name, dir_fd=fd)
        child = os.open(name, os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    leaf = os.open("leaf.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd)
    os.write(leaf, b"deep")
    os.close(leaf)
    os.symlink("leaf.txt", "link", dir_fd=fd)
    os.close(fd)


def test_the_audit_reads_a_tree_past_path_max_instead_of_giving_up(tmp_path: Path) -> None:
    """Regression: the audit listed folders by host path, so a tree past PATH_MAX could not be audited at all."""
    from tasks_lib.arm.audit import audit, snapshot_tree

    root = tmp_path / "ws"
    (root / "out").mkdir(parents=True)
    before = snapshot_tree(root)
    _deep_tree(root / "out")
    receipt = audit(before, root, ["out"])
    assert receipt.passed and receipt.entries_after == 1 + 25 + 2
    leaf = [c for c in receipt.allowed_changes if c.path.endswith("/leaf.txt")]
    assert len(leaf) == 1 and leaf[0].after is not None and leaf[0].after.size == 4


def test_the_workspace_hand_back_reaches_every_entry_past_path_max(tmp_path: Path) -> None:
    """Regression: the hand-back of a lent workspace chowned by host path and raised past PATH_MAX."""
    from tasks_lib.sandbox.identity import _chown_tree

    root = tmp_path / "ws"
    root.mkdir()
    _deep_tree(root)
    _chown_tree(root, 4242, 4242)
    owners = {os.stat(name, dir_fd=fd, follow_symlinks=False).st_uid
              for _, dirs, files, fd in os.fwalk(root) for name in dirs + files}
    assert owners == {4242}
    _chown_tree(root, os.getuid(), os.getgid())


def test_an_attempt_that_cannot_be_materialised_is_ungradable_and_the_matrix_goes_on(tmp_path: Path) -> None:
    """Regression: an error of one attempt's own step (here: its task folder is not in the commit the
    fixtures are built from) ended the matrix with no record for the others; it must make only that
    attempt ungradable, naming the step, and the next attempt must still be graded."""
    import shutil
    import subprocess

    from tasks_lib.arm.steps import run_matrix, schedule
    from tasks_lib.artifacts import LocalStore
    from tasks_lib.corpus.tasks import load_task

    repo = Path(__file__).resolve().parents[1]
    head = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    shutil.copytree(repo / "corpora" / "tasks" / "tabmill-delimiter", tmp_path / "uncommitted-task")
    manifest = tmp_path / "uncommitted-task" / "task.json"
    manifest.write_text(manifest.read_text().replace('"tabmill-delimiter"', '"uncommitted-task"', 1))
    plan = schedule([load_task(tmp_path / "uncommitted-task"), load_task(repo / "corpora" / "tasks" / "logship-partial-exit")],
                    ["off"], 1)
    store = LocalStore(tmp_path / "artifacts")
    broken, graded = run_matrix(plan, run_id="one-broken", repo_root=repo, commit=head, tasks_subdir="corpora/tasks",
                                agent_name="calibration", store=store)
    assert broken.outcome == "ungradable" and broken.infra_failure
    assert (broken.failure_reason or "").startswith("attempt error in materialize-workspace: "), broken.failure_reason
    assert store.exists(f"runs/one-broken/attempts/{broken.task_id}/off/t0/record.json")
    assert graded.task_id == "logship-partial-exit" and graded.outcome in ("pass", "fail") and not graded.infra_failure


def test_teardown_removes_a_tree_deeper_than_the_recursion_limit(tmp_path: Path) -> None:
    """Regression: teardown used shutil.rmtree, which recurses in Python: a 3,000-folder-deep tree raised
    RecursionError (not caught by ignore_errors) and crashed the run in the attempt's finally."""
    from tasks_lib.sandbox.fstree import remove_tree

    root = tmp_path / "scratch"
    root.mkdir()
    fd = os.open(root, os.O_RDONLY)
    for _ in range(3000):
        os.mkdir("a", dir_fd=fd)
        child = os.open("a", os.O_RDONLY, dir_fd=fd)
        os.close(fd)
        fd = child
    os.mkfifo("pipe", dir_fd=fd)
    os.symlink("/etc/passwd", "link", dir_fd=fd)
    os.close(fd)
    remove_tree(root)
    assert not root.exists() and os.path.exists("/etc/passwd")
