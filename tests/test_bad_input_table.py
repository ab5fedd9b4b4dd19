"""Every bad input of a run is refused before anything runs: one table row per case, each through the
real CLI (a subprocess with a fresh MEMTRIAL_HOME and PREFECT_HOME).

A row passes when the command exits 2 with one line on stderr that names the file or the option and
the field, with no traceback, and nothing was written under the artifact root. These are the README's
input promise ("refused in one line naming the fix, before Prefect starts and before any arm"): each
case below once ran (a duplicate task sealed a records table with a duplicate row; an empty task list
ran all 44 tasks; a misspelt suite option failed after the paid matrix; an artifact root that is a
file failed after the run started) or was refused with a line that named nothing to do.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from gitrepo import git

REPO = Path(__file__).resolve().parents[1]
TWO_TASKS = "logship-partial-exit,rotlog-keep-count"
UNSET = "<unset>"
"""An `env` value of `cli` that removes the variable."""


def cli(args: list[str], tmp: Path, env: dict[str, str] | None = None, checkout: Path = REPO,
        wrap: list[str] | None = None) -> subprocess.CompletedProcess[str]:
    """`memtrial ARGS` from `checkout` in a subprocess with a fresh home and Prefect home."""
    home = tmp / "home"
    full = {**os.environ, "MEMTRIAL_HOME": str(home), "PREFECT_HOME": str(home / "prefect"),
            "PYTHONPATH": str(checkout), **(env or {})}
    for name in ["MEMTRIAL_ARTIFACT_ROOT", *(k for k, v in (env or {}).items() if v == UNSET)]:
        full.pop(name, None)
    return subprocess.run([*(wrap or []), sys.executable, "-m", "flows.cli.main", *args], capture_output=True,
                          text=True, env=full, cwd=tmp, timeout=120, check=False)


def assert_one_line_refusal(done: subprocess.CompletedProcess[str], *named: str) -> None:
    """Exit 2, one stderr line naming each of `named`, no traceback, nothing on stdout."""
    err = done.stderr
    assert done.returncode == 2, (done.returncode, err[-2000:], done.stdout[-500:])
    assert err.count("\n") == 1 and err.startswith("memtrial: error: "), err
    assert "Traceback" not in err and not done.stdout, err
    for text in named:
        assert text in err, (text, err)


@dataclass(frozen=True)
class Case:
    """One bad input: the command's arguments (built in tmp) and what its line must name."""

    args: Callable[[Path], list[str]]
    named: tuple[str, ...]


def config(text: str) -> Callable[[Path], list[str]]:
    """`run --config FILE` for a config holding `text` and an artifact root under tmp."""
    def build(tmp: Path) -> list[str]:
        path = tmp / "run.yaml"
        path.write_text(f"{text}\nartifact_root: {tmp / 'artifacts'}\n")
        return ["run", "--config", str(path)]
    return build


def a_file(tmp: Path) -> Path:
    path = tmp / "not-a-folder"
    path.write_text("a file\n")
    return path


