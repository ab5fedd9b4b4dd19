"""The bundled task corpus and its invariants (tasks_lib.corpus.tasks).

The corpus test builds every fixture from this repository's git objects, so the tasks under
corpora/tasks must be committed. The broken-copy tests copy one real task into a fresh git
repository in tmp_path, break exactly one thing, commit, and check that exactly the matching
invariant fails with a message naming the task, the file and the invariant.
"""

from __future__ import annotations

import json
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest

from gitrepo import git
from tasks_lib.corpus.tasks import (
    INVARIANTS,
    SPLIT_NAME,
    TaskCorpusError,
    check_corpus,
    check_split,
    compute_split,
    load_split,
    load_tasks,
    scan_text,
    term_regex,
)
from tasks_lib.trees import sha256_file

pytestmark = pytest.mark.integration  # each test copies the corpus and proves its invariants

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "corpora" / "tasks"
PROBE_TASK = "diskwatch-critical-default"
"""A shell task: its checks are the fastest, so the broken copies stay cheap."""


# The whole bundled corpus is checked once per suite, through the CLI: tests/test_cli.py
# (test_corpus_check_reports_every_bundled_task_and_invariant). Here: one task at a time, broken on purpose.


def load_tasks_root() -> list[Path]:
    return [t.root for t in load_tasks(TASKS)]


def test_corpus_covers_every_kind_it_promises() -> None:
    """The corpus is not one flattering pattern: minimum counts per kind, and several toolchains."""
    tasks = load_tasks(TASKS)
    kinds = Counter(t.manifest.kind for t in tasks)
    minimum = {"convention": 8, "deducible": 5, "cross-file": 2, "investigation": 2, "continuity": 3, "tare": 5, "stale-trap": 3}
    assert len(tasks) >= 28
    assert all(kinds[k] >= n for k, n in minimum.items()), kinds
    toolchains = set()
    for task in tasks:
        files = {p.name for p in task.fixture_dir.rglob("*")}
        toolchains |= {"node"} if "package.json" in files else set()
        toolchains |= {"python"} if any(n.endswith(".py") for n in files) else set()
        toolchains |= {"sh"} if any(n.endswith(".sh") for n in files) else set()
    assert {"python", "node", "sh"} <= toolchains


def test_split_file_matches_the_rule() -> None:
    """split.json is exactly what the salted-hash rule gives for the current task folders."""
    assert check_split(TASKS) == []
    split = load_split(TASKS / SPLIT_NAME)
    assert set(split.visible).isdisjoint(split.holdout)
    assert set(split.visible) | set(split.holdout) == {t.task_id for t in load_tasks(TASKS)}
    assert split.holdout, "a split with an empty holdout set holds nothing back"


def test_split_is_deterministic_per_task() -> None:
    """Adding a task never moves another one between the sets."""
    ids = [f"task-{i}" for i in range(40)]
    small, large = compute_split(ids[:20]), compute_split(ids)
    assert set(small.holdout) == set(large.holdout) & set(ids[:20])
    assert compute_split(reversed(ids)) == large
    assert compute_split(ids, salt="another-salt") != large


def test_edited_split_lists_are_rejected(tmp_path: Path) -> None:
    data = json.loads((TASKS / SPLIT_NAME).read_text())
    data["visible"], data["holdout"] = data["visible"][1:], data["holdout"] + data["visible"][:1]
    (tmp_path / SPLIT_NAME).write_text(json.dumps(data))
    with pytest.raises(TaskCorpusError, match="edited by hand"):
        load_split(tmp_path / SPLIT_NAME)


@pytest.mark.parametrize(
    ("term", "text", "hit"),
    [
        ("17", "return 17", True),
        ("17", "EXIT_17 = 1", True),
        ("17", "copyright 2017", False),
        ("17", "retry 170 times", False),
        ("cents", "balance_cents", True),
        ("cents", "percents", False),
        ("36 hours", "look back 36\n  hours", True),
        ("X-Org-Scope", "headers['x-org-scope']", True),
    ],
    ids=["bare", "underscore-joined", "inside-year", "longer-number", "snake-case", "inside-word", "line-break", "header-case"],
)
def test_answer_terms_match_case_insensitively_at_word_edges(term: str, text: str, hit: bool) -> None:
    assert bool(term_regex(term).search(text)) is hit


