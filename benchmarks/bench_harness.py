"""Benchmark: harness overhead of one paired attempt vs `git archive | tar -x` of the same tree.

A task whose fixture holds 1,000 files of Django 5.1.4's sdist (pinned by SHA-256, see
bench_prepare.py) is committed into a temporary repository. One attempt under `on` is timed with a
no-op agent (it returns at once), so the figure is everything the runner does besides the agent:
materialize the workspace, audit snapshot, plant memories, audit, apply hidden/, run a trivial
check (the post-turn harness over one shell case, then the verifier; with `--judge apart` the
judge and the jail, the case making one call into the jail), confirm injection, store transcript, receipt and record, forget, clean up.
With `--toolchain node` the task is a Node package (`lib/answer.js`) and its one post-turn case
calls it: a `node:test` file in process, or a Python case through the Node jail (`jail: node`) apart.

Rounds alternate three timings: the floor; an attempt that builds its workspace from git objects
(what `run_attempt` does alone, and the first attempt of each task in a matrix); and an attempt
that copies the task's workspace template (every later attempt of that task in a matrix, see
tasks_lib/arm/workspace.py; the template is built before the first round).

    cd benchmarks && ../.venv/bin/python bench_harness.py [--rounds 5] [--json] [--judge apart] [--toolchain node]

`--checks TASK,...` times the post-turn check alone, side by side with other trees of the code
(`--against NAME=DIR,...`: checkouts of earlier commits, each with its own `corpora/tasks`): each
bundled task's solved workspace (its fixture with its solution over it) is checked `--per-round`
times per series, by the code and corpus of one tree per series (a subprocess with `PYTHONPATH` set
to that tree), the trees taking turns in each round, the order rotated from round to round. A
judged-apart task runs `run_judged_check`; any other applies `hidden/` and runs
`run_sandboxed_check`, as `check_workspace` does. Every check must pass, or the bench stops. The
figures are ratios of this tree (the one holding this file) to each other tree: of the medians of
series medians, and the median of per-round ratios (the machine's load moves every tree). Where
cgroup v1 has a `cpuacct` hierarchy of its own, each series runs in a cpuacct group of its own and
the CPU seconds of each check (the runner and every process of its sandboxes) are reported too:
the load moves them far less than wall seconds.

    cd benchmarks && ../.venv/bin/python bench_harness.py --checks certwatch-renew-window,logship-partial-exit \
        --against base=/path/to/earlier/checkout,main=/path/to/main [--rounds 5] [--per-round 5] [--json]

With `--attempts`, the same comparison times the calibration agent's whole attempt on each task
under `on` (`run_matrix`, as `memtrial task try` runs it: workspace from git objects, memory
planted and delivered by the hook, audit, check, record), each tree's corpus first committed to a
repository of its own.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from bench_prepare import GIT_ENV, fetch_sdist

from tasks_lib.agents.base import Agent, AgentRun, AgentSession, Transcript
from tasks_lib.agents.registry import register_agent
from tasks_lib.arm.steps import ArmSetup, TaskSource, run_attempt, schedule
from tasks_lib.arm.workspace import WorkspaceTemplates
from tasks_lib.artifacts import LocalStore
from tasks_lib.corpus.tasks import load_tasks

FILES = 1000
VERIFIER = b"#!/bin/sh\nexit 0\n"


class NoopAgent(Agent):
    """Returns at once: the attempt's time is then the harness's own."""

    name = "noop"

    def run(self, session: AgentSession) -> AgentRun:
        return AgentRun(exit_code=0, input_tokens=0, output_tokens=0, cost_usd=0, wall_seconds=0,
                        transcript=Transcript(agent=self.name, steps=()))


NODE_MODULE = "'use strict';\nmodule.exports = { answer: () => 42 };\n"
NODE_CASE = ("'use strict';\nconst test = require('node:test');\nconst assert = require('node:assert');\n"
             "const { answer } = require('../lib/answer.js');\ntest('the answer', () => { assert.strictEqual(answer(), 42); });\n")
PYTHON_CASE = ("import unittest\n\nfrom jail import call\n\n\nclass AnswerTest(unittest.TestCase):\n"
               "    def test_the_answer(self) -> None:\n        self.assertEqual(call(\"lib/answer.js:answer\"), 42)\n")


def _hidden_case(hidden: Path, judge: str | None, toolchain: str) -> dict[str, str]:
    """Write the task's one post-turn case; the manifest fields it needs."""
    if toolchain == "node" and judge == "apart":
        (hidden / "tests").mkdir()
        (hidden / "tests" / "test_answer.py").write_text(PYTHON_CASE)
        return {"jail": "node"}
    if toolchain == "node":
        (hidden / "test").mkdir()
        (hidden / "test" / "answer.test.js").write_text(NODE_CASE)
        return {}
    (hidden / "check.sh").write_text("#!/bin/sh\njail true\n" if judge == "apart" else "#!/bin/sh\nexit 0\n")
    return {}