CASES = {
    "suite option misspelt": Case(config("suites: [recall]\nsuite_options: {recall: {lenghts: [10, 40]}}"),
                                  ("run.yaml", "suite_options.recall.lenghts", "known: lengths")),
    "suite options of an unknown suite": Case(config("suite_options: {recal: {lengths: [10]}}"),
                                              ("run.yaml", "suite_options.recal", "known: recall, retrieval, external, write-path")),
    "suite options of a suite not run": Case(config("suite_options: {recall: {lengths: [10]}}"),
                                             ("run.yaml", "'suite_options'", "suites does not list")),
    "external suite without data": Case(config("suites: [external]"), ("run.yaml", "'suite_options'", "locomo: FILE")),
    "suite option naming a missing file": Case(config("suites: [retrieval]\nsuite_options: {retrieval: {gates: no/such/gates.json}}"),
                                               ("run.yaml", "suite_options.retrieval.gates", "is not a file")),
    "write-path sequence unknown": Case(config("suites: [write-path]\nsuite_options: {write-path: {sequences: [nope]}}"),
                                        ("run.yaml", "suite_options.write-path.sequences", "unknown sequence(s) nope; known:")),
    "task named twice": Case(config("tasks: [logship-partial-exit, logship-partial-exit]"), ("run.yaml", "'tasks'", "more than once")),
    "empty task list": Case(config("tasks: []"), ("run.yaml", "'tasks'", "leave tasks out to run every task")),
    "suite named twice": Case(config("suites: [recall, recall]"), ("run.yaml", "'suites'", "more than once")),
    "paired --tasks with no name": Case(lambda tmp: ["paired", "--tasks", ",", "--artifacts", str(tmp / "artifacts")],
                                        ("memtrial paired options", "--tasks", "names nothing")),
    "paired --tasks naming a task twice": Case(lambda tmp: ["paired", "--tasks", "rotlog-keep-count,rotlog-keep-count",
                                                            "--artifacts", str(tmp / "artifacts")], ("memtrial paired options", "'tasks'", "more than once")),
    "paired --tasks with an empty name": Case(lambda tmp: ["paired", "--tasks", "rotlog-keep-count,,logship-partial-exit",
                                                           "--artifacts", str(tmp / "artifacts")], ("--tasks", "empty name")),
    "run --artifacts is a file": Case(lambda tmp: [*config("")(tmp)[:3], "--artifacts", str(a_file(tmp))],
                                                  ("memtrial run", "'--artifacts'", "a file stands")),
    "artifact_root field is a file": Case(lambda tmp: ["run", "--config", str(_with_root(tmp, a_file(tmp)))],
                                          ("run.yaml", "'artifact_root'", "a file stands")),
    "paired artifact root under a file": Case(lambda tmp: ["paired", "--artifacts", str(a_file(tmp) / "sub")],
                                              ("memtrial paired options", "'--artifacts'", "a file stands")),
    "runs --artifact-root is a file": Case(lambda tmp: ["runs", "--artifact-root", str(a_file(tmp))],
                                           ("memtrial runs", "'--artifact-root'", "a file stands")),
}


def _with_root(tmp: Path, root: Path) -> Path:
    path = tmp / "run.yaml"
    path.write_text(f"artifact_root: {root}\n")
    return path


@pytest.mark.parametrize("case", list(CASES.values()), ids=list(CASES))
def test_a_bad_input_is_one_line_exit_2_and_leaves_nothing(tmp_path: Path, case: Case) -> None:
    """Regression: each input here was accepted (and ran, or failed after the run started) or was
    refused with a traceback or a line naming nothing to do."""
    args = case.args(tmp_path)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    done = cli(args, tmp_path)
    assert_one_line_refusal(done, *case.named)
    assert not (tmp_path / "artifacts").exists(), "nothing written under the artifact root"
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and "home" not in p.relative_to(tmp_path).parts} == before