@pytest.mark.parametrize(
    ("text", "hit"),
    [
        ("critical level: \uff19\uff12", True),
        ("critical level: 9\u200b2", True),
        ("critical level: 9\u20602 percent", True),
        ("intro\nlook back 36\u00a0hours", True),
        ("critical level: \uff19\uff12\uff10", False),
        ("copyright \uff12\uff10\uff19\uff12", False),
    ],
    ids=[
        "fullwidth-digits-hide-the-answer", "zero-width-space-hides-the-answer", "word-joiner-hides-the-answer", "nbsp-hides-a-phrase",
        "fullwidth-longer-number-is-another-number", "fullwidth-year-holds-no-answer",
    ],
)
def test_answer_scan_folds_fullwidth_and_zero_width_characters(text: str, hit: bool) -> None:
    """Invariant 4 reads text as certification does: `９２` and `9\u200b2` used to hide the answer 92."""
    failures = scan_text("t", "fixture/README.md", text, ["92", "36 hours"], set(), code=False)
    assert bool(failures) is hit
    assert all(f.invariant == "no-answer-leak" for f in failures)


# --------------------------------------------------------------------------- broken copies


def _manifest(task: Path) -> dict:
    return json.loads((task / "task.json").read_text())


def _save_manifest(task: Path, data: dict) -> None:
    (task / "task.json").write_text(json.dumps(data, indent=2) + "\n")


def leak_answer(task: Path) -> str:
    script = task / "fixture" / "diskwatch.sh"
    script.write_text(script.read_text().replace("warn=80\n", "warn=80\n# storage wants the critical level at 92\n"))
    return "fixture/diskwatch.sh:"


def leak_answer_in_utf16(task: Path) -> str:
    (task / "fixture" / "NOTES.txt").write_bytes("storage wants the critical level at 92\n".encode("utf-16"))
    return "fixture/NOTES.txt:1"


def narrate_memory(task: Path) -> str:
    script = task / "fixture" / "diskwatch.sh"
    script.write_text(script.read_text().replace("warn=80\n", "# defaults: diskwatch.sh takes its default thresholds from the storage team's Volume Policy\nwarn=80\n"))
    return "fixture/diskwatch.sh:"


def break_solution(task: Path) -> str:
    shutil.copy2(task / "fixture" / "diskwatch.sh", task / "solution" / "diskwatch.sh")
    return "solution"


def pass_untouched(task: Path) -> str:
    data = _manifest(task)
    data["check_command"] = ["sh", "-c", "exit 0"]
    _save_manifest(task, data)
    (task / "hidden" / "tests" / "critical.sh").write_text("exit 0\n")
    return "fixture"


def copy_hidden_file(task: Path) -> str:
    """A hidden file at the same path in the fixture (the probe task is judged apart, so a copied
    post-turn test would also break the visible suite, which cannot run `jail`: its data file)."""
    shutil.copy2(task / "hidden" / "tests" / "data" / "df-full.txt", task / "fixture" / "tests" / "data" / "df-full.txt")
    return "fixture/tests/data/df-full.txt"


def mismatch_digest(task: Path) -> str:
    data = _manifest(task)
    data["verifier"]["asset"]["sha256"] = "0" * 64
    _save_manifest(task, data)
    return "verifier.sh"


def drop_solution(task: Path) -> str:
    shutil.rmtree(task / "solution")
    return "solution"


def escaping_symlink(task: Path) -> str:
    os.symlink("../../hidden/tests/critical.sh", task / "fixture" / "tests" / "peek")
    return "fixture/tests/peek"


def drop_correction(task: Path) -> str:
    data = _manifest(task)
    data["kind"] = "stale-trap"
    _save_manifest(task, data)
    return "task.json:memories"


def plant_agent_memory(task: Path) -> str:
    (task / "fixture" / "CLAUDE.md").write_text("Run the shell tests before committing.\n")
    return "fixture/CLAUDE.md"


def declare_wrong_lanes(task: Path) -> str:
    """The declaration claims the keyword lane carries the key memory; only the graph lane does."""
    lanes = task.parent / "key_lanes.json"
    data = json.loads(lanes.read_text())
    data["tasks"][task.name] = ["keyword"]
    lanes.write_text(json.dumps(data))
    return "key_lanes.json:tasks."


