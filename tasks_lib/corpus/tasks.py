"""The bundled task corpus and the invariants every task must satisfy before it may run.

A task folder holds `task.json` (a `TaskManifest`), an agent-visible `fixture/`, a `solution/`,
a `hidden/` set of post-turn tests and a runner-owned verifier pinned by SHA-256. `check_corpus`
proves, for every task of a committed revision, that:

1. `fails-on-fixture`      the check fails on the untouched fixture (with `hidden/` applied);
2. `passes-with-solution`  the check passes once `solution/` and `hidden/` are applied, and the
                           solution only writes inside `allowed_output_paths`;
3. `hidden-unreachable`    no hidden file or verifier is reachable from the fixture (same path,
                           same content digest, nested folder, or a symlink escaping the tree);
4. `no-answer-leak`        no visible file, instruction or follow-up contains an answer term
                           (case-insensitive, bounded by non-alphanumerics, read as certification
                           reads text: UTF-16 and NUL padding decoded, fullwidth and zero-width
                           characters folded), and no code comment narrates the answer or
                           repeats a planted memory;
5. `certification-clean`   the built, redacted fixture certifies clean and redaction removed nothing;
6. `digests-match`         every digest a manifest pins matches its file;
7. `post-turn-owned`       hidden/ holds post-turn cases and no allowed output path covers them;
8. `key-lanes`             `key_lanes.json` declares the lanes that really retrieve the task's key
                           memory (`tasks_lib.corpus.key_lanes`).

A broken layout (missing folder, manifest, fixture, solution, hidden dir or verifier, or a manifest
that does not fit its kind, or a scaffold `TODO(task new)` left in any file) is reported as `layout`,
and the task's other checks are not run:
it is an error, never a skip. Fixtures are built from git objects into a fresh workspace per run.
Answer terms belong to invariant 4 alone, so certification is run without answer phrases and a
leak is reported once, under the invariant it breaks.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Literal

from pydantic import Field

from tasks_lib.artifacts import ArtifactStore
from tasks_lib.conditions import HARM_VARIANTS
from tasks_lib.contracts import (
    CertificationReport,
    ContractModel,
    GitOid,
    Identifier,
    MemorySpec,
    RelPath,
    Sha256,
    TaskManifest,
    load_document,
)
from tasks_lib.corpus.build import build_tree
from tasks_lib.corpus.certify import certify, decode_text, fold_text
from tasks_lib.corpus.feed import (
    FeedError,
    TermTest,
    headline_problems,
    leak_problems,
    load_transcript,
)
from tasks_lib.corpus.key_lanes import (
    KEY_LANES_NAME,
    CalibrationPlanError,
    KeyLanes,
    key_lane_problem,
    read_key_lanes,
)
from tasks_lib.corpus.packs import CorpusPack, open_corpus_pack, pack_label
from tasks_lib.corpus.post_turn import (
    HARNESS_DIR,
    entry_points,
    expected_cases,
    harness_argv,
    jail_argv,
    new_nonce,
    test_files,
    verdict,
)
from tasks_lib.corpus.redact import redact_tree
from tasks_lib.corpus.rules import within
from tasks_lib.corpus.upstream import fixture_origin
from tasks_lib.errors import ContractError, CorpusError, MemtrialError
from tasks_lib.trees import ram_scratch, sha256_bytes, sha256_file, walk_files

MANIFEST_NAME = "task.json"
SPLIT_NAME = "split.json"
SPLIT_SALT = "memtrial-task-split-v1"
HOLDOUT_PER_MILLE = 250
OUTPUT_TAIL_CHARS = 600
NARRATION_NGRAM = 6
SCAFFOLD_TODO = "TODO(task new)"
"""Marker `memtrial task new` writes into every part the author must fill in; any left is a layout failure."""

Invariant = Literal[
    "layout", "fails-on-fixture", "passes-with-solution", "hidden-unreachable", "no-answer-leak",
    "certification-clean", "digests-match", "post-turn-owned", "key-lanes",
]
INVARIANTS: tuple[str, ...] = Invariant.__args__  # type: ignore[attr-defined]
"""Every invariant name, in the order they are checked."""

ANSWER_KINDS = frozenset({"convention", "investigation", "continuity", "stale-trap"})
"""Task kinds whose answer cannot be found in the fixture, so they must declare answer terms."""

COMMENT_START = re.compile(r"^\s*(?:#|//|/\*|\*|<!--|--|;|rem\s)", re.IGNORECASE)
INLINE_COMMENT = re.compile(r"(?:^|\s)(?:#|//)\s")


class TaskCorpusError(CorpusError):
    """The task corpus is malformed or breaks an invariant; the message lists every failure."""


# --------------------------------------------------------------------------- result models


class CorpusFailure(ContractModel):
    """One broken invariant of one task."""

    task_id: str
    """The task (its folder name), or `(corpus)` for a corpus-wide failure."""
    invariant: Invariant
    """Which invariant is broken."""
    path: str
    """The file or folder concerned, relative to the task folder (or a manifest field)."""
    message: str
    """What is wrong and how to fix it, in one line."""

    def __str__(self) -> str:
        return f"task {self.task_id}: {self.path}: invariant {self.invariant}: {self.message}"


class CheckRun(ContractModel):
    """One run of a task's check command in a fresh workspace."""

    stage: Literal["fixture", "solution"]
    """`fixture`: untouched fixture plus hidden/; `solution`: plus solution/ as well."""
    exit_code: int | None
    """Exit status of the check; None when it timed out or could not start."""
    seconds: float = Field(ge=0)
    """Wall time of the check."""
    output_tail: str
    """The last characters of its stderr (the harness keeps stdout for its result)."""
    post_turn: str | None = None
    """Why the harness did not prove every post-turn case passed; None when it did."""


class TaskCheck(ContractModel):
    """Everything checked for one task."""

    task_id: str
    """The task."""
    kind: str | None
    """The task's kind, when its manifest could be read."""
    runs: tuple[CheckRun, ...]
    """The check runs (none when the layout was broken)."""
    certification: CertificationReport | None
    """Certification of the built, redacted fixture."""
    failures: tuple[CorpusFailure, ...]
    """Broken invariants; empty means the task is sound."""
    seconds: dict[str, float] = {}
    """Wall seconds per step (each invariant, and `build` for the workspaces), in the order run."""