def make_task_repo(where: Path, judge: str | None = None, toolchain: str = "sh") -> tuple[Path, str]:
    """A repository holding one task whose fixture is the first FILES files of the sdist; `judge`
    (`apart` or `in-process`) is written into its manifest when given (its one shell case then
    makes one call into the jail). `toolchain` `node` adds `lib/answer.js` and makes the case a
    call of it."""
    repo = where / "repo"
    fixture = repo / "tasks" / "bench-task" / "fixture"
    fixture.mkdir(parents=True)
    with tarfile.open(fetch_sdist()) as archive:
        members = [m for m in archive.getmembers() if m.isfile()][:FILES]
        for member in members:
            member.name = member.name.split("/", 1)[1]
        archive.extractall(fixture, members=members, filter="data")
    task = repo / "tasks" / "bench-task"
    (task / "verifier.sh").write_bytes(VERIFIER)
    (task / "solution").mkdir()
    (task / "solution" / "NOTES.txt").write_text("done\n")
    if toolchain == "node":
        (fixture / "lib").mkdir(exist_ok=True)
        (fixture / "lib" / "answer.js").write_text(NODE_MODULE)
    (task / "hidden").mkdir()
    extra = _hidden_case(task / "hidden", judge, toolchain)
    manifest = {
        "schema_version": 1, "task_id": "bench-task", "kind": "deducible",
        "instruction": "Add a notes file.", "check_command": ["sh", "{verifier}"],
        "verifier": {"runtime": "posix-shell", "asset": {"path": "verifier.sh", "sha256": hashlib.sha256(VERIFIER).hexdigest()}},
        "memories": [{"text": "Release notes go in NOTES.txt at the top level.", "lane": "keyword", "kind": "convention"}],
        "allowed_output_paths": ["NOTES.txt"],
        **({"judge": judge} if judge else {}), **extra,
    }
    (task / "task.json").write_text(json.dumps(manifest))
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "bench task"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return repo, commit


def floor_once(repo: Path, commit: str, dest: Path) -> float:
    """`git archive COMMIT:tasks/bench-task/fixture | tar -x`; seconds."""
    dest.mkdir()
    start = time.perf_counter()
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", f"{commit}:tasks/bench-task/fixture"], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    archive.wait()
    return time.perf_counter() - start


def solved_workspace(task_dir: Path, dest: Path) -> Path:
    """`dest` holding the task's fixture with its solution copied over it."""
    shutil.copytree(task_dir / "fixture", dest, symlinks=True)
    shutil.copytree(task_dir / "solution", dest, symlinks=True, dirs_exist_ok=True)
    return dest


CPUACCT = Path("/sys/fs/cgroup/cpuacct")
"""cgroup v1's CPU accounting hierarchy; a series counts its CPU in a group of its own there."""


def cpu_group() -> Path | None:
    """A fresh cpuacct group (cgroup v1) holding this process, so its usage counts every descendant
    (the checks' sandboxes too, which join groups of the memory, pids and cpu hierarchies only);
    None where there is none to make (cgroup v2, cpuacct mounted with cpu, not root)."""
    try:
        if not (CPUACCT / "cpuacct.usage").is_file() or os.stat(CPUACCT).st_dev == os.stat("/sys/fs/cgroup/cpu").st_dev:
            return None
        group = CPUACCT / f"memtrial-bench-{os.getpid()}"
        group.mkdir()
        (group / "cgroup.procs").write_text(str(os.getpid()))
    except OSError:
        return None
    return group


