"""Authoring a task: scaffold its folder, and snapshot the working tree so it can be checked uncommitted.

`scaffold_task` writes a task folder whose manifest is valid but whose every part the author must
write carries the `TODO(task new)` marker, so the corpus check fails it as `layout`, naming each
file and line, until all of them are filled in. The verifier is written for the chosen toolchain
and pinned, so `digests-match` holds from the start.

`snapshot_commit` records the working tree of a corpus folder as a commit object (a private
index, HEAD as parent) without touching HEAD, the branch or the index: fixtures are built from git
objects, and an author checks a task before committing it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, get_args

from tasks_lib.contracts import TaskKind, TaskManifest
from tasks_lib.corpus.build import resolve_commit
from tasks_lib.corpus.tasks import ANSWER_KINDS, MANIFEST_NAME, SCAFFOLD_TODO, TaskCorpusError
from tasks_lib.errors import ContractError, Violation
from tasks_lib.trees import sha256_bytes

Toolchain = Literal["python", "node", "sh"]
TOOLCHAINS: tuple[str, ...] = get_args(Toolchain)
TASK_KINDS: tuple[str, ...] = get_args(TaskKind)
TASK_ID = re.compile(r"^[a-z0-9][a-z0-9-]{2,63}$")
TODO = SCAFFOLD_TODO


@dataclass(frozen=True)
class _Skeleton:
    """The files of one toolchain's scaffold (paths relative to the task folder) and its manifest parts."""

    files: dict[str, str]
    verifier: str
    allowed_output_paths: tuple[str, ...]


def _skeleton(toolchain: Toolchain) -> _Skeleton:
    readme = f"# project name\n\n{TODO}: what the project does, how to run it and its tests, as its maintainers would write it.\n"
    if toolchain == "python":
        return _Skeleton(
            files={
                "fixture/README.md": readme,
                "fixture/app/__init__.py": f'"""{TODO}: the package; several modules that read like maintained code."""\n',
                "fixture/tests/__init__.py": "",
                "fixture/tests/test_app.py": f"import unittest\n\n\nclass AppTest(unittest.TestCase):\n    def test_behaviour(self) -> None:\n        self.fail(\"{TODO}: the project's own visible tests\")\n",
                "hidden/tests/test_answer.py": f"import unittest\n\n\nclass AnswerTest(unittest.TestCase):\n    def test_the_answer(self) -> None:\n        self.fail(\"{TODO}: the post-turn test that needs the answer\")\n",
                "solution/app/__init__.py": f'"""{TODO}: the minimal change that makes every test pass."""\n',
            },
            verifier='#!/bin/sh\n# Runs the project\'s whole unittest suite, including the post-turn tests.\nset -u\n'
                     '[ -f tests/test_answer.py ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }\n'
                     'PYTHONDONTWRITEBYTECODE=1 exec python3 -m unittest discover -s tests -t . -q\n',
            allowed_output_paths=("app", "README.md", "tests/__pycache__"),
        )
    if toolchain == "node":
        return _Skeleton(
            files={
                "fixture/README.md": readme,
                "fixture/package.json": json.dumps({"name": "project-name", "version": "1.0.0", "private": True, "main": "lib/index.js",
                                                    "scripts": {"test": "node --test"}}, indent=2) + "\n",
                "fixture/lib/index.js": f"'use strict';\n\n// {TODO}: the library; several modules that read like maintained code.\nmodule.exports = {{}};\n",
                "fixture/test/index.test.js": f"'use strict';\n\nconst test = require('node:test');\nconst assert = require('node:assert');\n\ntest('behaviour', () => {{\n  assert.fail('{TODO}: the project\\'s own visible tests');\n}});\n",
                "hidden/test/answer.test.js": f"'use strict';\n\nconst test = require('node:test');\nconst assert = require('node:assert');\n\ntest('the answer', () => {{\n  assert.fail('{TODO}: the post-turn test that needs the answer');\n}});\n",
                "solution/lib/index.js": f"'use strict';\n\n// {TODO}: the minimal change that makes every test pass.\nmodule.exports = {{}};\n",
            },
            verifier='#!/bin/sh\n# Runs the package\'s node:test suite, including the post-turn tests.\nset -u\n'
                     '[ -f test/answer.test.js ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }\nexec node --test\n',
            allowed_output_paths=("lib", "README.md"),
        )
    return _Skeleton(
        files={
            "fixture/README.md": readme,
            "fixture/tool.sh": f"#!/bin/sh\n# {TODO}: the script (POSIX sh) that reads like maintained code.\nexit 1\n",
            "fixture/tests/run.sh": '#!/bin/sh\n# Runs every tests/*.sh case file except this runner.\nset -u\nhere=$(cd "$(dirname "$0")" && pwd)\n'
                                    'status=0\nfor case_file in "$here"/*.sh; do\n    [ "$(basename "$case_file")" = run.sh ] && continue\n'
                                    '    sh "$case_file" || { echo "FAIL $(basename "$case_file")"; status=1; }\ndone\nexit $status\n',
            "fixture/tests/basic.sh": f"#!/bin/sh\n# {TODO}: the project's own visible test cases.\nexit 1\n",
            "hidden/tests/answer.sh": f"#!/bin/sh\n# {TODO}: the post-turn case that needs the answer.\nexit 1\n",
            "solution/tool.sh": f"#!/bin/sh\n# {TODO}: the minimal change that makes every case pass.\nexit 1\n",
        },
        verifier='#!/bin/sh\n# Runs the project\'s shell test cases, including the post-turn ones.\nset -u\n'
                 '[ -f tests/answer.sh ] || { echo "verifier: post-turn tests are missing" >&2; exit 2; }\nexec sh tests/run.sh\n',
        allowed_output_paths=("tool.sh", "README.md"),
    )