class CorpusCheckReport(ContractModel):
    """Result of `check_corpus` over one committed revision."""

    repository: str
    """The repository the tasks were built from."""
    commit: GitOid
    """The commit checked."""
    tasks_dir: RelPath
    """Folder of the corpus inside the repository."""
    tasks: tuple[TaskCheck, ...]
    """One entry per task folder, sorted by id."""
    failures: tuple[CorpusFailure, ...]
    """Every failure, of every task and of the corpus as a whole."""

    @property
    def ok(self) -> bool:
        """True when at least one task was checked and nothing failed."""
        return bool(self.tasks) and not self.failures

    def raise_for_failures(self) -> None:
        """Raise TaskCorpusError listing every failure, unless the corpus is sound."""
        if not self.ok:
            lines = [str(f) for f in self.failures] or ["no task was checked"]
            raise TaskCorpusError(f"{len(lines)} task corpus failure(s):\n" + "\n".join(lines))


class LoadedTask(ContractModel):
    """A task folder on disk with its validated manifest."""

    root: Path
    """The task folder."""
    manifest: TaskManifest
    """Its `task.json`."""

    @property
    def task_id(self) -> str:
        return self.manifest.task_id

    @property
    def fixture_dir(self) -> Path:
        return self.root / self.manifest.fixture

    @property
    def solution_dir(self) -> Path:
        return self.root / self.manifest.solution_dir

    @property
    def hidden_dir(self) -> Path:
        return self.root / self.manifest.hidden_dir

    @property
    def verifier_path(self) -> Path:
        return self.root / self.manifest.verifier.asset.path


class TaskSplit(ContractModel):
    """The deterministic visible/holdout split of the corpus, as recorded in `split.json`."""

    schema_version: Literal[1] = 1
    """Version of this file's format."""
    rule: str
    """How a task is assigned, in words."""
    salt: str
    """Salt hashed in front of each task id."""
    holdout_per_mille: int = Field(ge=0, le=1000)
    """A task is held out when the first 4 bytes of its hash, scaled to 0..999, fall below this."""
    visible: tuple[Identifier, ...]
    """Tasks used for development and reported runs, sorted."""
    holdout: tuple[Identifier, ...]
    """Tasks kept back for confirmation runs, sorted."""
    lists_sha256: Sha256
    """SHA-256 of the canonical JSON of `{"holdout": [...], "visible": [...]}`."""


# --------------------------------------------------------------------------- loading


def _failure(task_id: str, invariant: Invariant, path: str, message: str) -> CorpusFailure:
    return CorpusFailure(task_id=task_id, invariant=invariant, path=path, message=message)


def _has_files(folder: Path) -> bool:
    return folder.is_dir() and bool(walk_files(folder))


def _kind_problems(manifest: TaskManifest) -> list[tuple[str, str]]:
    """Manifest fields a task of its kind must fill in: (field, problem)."""
    problems = []
    kinds = {m.kind for m in manifest.memories}
    if manifest.kind in ANSWER_KINDS and not manifest.answer_terms:
        problems.append(("answer_terms", f"a {manifest.kind} task must declare the terms that reveal its answer"))
    if manifest.kind == "continuity" and not manifest.follow_up_prompts:
        problems.append(("follow_up_prompts", "a continuity task needs at least one follow-up prompt"))
    if manifest.kind == "stale-trap" and not {"superseded", "correction"} <= kinds:
        problems.append(("memories", "a stale-trap task plants both a superseded memory and its correction"))
    if manifest.kind != "stale-trap" and "superseded" in kinds:
        problems.append(("memories", "only a stale-trap task may plant a superseded memory"))
    if not manifest.memories:
        problems.append(("memories", "plant at least one memory (a tare task plants true but unhelpful ones)"))
    return problems


def scaffold_todos(folder: Path) -> list[tuple[str, str]]:
    """Every `TODO(task new)` line left in the task folder: (file:line, the line), in file order."""
    found = []
    for rel in walk_files(folder):
        path = folder / rel
        if path.is_symlink() or (text := _text_of(path)) is None or SCAFFOLD_TODO not in text:
            continue
        found += [(f"{rel}:{n}", line.strip()) for n, line in enumerate(text.splitlines(), start=1) if SCAFFOLD_TODO in line]
    return found


def _layout_failures(folder: Path) -> tuple[LoadedTask | None, list[CorpusFailure]]:
    """Load one task folder; return the task (when its manifest is valid) and its layout failures."""
    task_id = folder.name
    todos = [_failure(task_id, "layout", where, f"unfinished scaffold: {line[:160]}") for where, line in scaffold_todos(folder)] if folder.is_dir() else []
    if todos:
        return None, todos
    manifest_path = folder / MANIFEST_NAME
    if not manifest_path.is_file():
        return None, [_failure(task_id, "layout", MANIFEST_NAME, "the task folder has no task.json; add one")]
    try:
        manifest = load_document(manifest_path, TaskManifest)
    except ContractError as error:
        return None, [_failure(task_id, "layout", MANIFEST_NAME, f"{v.field or 'document'}: {v.problem}") for v in error.violations]
    out = []
    if manifest.task_id != task_id:
        out.append(_failure(task_id, "layout", f"{MANIFEST_NAME}:task_id", f"task_id {manifest.task_id!r} differs from the folder name"))
    task = LoadedTask(root=folder, manifest=manifest)
    for label, path in (("fixture", task.fixture_dir), ("solution", task.solution_dir), ("hidden", task.hidden_dir)):
        rel = path.relative_to(folder).as_posix()
        if not _has_files(path):
            out.append(_failure(task_id, "layout", rel, f"the {label} folder is missing or empty; every task needs one"))
    if not task.verifier_path.is_file():
        out.append(_failure(task_id, "layout", manifest.verifier.asset.path, "the verifier asset does not exist"))
    out += [_failure(task_id, "layout", f"{MANIFEST_NAME}:{field}", problem) for field, problem in _kind_problems(manifest)]
    return task, out


def load_task(folder: Path) -> LoadedTask:
    """Load and validate one task folder; raise TaskCorpusError naming every layout problem."""
    task, failures = _layout_failures(folder)
    if failures or task is None:
        raise TaskCorpusError("; ".join(str(f) for f in failures))
    return task