def cpu_seconds(group: Path | None) -> float:
    """CPU seconds used so far by `group`'s processes and their descendants (0 without a group)."""
    return int((group / "cpuacct.usage").read_text()) / 1e9 if group else 0.0


def leave_cpu_group(group: Path | None) -> None:
    """Move this process back to the root cpuacct group and remove `group`."""
    if group:
        (CPUACCT / "cgroup.procs").write_text(str(os.getpid()))
        group.rmdir()


def time_checks(corpus: Path, task_id: str, count: int) -> list[tuple[float, float | None]]:
    """(wall seconds, CPU seconds or None) of `count` checks of `task_id`'s solved workspace by the code
    on `sys.path` (its check as `check_workspace` runs it); raises SystemExit when one does not pass."""
    from tasks_lib.arm.sandboxed_check import run_sandboxed_check
    from tasks_lib.corpus.tasks import overlay

    (task,) = [t for t in load_tasks(corpus) if t.manifest.task_id == task_id]
    apart = getattr(task.manifest, "judge", None) == "apart"
    figures: list[tuple[float, float | None]] = []
    group = cpu_group()
    try:
        with tempfile.TemporaryDirectory(prefix="memtrial-bench-check-") as tmp:
            for index in range(count):
                workspace = solved_workspace(task.root, Path(tmp) / f"ws{index}")
                cpu, start = cpu_seconds(group), time.perf_counter()
                if apart:
                    from tasks_lib.arm.judged_check import run_judged_check

                    check = run_judged_check(task, workspace)
                else:
                    overlay(task.hidden_dir, workspace)
                    check = run_sandboxed_check(task, workspace)
                figures.append((time.perf_counter() - start, cpu_seconds(group) - cpu if group else None))
                if check.exit_code != 0 or check.problem:
                    raise SystemExit(f"{task_id}: the solved workspace's check did not pass: {check.problem or check.output_tail[-600:]}")
    finally:
        leave_cpu_group(group)
    return figures