def leave_scaffold_todo(task: Path) -> str:
    """An author forgot one part `memtrial task new` asked for: the task is unfinished, not checked as if sound."""
    readme = task / "fixture" / "README.md"
    readme.write_text(readme.read_text() + "\nTODO(task new): describe the command-line options.\n")
    return "fixture/README.md:"


def _rewrite_transcript(task: Path, index: int, turn: int, text: str, repin: bool = True) -> str:
    """Replace one turn of the task's `index`-th transcript; re-pin it in task.json unless `repin` is False."""
    data = _manifest(task)
    ref = data["transcripts"][index]
    path = task / ref["path"]
    lines = path.read_text().splitlines()
    lines[turn] = json.dumps({"role": "assistant", "text": text})
    path.write_text("\n".join(lines) + "\n")
    if repin:
        ref["sha256"] = sha256_file(path)
        _save_manifest(task, data)
    return ref["path"]


def headline_transcript(task: Path) -> str:
    """The key fact announced as a headline, not said in passing amid other work."""
    return _rewrite_transcript(task, 0, 3, "Note: storage pages at 92% full. Add it as the critical default. That is all.")


def transcript_opens_with_the_fact(task: Path) -> str:
    return _rewrite_transcript(task, 1, 3, "The critical level is 92% full for every volume. I also skipped tmpfs. Tests pass.")


def answer_in_undeclared_turn(task: Path) -> str:
    """An answer term outside the declared key turns: the feed's key turns would be a lie."""
    return _rewrite_transcript(task, 0, 1, "Looking at df output first. Storage escalates at 92 anyway. I will strip the slash.")


def transcript_copies_memory(task: Path) -> str:
    """A transcript that replays a curated memory's wording is the curated item, not recorded work."""
    return _rewrite_transcript(task, 1, 1, "Yes. diskwatch.sh must stay POSIX sh: it runs under dash on the Debian hosts. I will filter in awk.")


def tampered_transcript(task: Path) -> str:
    return _rewrite_transcript(task, 0, 4, "Thanks, merged twice.", repin=False)


BREAKS: list[tuple[Callable[[Path], str], str]] = [
    (leak_answer, "no-answer-leak"),
    (leak_answer_in_utf16, "no-answer-leak"),
    (narrate_memory, "no-answer-leak"),
    (break_solution, "passes-with-solution"),
    (pass_untouched, "fails-on-fixture"),
    (copy_hidden_file, "hidden-unreachable"),
    (mismatch_digest, "digests-match"),
    (drop_solution, "layout"),
    (escaping_symlink, "hidden-unreachable"),
    (drop_correction, "layout"),
    (plant_agent_memory, "certification-clean"),
    (declare_wrong_lanes, "key-lanes"),
    (leave_scaffold_todo, "layout"),
    (headline_transcript, "certification-clean"),
    (transcript_opens_with_the_fact, "certification-clean"),
    (answer_in_undeclared_turn, "no-answer-leak"),
    (transcript_copies_memory, "no-answer-leak"),
    (tampered_transcript, "digests-match"),
]


def committed_copy(tmp_path: Path, task_id: str, breaker: Callable[[Path], str] | None) -> tuple[Path, str | None]:
    """A fresh git repository holding one copy of `task_id`, broken by `breaker`, committed."""
    repo = tmp_path / "repo"
    task = repo / "corpora" / "tasks" / task_id
    shutil.copytree(TASKS / task_id, task, symlinks=True)
    declared = json.loads((TASKS / "key_lanes.json").read_text())
    declared["tasks"] = {task_id: declared["tasks"][task_id]}
    (task.parent / "key_lanes.json").write_text(json.dumps(declared))
    where = breaker(task) if breaker else None
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "one task")
    return repo, where


def test_unbroken_copy_passes(tmp_path: Path) -> None:
    """The probe task is sound on its own, so each broken copy below fails only by its break."""
    repo, _ = committed_copy(tmp_path, PROBE_TASK, None)
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert report.ok, "\n".join(str(f) for f in report.failures)