def task_folders(tasks_root: Path) -> list[Path]:
    """Every task folder under `tasks_root` (each sub-folder not starting with '.' or '_'), sorted."""
    if not tasks_root.is_dir():
        raise TaskCorpusError(f"{tasks_root}: the task corpus folder does not exist")
    return sorted(p for p in tasks_root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


@dataclass(frozen=True)
class TaskScan:
    """Every task folder of a corpus: the ones that load, and the layout failures of the ones that do not."""

    tasks: list[LoadedTask]
    """The loadable tasks, in folder order."""
    broken: dict[str, list[CorpusFailure]]
    """Each folder that does not load (an unfinished scaffold, an invalid task.json...), with its failures."""

    def known(self) -> list[str]:
        """Every task id the corpus holds, loadable or not, sorted."""
        return sorted({*(t.task_id for t in self.tasks), *self.broken})

    def left_out(self, named: Sequence[str] | None) -> dict[str, str]:
        """The broken tasks a run of `named` (None: every task) does not name, each with its first
        problem: what a run reports and leaves out instead of refusing."""
        return {task_id: _first_problem(failures) for task_id, failures in sorted(self.broken.items())
                if named is None or task_id not in named}

    def refused(self, named: Sequence[str] | None) -> dict[str, str]:
        """The broken tasks `named` names, each with its first problem: what refuses a run of them."""
        return {task_id: _first_problem(self.broken[task_id]) for task_id in named or [] if task_id in self.broken}

    def select(self, named: Sequence[str] | None) -> list[LoadedTask]:
        """The loadable tasks of `named` (None: every loadable task), in the order named; TaskCorpusError
        names each named task that is broken or unknown (only those: another task's state is no reason)."""
        if named is None:
            return list(self.tasks)
        refused = self.refused(named)
        unknown = [t for t in named if t not in self.broken and t not in {k.task_id for k in self.tasks}]
        problems = [f"task {t}: {why}" for t, why in refused.items()]
        if unknown:
            problems.append(f"unknown task(s) {', '.join(unknown)}; known tasks: {', '.join(self.known())}")
        if problems:
            raise TaskCorpusError("; ".join(problems))
        by_id = {t.task_id: t for t in self.tasks}
        return [by_id[t] for t in named]


def _first_problem(failures: Sequence[CorpusFailure]) -> str:
    """A broken task's first failure in one short line, with the count of the others."""
    first = failures[0]
    more = f" (and {len(failures) - 1} more; `memtrial task check {first.task_id}` lists them)" if len(failures) > 1 else ""
    return f"{first.path}: {first.message[:200]}{more}"


def scan_tasks(tasks_root: Path) -> TaskScan:
    """Every task folder under `tasks_root`, loaded or with its layout failures; never raises for one
    broken task (TaskCorpusError only when the corpus folder itself is missing)."""
    tasks, broken = [], {}
    for folder in task_folders(tasks_root):
        task, failures = _layout_failures(folder)
        if failures or task is None:
            broken[folder.name] = failures
        else:
            tasks.append(task)
    return TaskScan(tasks=tasks, broken=broken)


def load_tasks(tasks_root: Path) -> list[LoadedTask]:
    """Load every task under `tasks_root`; raise TaskCorpusError listing every layout problem (a run
    reads the corpus with `scan_tasks`, so one broken task blocks only where it is named)."""
    tasks, problems = [], []
    for folder in task_folders(tasks_root):
        task, failures = _layout_failures(folder)
        problems += failures
        if task is not None:
            tasks.append(task)
    if problems:
        raise TaskCorpusError("; ".join(str(f) for f in problems))
    if not tasks:
        raise TaskCorpusError(f"{tasks_root}: the task corpus holds no task")
    return tasks


# --------------------------------------------------------------------------- workspaces and runs


class OverlayRefused(MemtrialError):
    """A path the overlay must write runs through a symlink, or something else stands where a
    runner-owned folder or file goes; nothing was written through it."""


def _refusal(shown: str, rel: str, fd: int, name: str) -> OverlayRefused:
    """The error for `name` (at `shown` in the destination, opened under `fd`) blocking `rel`."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except OSError as error:
        return OverlayRefused(f"{shown}: cannot be opened on the way to {rel}: {error}")
    if stat.S_ISLNK(info.st_mode):
        return OverlayRefused(f"{shown}: a symlink (to {os.readlink(name, dir_fd=fd)!r}) stands where the runner "
                              f"writes {rel}; the overlay never follows a symlink")
    kind = "a folder" if stat.S_ISDIR(info.st_mode) else "not a folder"
    return OverlayRefused(f"{shown}: {kind} stands where the runner writes {rel}")


def _open_folder(fd: int, name: str, shown: str, rel: str) -> int:
    """Open folder `name` under `fd` (creating it), never through a symlink."""
    try:
        os.mkdir(name, 0o755, dir_fd=fd)
    except FileExistsError:
        pass
    try:
        return os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
    except OSError:
        raise _refusal(shown, rel, fd, name) from None


def _write_file(src: Path, fd: int, name: str, shown: str, rel: str) -> None:
    """Put a copy of `src` (content, mode, times; a symlink as a symlink) at `name` under `fd`."""
    try:
        info = os.stat(name, dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        info = None
    if info is not None:
        if not stat.S_ISREG(info.st_mode):
            raise _refusal(shown, rel, fd, name)
        os.unlink(name, dir_fd=fd)
    if src.is_symlink():
        os.symlink(os.readlink(src), name, dir_fd=fd)
        return
    source_info = src.stat()
    out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
    try:
        with open(src, "rb") as reader, os.fdopen(os.dup(out), "wb") as writer:
            shutil.copyfileobj(reader, writer)
        os.fchmod(out, stat.S_IMODE(source_info.st_mode))
        os.utime(out, ns=(source_info.st_atime_ns, source_info.st_mtime_ns))
    finally:
        os.close(out)


def overlay(source: Path, dest: Path) -> list[str]:
    """Copy every file of `source` over `dest` (creating folders); return the relative paths copied.

    No component of a path written under `dest` is followed if it is a symlink: every folder is
    opened with O_NOFOLLOW from the one above it, and a file is created with O_EXCL. A symlink
    (dangling or not) where a folder or file goes, a file where a folder goes or a folder where a
    file goes raises OverlayRefused naming it; nothing outside `dest` is ever written.
    """
    copied = walk_files(source)
    root = os.open(dest, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    try:
        for rel in copied:
            parts = rel.split("/")
            fd = os.dup(root)
            try:
                for depth, name in enumerate(parts[:-1], start=1):
                    folder = _open_folder(fd, name, "/".join(parts[:depth]), rel)
                    os.close(fd)
                    fd = folder
                _write_file(source / rel, fd, parts[-1], rel, rel)
            finally:
                os.close(fd)
    finally:
        os.close(root)
    return copied


def _verifier_argv(task: LoadedTask) -> list[str]:
    verifier = str(task.verifier_path.resolve())
    return [arg.replace("{verifier}", verifier) for arg in task.manifest.check_command]


def _check_argv(task: LoadedTask, nonce: str) -> list[str]:
    verifier = str(task.verifier_path.resolve())
    verifier_argv = tuple(arg.replace("{verifier}", verifier) for arg in task.manifest.check_command)
    return list(harness_argv(nonce, task.hidden_dir, verifier_argv, str(HARNESS_DIR)))


def _judge_on_host(task: LoadedTask, workspace: Path, nonce: str, env: dict[str, str]) -> tuple[bytes, bytes]:
    """A judged-apart task's post-turn tests on the host (authored code only): the judge over
    hidden/ and the shim over `workspace`, joined by a socketpair, sharing a temporary folder;
    (the judge's stdout, both parties' stderr)."""
    jail_end, judge_end = socket.socketpair()
    with tempfile.TemporaryDirectory(prefix="judged-") as scratch:
        shared = {**env, "JAIL_SCRATCH": scratch, "JAIL_WORKSPACE": str(workspace.resolve())}
        argv = jail_argv(task.manifest.jail, str(HARNESS_DIR))
        jail = subprocess.Popen([sys.executable, *argv[1:]] if argv[0] == "python3" else list(argv), cwd=workspace, env=shared,
                                stdin=jail_end.fileno(), stdout=jail_end.fileno(), stderr=subprocess.PIPE)
        try:
            judge = subprocess.Popen([sys.executable, "-I", "-B", str(HARNESS_DIR / "judge.py"), nonce, *test_files(task.hidden_dir)],
                                     cwd=task.hidden_dir, env={**shared, "JAIL_FD": str(judge_end.fileno())},
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     pass_fds=(judge_end.fileno(),))
            jail_end.close()
            judge_end.close()
            try:
                stdout, stderr = judge.communicate(timeout=task.manifest.verifier.timeout_seconds)
            except subprocess.TimeoutExpired:
                judge.kill()
                stdout, stderr = judge.communicate()
                stderr += b"\n[judge timed out]"
        finally:
            jail.kill()
            _, jail_err = jail.communicate()
            jail_end.close()
            judge_end.close()
    return stdout, stderr + jail_err


def run_check(task: LoadedTask, workspace: Path, stage: Literal["fixture", "solution"]) -> CheckRun:
    """Run the task's check (the post-turn harness, then the verifier) on the host with `workspace`
    as cwd; never raises for a failing check.

    Only for authored code: `check_corpus` runs it on a fixture and a solution built from the
    committed corpus (the task author's own files, the same trust as the verifier itself), never
    on anything an agent wrote. An attempt's check runs in a sandbox (`tasks_lib.arm.sandboxed_check`).
    """
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    env.pop("PYTHONPATH", None)
    nonce = new_nonce()
    started = time.monotonic()
    stdout = b""
    apart = task.manifest.judge == "apart"
    judged = b""
    if apart:
        stdout, judged = _judge_on_host(task, workspace, nonce, env)
    try:
        done = subprocess.run(
            _check_argv(task, nonce) if not apart else _verifier_argv(task), cwd=workspace, env=env, stdin=subprocess.DEVNULL, capture_output=True,
            timeout=task.manifest.verifier.timeout_seconds, check=False,
        )
        code, output = done.returncode, judged + done.stderr
        stdout = stdout if apart else done.stdout
    except subprocess.TimeoutExpired as error:
        code, output = None, (error.stderr or b"") + b"\n[timed out]"
    except OSError as error:
        code, output = None, f"[cannot start the check: {error}]".encode()
    tail = output.decode("utf-8", errors="replace")[-OUTPUT_TAIL_CHARS:]
    proof = verdict(stdout.decode("utf-8", errors="replace"), nonce, expected_cases(task.hidden_dir))
    return CheckRun(stage=stage, exit_code=code, seconds=round(time.monotonic() - started, 3), output_tail=tail,
                    post_turn=proof.problem)


def build_workspace(repo: Path, commit: str, task: LoadedTask, task_subdir: str, dest: Path) -> list[str]:
    """Build the task's fixture (an upstream task's composed fixture) from git objects into `dest` and
    redact it; return removed paths."""
    origin = fixture_origin(repo, commit, task_subdir, task.manifest)
    build = build_tree(origin.repo, origin.commit, dest, subdir=origin.subdir)
    receipt = redact_tree(dest, build.corpus_id)
    return [item.path for item in receipt.removed]


# --------------------------------------------------------------------------- invariants


def check_check_runs(task: LoadedTask, fixture_run: CheckRun, solution_run: CheckRun) -> list[CorpusFailure]:
    """Invariants 1 and 2 from the two runs."""
    out = []
    tid, m = task.task_id, task.manifest
    if fixture_run.exit_code == 0 and fixture_run.post_turn is None:
        out.append(_failure(tid, "fails-on-fixture", m.fixture, "the check already passes on the untouched fixture with hidden/ applied; a task that passes with no work is broken"))
    if solution_run.exit_code != 0:
        status = "timed out or could not start" if solution_run.exit_code is None else f"exits {solution_run.exit_code}"
        out.append(_failure(tid, "passes-with-solution", m.solution_dir, f"the check {status} with solution/ and hidden/ applied: {solution_run.output_tail.strip()[-300:]!r}"))
    if solution_run.exit_code == 0 and solution_run.post_turn is not None:
        if m.judge == "apart":  # the verifier runs the visible suite only: the judge's tests are what the solution fails
            out.append(_failure(tid, "passes-with-solution", m.solution_dir, f"the solution does not pass the post-turn tests judged apart: {solution_run.post_turn}"))
        else:
            out.append(_failure(tid, "passes-with-solution", m.hidden_dir, f"the post-turn harness did not prove the solution: {solution_run.post_turn}"))
    for rel in walk_files(task.solution_dir):
        if not any(within(rel, allowed) for allowed in m.allowed_output_paths):
            out.append(_failure(tid, "passes-with-solution", f"{m.solution_dir}/{rel}", "the solution writes outside allowed_output_paths, so the mutation audit would void it"))
    return out


def _covers(allowed: str, entry: str) -> bool:
    """True when allowed output path `allowed` lets the agent change `entry` (a file, or a folder ending in /)."""
    allowed = allowed.rstrip("/")
    if entry.endswith("/"):
        folder = entry.rstrip("/")
        return within(allowed, folder) or within(folder, allowed)
    return within(entry, allowed)


def check_post_turn_owned(task: LoadedTask) -> list[CorpusFailure]:
    """Invariant 7: hidden/ holds post-turn cases, and no allowed output path covers a post-turn test
    file or an entry point the tests rely on (`tasks_lib.corpus.post_turn.entry_points`)."""
    tid, m = task.task_id, task.manifest
    if not expected_cases(task.hidden_dir):
        return [_failure(tid, "post-turn-owned", m.hidden_dir, "hidden/ holds no post-turn test case (test*.py with TestCase methods, "
                                                               "*.test.js with top-level test() calls, or *.sh); add one")]
    return [
        _failure(tid, "post-turn-owned", f"{MANIFEST_NAME}:allowed_output_paths", f"{allowed!r} lets the agent change {entry!r}, which the "
                 "post-turn tests rely on; narrow it to the files the agent may change")
        for allowed in m.allowed_output_paths for entry in entry_points(task.hidden_dir) if _covers(allowed, entry)
    ]


def _symlink_escapes(root: Path, rel: str) -> bool:
    target = os.readlink(root / rel)
    if os.path.isabs(target):
        return True
    resolved = os.path.normpath(os.path.join(os.path.dirname(rel), target))
    return resolved == ".." or resolved.startswith("../")


def _nested_in_fixture(task: LoadedTask) -> list[str]:
    """Runner-owned folders and files of the task that lie inside its fixture folder."""
    fixture = PurePosixPath(task.manifest.fixture)
    owned = (task.manifest.hidden_dir, task.manifest.solution_dir, task.manifest.verifier.asset.path, MANIFEST_NAME)
    return [p for p in owned if PurePosixPath(p) == fixture or fixture in PurePosixPath(p).parents or str(fixture) == "."]


def check_hidden_unreachable(task: LoadedTask, workspace: Path) -> tuple[list[CorpusFailure], set[str]]:
    """Invariant 3 over the built fixture; also return the fixture paths that duplicate a hidden file."""
    tid, m = task.task_id, task.manifest
    out = [_failure(tid, "hidden-unreachable", p, f"{p} lies inside the fixture folder {m.fixture!r}, so the agent would see it") for p in _nested_in_fixture(task)]
    hidden_files = walk_files(task.hidden_dir)
    hidden_paths = set(hidden_files)
    secret_digests = {sha256_file(task.hidden_dir / rel): f"{m.hidden_dir}/{rel}" for rel in hidden_files if (task.hidden_dir / rel).stat().st_size > 0}
    secret_digests[sha256_file(task.verifier_path)] = m.verifier.asset.path
    verifier_rel = m.verifier.asset.path
    duplicates: set[str] = set()
    for rel in walk_files(workspace):
        path = workspace / rel
        where = f"{m.fixture}/{rel}"
        if path.is_symlink():
            if _symlink_escapes(workspace, rel):
                out.append(_failure(tid, "hidden-unreachable", where, f"symlink to {os.readlink(path)!r} escapes the fixture tree"))
            continue
        if rel in hidden_paths:
            duplicates.add(rel)
            out.append(_failure(tid, "hidden-unreachable", where, f"has the same path as the hidden file {m.hidden_dir}/{rel}; move or delete it"))
        elif rel == verifier_rel:
            out.append(_failure(tid, "hidden-unreachable", where, "has the same path as the runner-owned verifier"))
        if path.stat().st_size > 0:
            twin = secret_digests.get(sha256_file(path))
            if twin is not None:
                duplicates.add(rel)
                out.append(_failure(tid, "hidden-unreachable", where, f"has the same content as runner-owned {twin}; delete it from the fixture"))
    return out, duplicates


def term_regex(term: str) -> re.Pattern[str]:
    """Case-insensitive pattern for an answer term (folded as text is): whitespace-tolerant, not inside a longer word or number."""
    term = fold_text(term).strip()
    body = r"\s+".join(re.escape(w) for w in term.split())
    head = r"(?<![A-Za-z0-9])" if term[:1].isalnum() else ""
    tail = r"(?![A-Za-z0-9])" if term[-1:].isalnum() else ""
    return re.compile(head + body + tail, re.IGNORECASE)


def _is_comment(line: str, offset: int) -> bool:
    if COMMENT_START.match(line):
        return True
    inline = INLINE_COMMENT.search(line)
    return inline is not None and inline.start() < offset


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9]+", text.lower())


def _ngrams(words: Sequence[str], n: int = NARRATION_NGRAM) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _memory_ngrams(memories: Iterable[MemorySpec]) -> set[tuple[str, ...]]:
    grams: set[tuple[str, ...]] = set()
    for memory in memories:
        grams |= _ngrams(_words(memory.text))
    return grams


def _text_of(path: Path) -> str | None:
    return decode_text(path.read_bytes())


def scan_text(task_id: str, where: str, text: str, terms: Sequence[str], memory_grams: set[tuple[str, ...]], code: bool) -> list[CorpusFailure]:
    """Answer terms anywhere in `text` (folded first); for code files, comments that repeat a planted memory."""
    out = []
    text = fold_text(text)
    patterns = [(t, term_regex(t)) for t in terms if t.strip()]
    for number, line in enumerate(text.splitlines(), start=1):
        for term, pattern in patterns:
            match = pattern.search(line)
            if match is None:
                continue
            how = "a code comment narrates the answer" if code and _is_comment(line, match.start()) else "reveals the answer"
            out.append(_failure(task_id, "no-answer-leak", f"{where}:{number}", f"{how}: contains answer term {term!r}"))
        if code and memory_grams and _is_comment(line, len(line)) and _ngrams(_words(line)) & memory_grams:
            out.append(_failure(task_id, "no-answer-leak", f"{where}:{number}", "a code comment repeats a planted memory's wording"))
    return out


def harm_states(manifest: TaskManifest) -> list[tuple[str, tuple[MemorySpec, ...]]]:
    """(field, memories) of each harm variant the manifest carries, in HARM_VARIANTS order."""
    if manifest.harm is None:
        return []
    return [(f"harm.{name}", getattr(manifest.harm, name)) for name in HARM_VARIANTS]


ANSWER_FREE_STATES = ("placebo_memories", "harm.absent", "harm.superseded", "harm.adjacent")
"""Planted states that must not hold the answer: the placebo (irrelevant by definition) and every harm
variant without the key memory (`harm.contradictory` holds the new value beside the old one, like `on`)."""


def check_memories_hold_no_answer(task: LoadedTask) -> list[CorpusFailure]:
    """Invariant 4 over the planted states that must not give the answer away (ANSWER_FREE_STATES)."""
    m = task.manifest
    states = [("placebo_memories", m.placebo_memories), *harm_states(m)]
    out = []
    for field_name, memories in states:
        if field_name not in ANSWER_FREE_STATES:
            continue
        for i, memory in enumerate(memories):
            out += scan_text(task.task_id, f"{MANIFEST_NAME}:{field_name}[{i}]", memory.text, m.answer_terms, set(), code=False)
    return out


def check_no_answer_leak(task: LoadedTask, workspace: Path, skip: set[str]) -> list[CorpusFailure]:
    """Invariant 4 over the built fixture, the instruction and the follow-ups."""
    m = task.manifest
    grams = _memory_ngrams([*m.memories, *m.placebo_memories, *(x for _, ms in harm_states(m) for x in ms)])
    out = scan_text(task.task_id, f"{MANIFEST_NAME}:instruction", m.instruction, m.answer_terms, set(), code=False)
    for i, prompt in enumerate(m.follow_up_prompts):
        out += scan_text(task.task_id, f"{MANIFEST_NAME}:follow_up_prompts[{i}]", prompt, m.answer_terms, set(), code=False)
    out += check_memories_hold_no_answer(task)
    for rel in walk_files(workspace):
        path = workspace / rel
        if rel in skip or path.is_symlink() or (text := _text_of(path)) is None:
            continue
        is_code = not rel.lower().endswith((".md", ".txt", ".rst", ".csv", ".json", ".jsonl", ".ndjson"))
        out += scan_text(task.task_id, f"{m.fixture}/{rel}", text, m.answer_terms, grams, code=is_code)
    return out


def _term_test(terms: Sequence[str]) -> TermTest | None:
    patterns = [term_regex(t) for t in terms if t.strip()]
    return (lambda text: any(p.search(fold_text(text)) for p in patterns)) if patterns else None


def check_transcripts(task: LoadedTask) -> list[CorpusFailure]:
    """The experience feed's invariants (see `tasks_lib.corpus.feed`): pinned bytes, turns outside the
    task's agent-visible and runner-owned trees, the key fact said in passing (`certification-clean`),
    answer terms only in key turns and no curated memory copied (`no-answer-leak`), and a clean
    certification of the transcripts as an evidence surface."""
    tid, m = task.task_id, task.manifest
    out: list[CorpusFailure] = []
    has_term, grams = _term_test(m.answer_terms), _memory_ngrams(m.memories)
    owned = (m.fixture, m.solution_dir, m.hidden_dir)
    folders: set[Path] = set()
    for ref in m.transcripts:
        if any(within(ref.path, root) for root in owned):
            out.append(_failure(tid, "layout", ref.path, "a transcript must lie outside the fixture, solution and hidden folders; move it to transcripts/"))
            continue
        try:
            _, turns = load_transcript(task.root, ref)
        except FeedError as error:
            invariant: Invariant = "digests-match" if "sha256 is" in str(error) else "layout"
            out.append(_failure(tid, invariant, ref.path, str(error)))
            continue
        out += [_failure(tid, "certification-clean", ref.path, f"key fact stated as a headline: {why}") for why in headline_problems(turns, ref, has_term)]
        out += [_failure(tid, "no-answer-leak", ref.path, why) for why in leak_problems(turns, ref, has_term, grams, lambda text: _ngrams(_words(text)))]
        folders.add((task.root / ref.path).parent)
    for folder in sorted(folders):
        rel = folder.relative_to(task.root).as_posix()
        try:
            report = certify(folder, output_paths=m.allowed_output_paths)
        except MemtrialError as error:
            out.append(_failure(tid, "certification-clean", rel, f"certification could not run: {error}"))
            continue
        out += [_failure(tid, "certification-clean", f"{rel}/{f.path}", f"{f.kind} ({f.rule}): {f.detail}") for f in report.findings]
    return out


def check_certification(task: LoadedTask, workspace: Path, removed: list[str]) -> tuple[CertificationReport | None, list[CorpusFailure]]:
    """Invariant 5: the redacted fixture and the agent-visible texts certify clean."""
    tid, m = task.task_id, task.manifest
    out = [_failure(tid, "certification-clean", f"{m.fixture}/{rel}", "redaction removed this hand-written agent memory file; delete it from the task") for rel in removed]
    texts = {"instruction": m.instruction}
    texts.update({f"follow_up_prompts[{i}]": p for i, p in enumerate(m.follow_up_prompts)})
    try:
        report = certify(workspace, challenge_texts=texts, runner_owned_names=(PurePosixPath(m.verifier.asset.path).name,), output_paths=m.allowed_output_paths)
    except MemtrialError as error:
        return None, out + [_failure(tid, "certification-clean", m.fixture, f"certification could not run: {error}")]
    for finding in report.findings:
        where = f"{m.fixture}/{finding.path}" if finding.surface != "challenge" else f"{MANIFEST_NAME}:{finding.path}"
        out.append(_failure(tid, "certification-clean", where, f"{finding.kind} ({finding.rule}): {finding.detail}"))
    if report.verdict != "clean" and not report.findings:
        out.append(_failure(tid, "certification-clean", m.fixture, f"certification verdict is {report.verdict}, not clean"))
    return report, out


def check_digests(task: LoadedTask) -> list[CorpusFailure]:
    """Invariant 6: every digest the manifest pins matches its file."""
    ref = task.manifest.verifier.asset
    actual = sha256_file(task.verifier_path)
    if actual == ref.sha256:
        return []
    return [_failure(task.task_id, "digests-match", ref.path, f"sha256 is {actual} but task.json pins {ref.sha256}; re-pin verifier.asset.sha256")]


# --------------------------------------------------------------------------- the corpus check


class _Stopwatch:
    """Adds the wall seconds of each timed step to `seconds` under the step's name."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self.seconds[name] = round(self.seconds.get(name, 0.0) + now - self._last, 3)
        self._last = now

    def record(self, name: str, seconds: float) -> None:
        """Record a step timed on its own (one of several run at once); the next lap starts now."""
        self.seconds[name] = round(seconds, 3)
        self._last = time.monotonic()


def check_task(repo: Path, commit: str, tasks_subdir: str, folder: Path, scratch: Path, declared: KeyLanes | None = None) -> TaskCheck:
    """Every invariant for the task in `folder` (a tree built from git objects); `key-lanes` when `declared` is given."""
    watch = _Stopwatch()
    task, layout = _layout_failures(folder)
    watch.lap("layout")
    if layout or task is None:
        return TaskCheck(task_id=folder.name, kind=task.manifest.kind if task else None, runs=(), certification=None,
                         failures=tuple(layout), seconds=watch.seconds)
    try:
        return _check_sound_layout(repo, commit, f"{tasks_subdir}/{folder.name}", task, scratch, declared, watch)
    except (MemtrialError, OSError) as error:
        failure = _failure(task.task_id, "layout", task.manifest.fixture, f"cannot build or prepare the workspace: {error}")
        return TaskCheck(task_id=task.task_id, kind=task.manifest.kind, runs=(), certification=None, failures=(failure,), seconds=watch.seconds)


def _check_sound_layout(repo: Path, commit: str, task_subdir: str, task: LoadedTask, scratch: Path,
                        declared: KeyLanes | None, watch: _Stopwatch) -> TaskCheck:
    """Invariants 1-8 for a task whose folder and manifest are complete, each timed by `watch`."""
    failures = check_digests(task)
    watch.lap("digests-match")
    plain = scratch / "fixture"
    removed = build_workspace(repo, commit, task, task_subdir, plain)
    watch.lap("build")
    hidden_failures, duplicates = check_hidden_unreachable(task, plain)
    failures += hidden_failures
    watch.lap("hidden-unreachable")
    failures += check_no_answer_leak(task, plain, duplicates)
    watch.lap("no-answer-leak")
    report, cert_failures = check_certification(task, plain, removed)
    failures += cert_failures
    watch.lap("certification-clean")
    if task.manifest.judge != "apart":  # a judged-apart task's tests stay with the judge
        overlay(task.hidden_dir, plain)
    solved = scratch / "solution"
    build_workspace(repo, commit, task, task_subdir, solved)
    overlay(task.solution_dir, solved)
    if task.manifest.judge != "apart":
        overlay(task.hidden_dir, solved)
    watch.lap("build")
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="memtrial-check") as pool:  # two independent subprocesses
        fixture_future = pool.submit(run_check, task, plain, "fixture")
        solution_run = run_check(task, solved, "solution")
        fixture_run = fixture_future.result()
    watch.record("fails-on-fixture", fixture_run.seconds)
    watch.record("passes-with-solution", solution_run.seconds)
    failures += check_check_runs(task, fixture_run, solution_run)
    failures += check_post_turn_owned(task)
    watch.lap("post-turn-owned")
    if declared is not None and (problem := key_lane_problem(task.task_id, task.manifest, declared)) is not None:
        failures.append(_failure(task.task_id, "key-lanes", f"{KEY_LANES_NAME}:tasks.{task.task_id}", problem))
    if declared is not None:
        watch.lap("key-lanes")
    failures += check_transcripts(task)
    if task.manifest.transcripts:
        watch.lap("transcripts")
    return TaskCheck(task_id=task.task_id, kind=task.manifest.kind, runs=(fixture_run, solution_run), certification=report,
                     failures=tuple(failures), seconds=watch.seconds)