def _memories(kind: str) -> list[dict[str, str]]:
    if kind == "stale-trap":
        return [
            {"text": f"{TODO}: the old value, as the memory system stored it before it changed.", "lane": "keyword", "kind": "superseded", "subject": "the-fact"},
            {"text": f"{TODO}: the correction that replaced it.", "lane": "corrections", "kind": "correction", "subject": "the-fact"},
        ]
    if kind == "tare":
        return [{"text": f"{TODO}: a true fact about the project that does not help with this task.", "lane": "keyword", "kind": "fact"}]
    return [{"text": f"{TODO}: the team knowledge that carries the answer, as earlier work stored it.", "lane": "keyword", "kind": "convention"}]


def scaffold_manifest(task_id: str, kind: str, toolchain: Toolchain) -> dict[str, object]:
    """The scaffold's `task.json` as a dict (valid against TaskManifest; its TODOs fail the corpus check)."""
    skeleton = _skeleton(toolchain)
    manifest: dict[str, object] = {
        "schema_version": 1,
        "task_id": task_id,
        "kind": kind,
        "instruction": f"{TODO}: the work request, as a colleague would write it; it must not contain the answer.",
        "check_command": ["sh", "{verifier}"],
        "verifier": {"kind": "script", "runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": sha256_bytes(skeleton.verifier.encode())},
                     "timeout_seconds": 60},
        "memories": _memories(kind),
        "answer_terms": [f"{TODO}: a term that reveals the answer"] if kind in ANSWER_KINDS else [],
        "allowed_output_paths": list(skeleton.allowed_output_paths) + (["answer.txt"] if kind == "investigation" else []),
    }
    if kind == "continuity":
        manifest["follow_up_prompts"] = [f"{TODO}: the follow-up prompt sent into the same session."]
    if kind == "investigation":
        manifest["answer_path"] = "answer.txt"
    return manifest


def scaffold_task(tasks_root: Path, task_id: str, kind: str, toolchain: str = "sh") -> list[Path]:
    """Write a new task folder `tasks_root/task_id`; return the files written.

    Raises TaskCorpusError (naming the argument and the fix) for a bad id, kind or toolchain, or
    when the folder exists; on any failure nothing is left behind.
    """
    if not TASK_ID.match(task_id):
        raise TaskCorpusError(f"task id {task_id!r}: use 3-64 lowercase letters, digits and '-', starting with a letter or digit")
    if kind not in TASK_KINDS:
        raise TaskCorpusError(f"--kind {kind!r} is not a task kind; use one of {', '.join(TASK_KINDS)}")
    if toolchain not in TOOLCHAINS:
        raise TaskCorpusError(f"--toolchain {toolchain!r} is not supported; use one of {', '.join(TOOLCHAINS)}")
    if not tasks_root.is_dir():
        raise TaskCorpusError(f"{tasks_root}: the task corpus folder does not exist")
    folder = tasks_root / task_id
    if folder.exists():
        raise TaskCorpusError(f"{folder}: already exists; pick another id or edit that task")
    skeleton = _skeleton(toolchain)  # type: ignore[arg-type]
    manifest = scaffold_manifest(task_id, kind, toolchain)  # type: ignore[arg-type]
    try:
        TaskManifest.model_validate(manifest)
    except ValueError as error:  # the scaffold itself is wrong: a bug here, never the author's
        where = f"{task_id}/{MANIFEST_NAME}"
        raise ContractError([Violation(where, "", f"the scaffold does not validate: {error}")]) from None
    staging = Path(tempfile.mkdtemp(prefix=f".{task_id}-", dir=tasks_root))
    try:
        files = {**skeleton.files, "verifier.sh": skeleton.verifier, MANIFEST_NAME: json.dumps(manifest, indent=2) + "\n"}
        for rel, text in files.items():
            path = staging / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        os.rename(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return sorted(folder / rel for rel in files)


def _git(repo: Path, *args: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise TaskCorpusError(f"git {' '.join(args[:2])} in {repo} failed: {done.stderr.strip()[-300:]}")
    return done.stdout.strip()


def snapshot_commit(repo_root: Path, paths: list[str], revision: str = "HEAD") -> str:
    """A commit object holding `revision` plus the working-tree state of `paths` (git's ignore rules apply).

    Uses a private index, so HEAD, the branch, the index and the working tree are left as they were;
    the commit is unreferenced (git gc collects it). Raises UnknownCommitError for a revision that names
    no commit (`tasks_lib.corpus.build.resolve_commit`), TaskCorpusError when git fails.
    """
    with tempfile.TemporaryDirectory(prefix="memtrial-snapshot-") as tmp:
        env = {**os.environ, "GIT_INDEX_FILE": str(Path(tmp) / "index"), "GIT_AUTHOR_NAME": "memtrial", "GIT_AUTHOR_EMAIL": "memtrial@localhost",
               "GIT_COMMITTER_NAME": "memtrial", "GIT_COMMITTER_EMAIL": "memtrial@localhost"}
        if not paths:
            raise TaskCorpusError("snapshot_commit: name the paths to snapshot (git add -A with none would take the whole tree)")
        parent = resolve_commit(repo_root, revision, str(repo_root))
        _git(repo_root, "read-tree", parent, env=env)
        _git(repo_root, "add", "-A", "--", *paths, env=env)
        tree = _git(repo_root, "write-tree", env=env)
        return _git(repo_root, "commit-tree", tree, "-p", parent, "-m", "memtrial task check: working tree snapshot", env=env)