def test_a_config_typo_is_refused_without_importing_prefect_or_pyarrow(tmp_path: Path) -> None:
    """Regression: a config typo took 5.1 s to refuse, waiting on imports the refusal does not need; the
    refusal now imports neither Prefect nor pyarrow nor the stage code (measured with -X importtime,
    which does not depend on how busy the machine is)."""
    args = config("suites: [recall]\nsuite_options: {recall: {lenghts: [10, 40]}}")(tmp_path)
    home = tmp_path / "home"
    env = {**os.environ, "MEMTRIAL_HOME": str(home), "PREFECT_HOME": str(home / "prefect"), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-X", "importtime", "-m", "flows.cli.main", *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=120, check=False)
    imported = {line.rsplit("|", 1)[-1].strip() for line in done.stderr.splitlines() if line.startswith("import time:")}
    assert done.returncode == 2 and "suite_options.recall.lenghts" in done.stderr
    heavy = sorted(m for m in imported if m.split(".")[0] in {"prefect", "pyarrow", "numpy", "boto3"}
                   or m in {"tasks_lib.corpus.tasks", "tasks_lib.arm.steps", "flows.nightly"})
    assert not heavy, heavy


def test_an_artifact_root_this_user_cannot_write_is_refused_before_the_run(tmp_path: Path) -> None:
    """Regression: a read-only artifact root failed after the run started (`.status.json.partial-...`)."""
    root = tmp_path / "artifacts"
    root.mkdir()
    if os.geteuid() != 0:
        root.chmod(0o555)
        wrap = None
    elif shutil.which("unshare") and subprocess.run(["unshare", "-m", "true"], check=False).returncode == 0:
        wrap = ["unshare", "-m", "--propagation", "private", "sh", "-c", f'mount --bind -o ro "{root}" "{root}" && exec "$@"', "sh"]
    else:
        pytest.skip("root can write any folder, and this machine allows no private read-only mount (unshare -m)")
    done = cli(["paired", "--tasks", TWO_TASKS, "--artifacts", str(root)], tmp_path, wrap=wrap)
    root.chmod(0o755)
    assert_one_line_refusal(done, "'--artifacts'", "cannot write", "choose a folder you can write")
    assert not any(root.iterdir())


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


S3_ISOLATED = {"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_CONFIG_FILE": "/nonexistent",
               "AWS_EC2_METADATA_DISABLED": "true", "AWS_REGION": "us-east-1"}
"""No credentials from the machine's files or an instance metadata service: only what a row sets."""


def test_an_s3_root_at_an_endpoint_that_does_not_answer_is_refused_naming_the_endpoint_variable(tmp_path: Path) -> None:
    """Regression: an unreachable S3 endpoint failed inside the run with a message naming no fix."""
    env = {**S3_ISOLATED, "MEMTRIAL_S3_ENDPOINT_URL": f"http://127.0.0.1:{_closed_port()}",
           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = cli(["paired", "--tasks", TWO_TASKS, "--artifacts", "s3://bucket/prefix"], tmp_path, env=env)
    assert_one_line_refusal(done, "'--artifacts'", "cannot reach", "MEMTRIAL_S3_ENDPOINT_URL")


def test_an_s3_root_without_credentials_is_refused_naming_the_credential_variables(tmp_path: Path, s3_endpoint: str) -> None:
    """Regression: an S3 root without credentials was refused by boto3's message, naming no variable to set."""
    import boto3

    boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket="nocreds")
    env = {**S3_ISOLATED, "MEMTRIAL_S3_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": UNSET, "AWS_SECRET_ACCESS_KEY": UNSET,
           "AWS_PROFILE": UNSET, "AWS_SESSION_TOKEN": UNSET}
    done = cli(["paired", "--tasks", TWO_TASKS, "--artifacts", "s3://nocreds/runs"], tmp_path,
               env={**env, "HOME": str(tmp_path)})
    assert_one_line_refusal(done, "'--artifacts'", "no S3 credentials", "AWS_ACCESS_KEY_ID")
    listed = boto3.client("s3", endpoint_url=s3_endpoint, region_name="us-east-1", aws_access_key_id="testing",
                          aws_secret_access_key="testing").list_objects_v2(Bucket="nocreds")
    assert listed.get("KeyCount", 0) == 0, "nothing written under the artifact root"


def test_an_s3_root_whose_bucket_is_missing_is_refused_naming_the_bucket(tmp_path: Path, s3_endpoint: str) -> None:
    """Regression: a missing bucket was found only when the run wrote its first marker."""
    env = {**S3_ISOLATED, "MEMTRIAL_S3_ENDPOINT_URL": s3_endpoint, "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}
    done = cli(["paired", "--tasks", TWO_TASKS, "--artifacts", "s3://no-such-bucket/p"], tmp_path, env=env)
    assert_one_line_refusal(done, "'--artifacts'", "NoSuchBucket", "create it")


# --------------------------------------------------------------------------- one task's edit blocks only that task


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clone of this checkout's HEAD (its own PROJECT_ROOT) in which a task is being authored: an
    unfinished `memtrial task new` scaffold, and an unknown field added to one committed task.json."""
    clone = tmp_path_factory.mktemp("checkout") / "memtrial"
    git(REPO, "clone", "-q", "--shared", str(REPO), str(clone))
    tmp = clone.parent
    done = cli(["task", "new", "demo-task", "--kind", "convention"], tmp, checkout=clone)
    assert done.returncode == 0, done.stderr
    manifest = clone / "corpora" / "tasks" / "tabmill-delimiter" / "task.json"
    manifest.write_text(manifest.read_text().replace("{", '{"bogus_field": 1, ', 1))
    return clone


@pytest.mark.parametrize("broken", ["demo-task", "tabmill-delimiter"])
def test_a_broken_task_is_refused_by_name_in_one_short_line_where_it_is_named(checkout: Path, broken: str) -> None:
    """Regression: a named unfinished scaffold or invalid task.json was refused with a 1,300-character
    line listing every TODO of the corpus; it is now one line naming the task and its first problem."""
    done = cli(["paired", "--tasks", broken, "--artifacts", str(checkout.parent / "artifacts")], checkout.parent, checkout=checkout)
    assert_one_line_refusal(done, "'tasks'", f"task {broken} cannot run", f"memtrial task check {broken}")
    assert len(done.stderr) < 500, done.stderr


def test_a_broken_task_does_not_block_a_run_of_other_tasks(checkout: Path) -> None:
    """Regression: after `memtrial task new demo-task`, or an unknown field in one task.json, a run of two
    other tasks was refused with the broken tasks' problems. Here the run's only problem (a condition
    named twice) is what refuses it: the broken tasks are not named and add nothing to the line."""
    done = cli(["paired", "--tasks", TWO_TASKS, "--conditions", "off,off", "--artifacts", str(checkout.parent / "artifacts")],
               checkout.parent, checkout=checkout)
    assert_one_line_refusal(done, "'conditions'", "off listed more than once")
    assert "demo-task" not in done.stderr and "tabmill-delimiter" not in done.stderr


def test_a_broken_task_not_named_is_a_note_and_an_exclusion_not_a_refusal(checkout: Path) -> None:
    """Regression: a broken task the run did not name refused the run; preflight now returns a note
    naming it (a run of every task leaves it out and reports it)."""
    script = ("import sys; from pathlib import Path; from tasks_lib.run.preflight import INPUT_CHECKS, task_notes; "
              "from tasks_lib.run.config import RunConfig; root = Path(sys.argv[1]); "
              "config = RunConfig(tasks=['logship-partial-exit'], artifact_root=sys.argv[2]); "
              "print([str(p) for c in INPUT_CHECKS for p in c(config, root, 'cfg')]); "
              "print('\\n'.join(task_notes(RunConfig(), root)))")
    done = subprocess.run([sys.executable, "-c", script, str(checkout), str(checkout.parent / "artifacts")], capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(checkout)}, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    problems, *notes = done.stdout.splitlines()
    assert problems == "[]"
    assert any(n.startswith("task demo-task is left out of this run: ") and "unfinished scaffold" in n for n in notes), notes
    assert any(n.startswith("task tabmill-delimiter is left out of this run: ") and "bogus_field" in n for n in notes), notes


def test_corpus_check_names_a_task_edited_in_the_working_tree_since_the_checked_commit(tmp_path: Path) -> None:
    """Regression: `memtrial corpus check` said "ok: 44 tasks" for an unknown field added to one
    task.json, because it checks the committed HEAD while a run loads the working tree (and refuses the
    edit); the edited folder is now a failure naming the files, the problem and to commit the edit."""
    from tasks_lib.corpus.tasks import edited_folders

    repo = tmp_path / "repo"
    tasks = repo / "corpora" / "tasks"
    tasks.mkdir(parents=True)
    for task_id in ("tabmill-delimiter", "rotlog-keep-count"):
        shutil.copytree(REPO / "corpora" / "tasks" / task_id, tasks / task_id, symlinks=True)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "corpus")
    commit = git(repo, "rev-parse", "HEAD")
    assert edited_folders(tasks, repo, commit, "corpora/tasks") == []
    manifest = tasks / "tabmill-delimiter" / "task.json"
    manifest.write_text(manifest.read_text().replace("{", '{"bogus_field": 1, ', 1))
    (tasks / "rotlog-keep-count" / "notes.txt").write_text("untracked\n")
    failures = {f.task_id: f.message for f in edited_folders(tasks, repo, commit, "corpora/tasks")}
    assert set(failures) == {"tabmill-delimiter", "rotlog-keep-count"}
    assert "task.json" in failures["tabmill-delimiter"] and "bogus_field" in failures["tabmill-delimiter"]
    assert "notes.txt" in failures["rotlog-keep-count"] and "commit the edit" in failures["rotlog-keep-count"]