def _declared_lanes(built_root: Path, subdir: str, task_ids: Sequence[str], whole: bool) -> tuple[KeyLanes | None, list[CorpusFailure]]:
    """The committed key-lane declaration, or the corpus-level failure that it cannot be read or names unknown tasks."""
    try:
        declared = read_key_lanes(built_root)
    except CalibrationPlanError as error:
        return None, [_failure("(corpus)", "key-lanes", f"{subdir}/{KEY_LANES_NAME}", str(error).split(": ", 1)[-1])]
    extra = sorted(set(declared.tasks) - set(task_ids)) if whole else []
    return declared, [_failure("(corpus)", "key-lanes", f"{subdir}/{KEY_LANES_NAME}", f"declares {extra}, which are not task folders; remove them")] if extra else []


def _tasks_subdir(tasks_root: Path, repo_root: Path) -> str:
    root = tasks_root if tasks_root.is_absolute() else repo_root / tasks_root
    try:
        return root.resolve().relative_to(repo_root.resolve()).as_posix()
    except ValueError:
        raise TaskCorpusError(f"{tasks_root}: the task corpus must live inside the repository {repo_root}") from None


def uncommitted_folders(tasks_root: Path, committed: set[str]) -> list[CorpusFailure]:
    """Task folders present in the working tree at `tasks_root` but not among the `committed` folder
    names of the checked revision. Reads the checkout itself, so it runs where the checkout is (the
    flow process), never on a worker that has only the corpus pack."""
    if not tasks_root.is_dir():
        return []
    return [
        _failure(p.name, "layout", p.name, "the task folder is not committed at the checked revision; fixtures are built from git objects, so commit it")
        for p in task_folders(tasks_root) if p.name not in committed
    ]