@pytest.mark.parametrize(("breaker", "invariant"), BREAKS, ids=[b.__name__.replace("_", "-") for b, _ in BREAKS])
def test_broken_task_fails_exactly_its_invariant(tmp_path: Path, breaker: Callable[[Path], str], invariant: str) -> None:
    repo, where = committed_copy(tmp_path, PROBE_TASK, breaker)
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert not report.ok
    assert {f.invariant for f in report.failures} == {invariant}, "\n".join(str(f) for f in report.failures)
    for failure in report.failures:
        text = str(failure)
        assert f"task {PROBE_TASK}" in text and f"invariant {invariant}" in text
    assert where is not None and any(f.path.startswith(where) for f in report.failures), [f.path for f in report.failures]
    with pytest.raises(TaskCorpusError, match=invariant):
        report.raise_for_failures()


def test_invariant_names_are_the_documented_ones() -> None:
    assert INVARIANTS == (
        "layout", "fails-on-fixture", "passes-with-solution", "hidden-unreachable", "no-answer-leak",
        "certification-clean", "digests-match", "post-turn-owned", "key-lanes",
    )


def test_missing_key_lane_declaration_fails_the_corpus(tmp_path: Path) -> None:
    """Without key_lanes.json the calibration pattern follows from nothing: the check says so."""
    repo, _ = committed_copy(tmp_path, PROBE_TASK, None)
    git(repo, "rm", "-q", "corpora/tasks/key_lanes.json")
    git(repo, "commit", "-q", "-m", "no declaration")
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert [(f.task_id, f.invariant) for f in report.failures] == [("(corpus)", "key-lanes")]
    assert "key_lanes.json" in report.failures[0].path and "missing" in report.failures[0].message


def test_undeclared_task_names_the_lanes_to_declare(tmp_path: Path) -> None:
    repo, _ = committed_copy(tmp_path, PROBE_TASK, None)
    (repo / "corpora" / "tasks" / "key_lanes.json").write_text('{"schema_version": 1, "tasks": {}}')
    git(repo, "commit", "-q", "-am", "empty declaration")
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert [(f.task_id, f.invariant) for f in report.failures] == [(PROBE_TASK, "key-lanes")]
    assert f'"{PROBE_TASK}": ["graph"]' in report.failures[0].message


def test_check_of_one_task_checks_only_that_task_and_times_each_invariant(tmp_path: Path) -> None:
    repo, _ = committed_copy(tmp_path, PROBE_TASK, None)
    report = check_corpus(repo / "corpora" / "tasks", repo, only=[PROBE_TASK])
    assert report.ok and [t.task_id for t in report.tasks] == [PROBE_TASK]
    timed = report.tasks[0].seconds
    assert set(INVARIANTS) - {"layout"} <= set(timed) and all(v >= 0 for v in timed.values())
    assert timed["passes-with-solution"] > 0
    missing = check_corpus(repo / "corpora" / "tasks", repo, only=["no-such-task"])
    assert not missing.ok and [(f.task_id, f.invariant) for f in missing.failures] == [("no-such-task", "layout")]


def test_uncommitted_task_folder_is_an_error_not_a_skip(tmp_path: Path) -> None:
    """A task that exists only in the working tree would never reach an agent; say so."""
    repo, _ = committed_copy(tmp_path, PROBE_TASK, None)
    shutil.copytree(TASKS / "rotlog-keep-count", repo / "corpora" / "tasks" / "rotlog-keep-count")
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert [(f.task_id, f.invariant) for f in report.failures] == [("rotlog-keep-count", "layout")]
    assert "not committed" in report.failures[0].message


def test_empty_corpus_fails(tmp_path: Path) -> None:
    """A gate that checked nothing does not pass."""
    repo = tmp_path / "repo"
    (repo / "corpora" / "tasks").mkdir(parents=True)
    (repo / "corpora" / "tasks" / "README.md").write_text("no tasks yet\n")
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "empty")
    report = check_corpus(repo / "corpora" / "tasks", repo)
    assert not report.ok
    assert [f.invariant for f in report.failures] == ["layout"]


def test_load_tasks_names_a_folder_without_manifest(tmp_path: Path) -> None:
    (tmp_path / "orphan" / "fixture").mkdir(parents=True)
    with pytest.raises(TaskCorpusError, match="task orphan: task.json: invariant layout"):
        load_tasks(tmp_path)


def test_manifest_digests_match_the_working_tree() -> None:
    for task in load_tasks(TASKS):
        assert sha256_file(task.verifier_path) == task.manifest.verifier.asset.sha256, task.task_id