def task_repo(tree: Path, where: Path) -> tuple[Path, str]:
    """A git repository at `where` holding `tree`'s corpus (`corpora/tasks`), committed; (repo, commit)."""
    shutil.copytree(tree / "corpora" / "tasks", where / "corpora" / "tasks", symlinks=True)
    env = {**GIT_ENV, "PATH": "/usr/bin:/bin"}
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "corpus"]):
        subprocess.run(["git", "-C", str(where), *args], check=True, env=env)
    return where, subprocess.run(["git", "-C", str(where), "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()


def time_attempts(repo: Path, commit: str, task_id: str, count: int) -> list[tuple[float, float | None]]:
    """(wall seconds, CPU seconds or None) of `count` whole attempts of the calibration agent on
    `task_id` under `on` (`run_matrix`, as `memtrial task try` runs it: workspace from git objects,
    memory planted and delivered, audit, check, record) by the code on `sys.path`; raises
    SystemExit when one does not pass."""
    import tasks_lib.agents.calibration  # noqa: F401 (registers the agent)
    from tasks_lib.arm.steps import run_matrix

    (task,) = [t for t in load_tasks(repo / "corpora" / "tasks") if t.manifest.task_id == task_id]
    figures: list[tuple[float, float | None]] = []
    group = cpu_group()
    try:
        with tempfile.TemporaryDirectory(prefix="memtrial-bench-attempt-") as tmp:
            for index in range(count):
                cpu, start = cpu_seconds(group), time.perf_counter()
                (record,) = run_matrix(schedule([task], ["on"], 1), run_id=f"bench-{index}", repo_root=repo, commit=commit,
                                       tasks_subdir="corpora/tasks", agent_name="calibration", store=LocalStore(Path(tmp) / str(index)))
                figures.append((time.perf_counter() - start, cpu_seconds(group) - cpu if group else None))
                if record.outcome != "pass":
                    raise SystemExit(f"{task_id}: the calibration agent's attempt under on did not pass: {record.outcome}")
    finally:
        leave_cpu_group(group)
    return figures


def series(tree: Path, task_id: str, count: int, repo: tuple[Path, str] | None) -> list[tuple[float, float | None]]:
    """`time_checks` (or with `repo`, `time_attempts` from that repository and commit) in a subprocess
    whose code and corpus are `tree`'s."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    what = ["--time-attempts", task_id, "--repo", str(repo[0]), "--commit", repo[1]] if repo else \
        ["--time-checks", task_id, "--corpus", str(tree / "corpora" / "tasks")]
    done = subprocess.run([sys.executable, __file__, *what, "--per-round", str(count)], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: {done.stderr.strip()[-2000:]}")
    return [(float(wall), None if cpu is None else float(cpu)) for wall, cpu in json.loads(done.stdout)]


def _ratios(this: list[float], other: list[float]) -> dict[str, float]:
    """The ratio of the two sides' medians and the median of their per-round ratios."""
    return {"ratio_of_medians": round(statistics.median(this) / statistics.median(other), 3),
            "median_round_ratio": round(statistics.median([a / b for a, b in zip(this, other, strict=True)]), 3)}


def compare_checks(task_ids: list[str], trees: dict[str, Path], rounds: int, count: int,
                   attempts: bool = False) -> dict[str, dict[str, object]]:
    """Per task: each tree's series medians (wall, and CPU where counted) and the ratio of `this`
    (the tree holding this file) to each other tree. The trees take turns in each round, the order
    rotated from round to round. With `attempts`, whole attempts of the calibration agent are timed
    instead of the check alone (each tree's corpus committed to a repository of its own first)."""
    trees = {"this": Path(__file__).resolve().parents[1], **trees}
    names = list(trees)
    walls: dict[str, dict[str, list[float]]] = {t: {n: [] for n in names} for t in task_ids}
    cpus: dict[str, dict[str, list[float]]] = {t: {n: [] for n in names} for t in task_ids}
    with tempfile.TemporaryDirectory(prefix="memtrial-bench-repos-") as tmp:
        repos = {n: task_repo(tree, Path(tmp) / n) for n, tree in trees.items()} if attempts else {}
        for round_ in range(rounds):
            for task_id in task_ids:
                shift = round_ % len(names)
                for name in names[shift:] + names[:shift]:
                    figures = series(trees[name], task_id, count, repos.get(name))
                    walls[task_id][name].append(statistics.median(w for w, _ in figures))
                    if all(c is not None for _, c in figures):
                        cpus[task_id][name].append(statistics.median(c for _, c in figures))  # type: ignore[misc]
    result: dict[str, dict[str, object]] = {}
    for task_id in task_ids:
        row: dict[str, object] = {}
        for name in names:
            row[f"{name}_wall_s"] = [round(x, 3) for x in walls[task_id][name]]
            if len(cpus[task_id][name]) == rounds:
                row[f"{name}_cpu_s"] = [round(x, 3) for x in cpus[task_id][name]]
        for name in names[1:]:
            row[f"wall_vs_{name}"] = _ratios(walls[task_id]["this"], walls[task_id][name])
            if f"{name}_cpu_s" in row and "this_cpu_s" in row:
                row[f"cpu_vs_{name}"] = _ratios(cpus[task_id]["this"], cpus[task_id][name])
        result[task_id] = row
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each side")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    parser.add_argument("--judge", choices=("apart", "in-process"), default=None,
                        help="write `judge` into the bench task's manifest (omit it for code before the field existed)")
    parser.add_argument("--checks", help="comma-separated bundled task ids: time their checks against --against")
    parser.add_argument("--against", help="the other trees for --checks: NAME=DIR,... (or DIR), each a checkout of an earlier commit")
    parser.add_argument("--attempts", action="store_true",
                        help="with --checks: time the calibration agent's whole attempt under `on`, not the check alone")
    parser.add_argument("--per-round", type=int, default=5, help="checks per series (--checks)")
    parser.add_argument("--time-checks", help=argparse.SUPPRESS)  # one series, run by --checks in a subprocess
    parser.add_argument("--corpus", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--time-attempts", help=argparse.SUPPRESS)  # one series of whole attempts, in a subprocess
    parser.add_argument("--repo", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--commit", help=argparse.SUPPRESS)
    parser.add_argument("--toolchain", choices=("sh", "node"), default="sh",
                        help="the bench task's post-turn case: a shell case, or a call of a Node module")
    args = parser.parse_args()
    if args.time_checks:
        print(json.dumps(time_checks(args.corpus, args.time_checks, args.per_round)))
        return 0
    if args.time_attempts:
        print(json.dumps(time_attempts(args.repo, args.commit, args.time_attempts, args.per_round)))
        return 0
    if args.checks:
        trees = {}
        for item in (args.against or "").split(","):
            name, _, folder = item.rpartition("=")
            tree = Path(folder).resolve()
            if not item or not (tree / "tasks_lib").is_dir():
                parser.error("--checks needs --against NAME=DIR,..., checkouts of earlier commits (with tasks_lib/ and corpora/tasks/)")
            trees[name or tree.name] = tree
        figures = compare_checks(args.checks.split(","), trees, args.rounds, args.per_round, args.attempts)
        if args.json:
            print(json.dumps(figures, indent=2))
        else:
            for task_id, row in figures.items():
                print(task_id)
                for key, value in row.items():
                    print(f"    {key:24} {value}")
            print("goal      ratio <= 1.10 (the judge apart costs at most 10% more than the check before it)")
        return 0
    register_agent("noop", NoopAgent)
    with tempfile.TemporaryDirectory(prefix="memtrial-bench-harness-") as tmp:
        work = Path(tmp)
        repo, commit = make_task_repo(work, args.judge, args.toolchain)
        (task,) = load_tasks(repo / "tasks")
        attempt = schedule([task], ["on"], 1)[0]
        templates = WorkspaceTemplates(work / "templates")
        templates.materialize(repo, commit, "tasks/bench-task/fixture", work / "warm-up")
        shutil.rmtree(work / "warm-up")
        floor, built, copied = [], [], []
        outcomes = set()
        for round_ in range(args.rounds):
            floor.append(floor_once(repo, commit, work / f"floor{round_}"))
            shutil.rmtree(work / f"floor{round_}")
            for series, cache in ((built, None), (copied, templates)):
                start = time.perf_counter()
                setup = ArmSetup(run_id=f"bench-{round_}-{len(series)}", source=TaskSource(repo, commit, "tasks"),
                                 agent_name="noop", store=LocalStore(work / "artifacts"))
                record = run_attempt(attempt, setup, templates=cache)
                series.append(time.perf_counter() - start)
                outcomes.add(f"{record.outcome} (audit passed: {record.audit_passed})")
    floor_m, built_m, copied_m = (statistics.median(x) for x in (floor, built, copied))
    result = {
        "files": FILES, "rounds": args.rounds, "attempt": ", ".join(sorted(outcomes)),
        "floor_median_s": round(floor_m, 3),
        "built_median_s": round(built_m, 3), "built_ratio": round(built_m / floor_m, 2),
        "template_median_s": round(copied_m, 3), "template_ratio": round(copied_m / floor_m, 2),
        "goal": "ratio < 2.0",
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"fixture   {FILES} files of Django 5.1.4's sdist ({args.toolchain}); attempt outcome {result['attempt']}")
        print(f"floor     git archive | tar -x         median {floor_m:.3f} s  {[round(x, 3) for x in floor]}")
        print(f"built     attempt, workspace from git  median {built_m:.3f} s  {[round(x, 3) for x in built]}  {result['built_ratio']:.2f}x")
        print(f"template  attempt, workspace copied    median {copied_m:.3f} s  {[round(x, 3) for x in copied]}  {result['template_ratio']:.2f}x")
        print("goal      < 2x the floor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