def edited_folders(tasks_root: Path, repo: Path, commit: str, subdir: str) -> list[CorpusFailure]:
    """Committed task folders whose working tree differs from `commit` (a changed, deleted or untracked
    file): `check_corpus` reads the commit's git objects, while a run loads the working tree's task.json
    and refuses one that differs, so such an edit is checked by neither until it is committed. One
    failure per folder, naming the files and, when the edit breaks the task, why (what a run would say)."""
    def listed(*args: str) -> list[str]:
        done = subprocess.run(["git", "-C", str(repo), *args, "--", subdir], capture_output=True, check=False)
        return [p for p in done.stdout.decode(errors="replace").split("\0") if p] if done.returncode == 0 else []

    changed = listed("diff", "--name-only", "-z", commit) + listed("ls-files", "--others", "--exclude-standard", "-z")
    by_folder: dict[str, list[str]] = {}
    for path in changed:
        folder, _, rest = path.removeprefix(f"{subdir}/").partition("/")
        if rest:
            by_folder.setdefault(folder, []).append(rest)
    committed = committed_folders(repo, commit, subdir)
    scan = scan_tasks(tasks_root) if tasks_root.is_dir() else TaskScan(tasks=[], broken={})
    out = []
    for folder, files in sorted(by_folder.items()):
        if folder not in committed:
            continue  # an uncommitted folder is `uncommitted_folders`'
        broken = f"; as edited it cannot run: {_first_problem(scan.broken[folder])}" if folder in scan.broken else ""
        shown = ", ".join(sorted(files)[:3]) + (f" and {len(files) - 3} more" if len(files) > 3 else "")
        out.append(_failure(folder, "layout", folder, f"edited in the working tree since {commit[:12]} ({shown}), which this check "
                                                      f"read from git objects{broken}; commit the edit to check it, or revert it"))
    return out


def committed_folders(repo: Path, commit: str, subdir: str) -> set[str]:
    """Names of the task folders of `subdir` at `commit` (read from git objects). Raises TaskCorpusError
    when the commit has no such folder."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-tree", "-d", "--name-only", "-z", f"{commit}:{subdir}"],
                            capture_output=True, check=False)
    if listed.returncode != 0:
        raise TaskCorpusError(f"{repo}: commit {commit[:12]} has no folder {subdir} "
                              f"({listed.stderr.decode(errors='replace').strip()}); commit the task corpus")
    return {name for name in listed.stdout.decode().split("\0") if name and not name.startswith((".", "_"))}


def check_packed_corpus(store: ArtifactStore, pack: CorpusPack, only: Sequence[str] | None = None) -> CorpusCheckReport:
    """`check_corpus` on a corpus pack (fetched from `store` once per machine), of every task or of the
    task folders in `only`: what a process that has only the artifact root can check. The report names
    the pack (`pack_label`), not this machine's pack cache; folders the checkout holds uncommitted are
    not in a pack (see `uncommitted_folders`)."""
    checkout = open_corpus_pack(store, pack)
    report = check_corpus(checkout / pack.tasks_subdir, checkout, pack.commit, only=only)
    return report.model_copy(update={"repository": pack_label(pack)})


def check_corpus(tasks_root: Path, repo_root: Path, revision: str = "HEAD", *, workers: int | None = None,
                 only: Sequence[str] | None = None) -> CorpusCheckReport:
    """Prove every invariant for every task of `revision` (or the tasks named in `only`), each in fresh
    workspaces built from git objects.

    `tasks_root` is the corpus folder (absolute, or relative to `repo_root`). Returns the report;
    call `raise_for_failures()` on it to fail loudly. Raises UnknownCommitError/CorpusError when the
    revision or the corpus folder cannot be built at all. A task named in `only` that the revision
    does not hold is a `layout` failure.
    """
    repo_root = Path(repo_root)
    tasks_root = Path(tasks_root) if Path(tasks_root).is_absolute() else repo_root / tasks_root
    subdir = _tasks_subdir(tasks_root, repo_root)
    with tempfile.TemporaryDirectory(prefix="memtrial-taskcorpus-", dir=ram_scratch()) as tmp:
        scratch = Path(tmp)
        build = build_tree(repo_root, revision, scratch / "tasks", subdir=subdir)
        commit = build.source.commit
        folders = task_folders(scratch / "tasks")
        all_ids = [p.name for p in folders]
        corpus_failures = uncommitted_folders(tasks_root, {p.name for p in folders})
        if only is not None:
            wanted = set(only)
            corpus_failures = [f for f in corpus_failures if f.task_id in wanted]
            corpus_failures += [_failure(t, "layout", t, f"no task folder {t!r} at {commit[:12]} under {subdir}")
                                for t in sorted(wanted - set(all_ids)) if t not in {f.task_id for f in corpus_failures}]
            folders = [p for p in folders if p.name in wanted]
        if not folders and not corpus_failures:
            corpus_failures.append(_failure("(corpus)", "layout", subdir, "the corpus holds no task; a check over nothing cannot pass"))
        declared, lane_failures = _declared_lanes(scratch / "tasks", subdir, all_ids, only is None) if folders else (None, [])
        corpus_failures += lane_failures

        def one(indexed: tuple[int, Path]) -> TaskCheck:
            index, folder = indexed
            work = scratch / "work" / f"{index:03d}"
            work.mkdir(parents=True)
            return check_task(repo_root, commit, subdir, folder, work, declared)

        with ThreadPoolExecutor(max_workers=workers or min(4, os.cpu_count() or 1)) as pool:
            checks = list(pool.map(one, enumerate(folders)))
    failures = corpus_failures + [f for c in checks for f in c.failures]
    return CorpusCheckReport(repository=str(repo_root), commit=commit, tasks_dir=subdir, tasks=tuple(checks), failures=tuple(failures))


# --------------------------------------------------------------------------- visible/holdout split


def holdout_score(task_id: str, salt: str = SPLIT_SALT) -> int:
    """0..999 from sha256(salt + ':' + task_id); a task is held out when this is below the threshold."""
    digest = hashlib.sha256(f"{salt}:{task_id}".encode()).digest()
    return int.from_bytes(digest[:4], "big") * 1000 // 2**32


def _lists_digest(visible: Sequence[str], holdout: Sequence[str]) -> str:
    canonical = json.dumps({"holdout": list(holdout), "visible": list(visible)}, sort_keys=True, separators=(",", ":"))
    return sha256_bytes(canonical.encode())


def compute_split(task_ids: Iterable[str], salt: str = SPLIT_SALT, holdout_per_mille: int = HOLDOUT_PER_MILLE) -> TaskSplit:
    """The deterministic split of `task_ids`: it depends on each id and the salt only."""
    ids = sorted(set(task_ids))
    holdout = tuple(t for t in ids if holdout_score(t, salt) < holdout_per_mille)
    visible = tuple(t for t in ids if t not in holdout)
    rule = f"held out when int(sha256('{salt}:' + task_id)[:4 bytes]) * 1000 // 2**32 < {holdout_per_mille}"
    return TaskSplit(rule=rule, salt=salt, holdout_per_mille=holdout_per_mille, visible=visible, holdout=holdout, lists_sha256=_lists_digest(visible, holdout))


def load_split(path: Path) -> TaskSplit:
    """Read `split.json`; raise TaskCorpusError when it is missing, malformed or its digest is wrong."""
    try:
        split = TaskSplit.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise TaskCorpusError(f"{path}: the split file does not exist; write it with write_split") from None
    except ValueError as error:
        raise TaskCorpusError(f"{path}: not a valid split file ({error})") from None
    if split.lists_sha256 != _lists_digest(split.visible, split.holdout):
        raise TaskCorpusError(f"{path}: lists_sha256 does not match the visible/holdout lists; the lists were edited by hand")
    return split


def write_split(tasks_root: Path) -> TaskSplit:
    """Compute the split of the task folders under `tasks_root` and write `split.json` there."""
    split = compute_split(p.name for p in task_folders(tasks_root))
    (tasks_root / SPLIT_NAME).write_text(json.dumps(split.model_dump(mode="json"), indent=2) + "\n", encoding="utf-8")
    return split


def check_split(tasks_root: Path) -> list[str]:
    """Problems with the recorded split: unreadable, or not the split the rule gives for the current tasks."""
    try:
        recorded = load_split(tasks_root / SPLIT_NAME)
    except TaskCorpusError as error:
        return [str(error)]
    expected = compute_split((p.name for p in task_folders(tasks_root)), recorded.salt, recorded.holdout_per_mille)
    if recorded != expected:
        return [f"{tasks_root / SPLIT_NAME}: the recorded split differs from the rule's split of the current tasks; regenerate it with write_split"]
    return []
