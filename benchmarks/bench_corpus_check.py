"""Benchmark: `check_corpus` over 40+ tasks vs the floor of running every task's checks bare.

The bundled corpus is copied into a git repository in a temporary folder, with renamed copies of
its tasks (ids suffixed `-cN`, key-lane entries duplicated) until it holds `--tasks` tasks, and
committed. Each round runs, alternating:

- floor: for every task, `git archive` of its fixture unpacked into a fresh folder, `hidden/`
  copied over, the verifier run with `sh`; then the same with `solution/` applied: the project
  suites the invariants cannot avoid running, with no harness, no audit of any kind;
- memtrial: `check_corpus` (every invariant, including the post-turn harness and key lanes).

Both use the same number of worker threads. Wall seconds, CPU seconds (this process and its
children) and the load average are printed; the figure is the ratio of wall medians.

    .venv/bin/python benchmarks/bench_corpus_check.py [--tasks 42] [--rounds 2] [--workers N] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tasks_lib.corpus.tasks import check_corpus, load_tasks, task_folders
from tasks_lib.corpus.upstream import FixtureOrigin, fixture_origin

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "corpora" / "tasks"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.org", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.org"}


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, env={**os.environ, **GIT_ENV})
    return done.stdout.strip()


def make_corpus(where: Path, count: int) -> Path:
    """A committed repository whose corpora/tasks holds `count` tasks: the bundled ones, then renamed copies."""
    repo = where / "repo"
    tasks = repo / "corpora" / "tasks"
    tasks.mkdir(parents=True)
    originals = task_folders(TASKS)
    lanes = json.loads((TASKS / "key_lanes.json").read_text())
    declared = {}
    for index in range(count):
        source = originals[index % len(originals)]
        copy = index // len(originals)
        task_id = source.name if copy == 0 else f"{source.name}-c{copy + 1}"
        shutil.copytree(source, tasks / task_id, symlinks=True)
        manifest = json.loads((tasks / task_id / "task.json").read_text())
        manifest["task_id"] = task_id
        (tasks / task_id / "task.json").write_text(json.dumps(manifest, indent=2))
        declared[task_id] = lanes["tasks"][source.name]
    (tasks / "key_lanes.json").write_text(json.dumps({**lanes, "tasks": declared}, indent=2))
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "corpus")
    return repo


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run_bare(origin: FixtureOrigin, task_root: Path, stage: str, scratch: Path) -> int:
    """Unpack the fixture from git, copy hidden/ (and solution/), run the verifier; return its exit status."""
    work = scratch / stage
    work.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(origin.repo), "archive", origin.commit, origin.subdir], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "--strip-components", str(origin.subdir.count("/") + 1), "-C", str(work)], input=archive, check=True)
    for part in (("solution", "hidden") if stage == "solution" else ("hidden",)):
        shutil.copytree(task_root / part, work, dirs_exist_ok=True)
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(["sh", str(task_root / "verifier.sh")], cwd=work, env=env, capture_output=True, check=False).returncode


def origins(repo: Path) -> dict[str, FixtureOrigin]:
    """Each task's fixture origin (an upstream task's composed commit in the source cache, which the
    check uses too); resolved before timing, as the sources are already cached."""
    commit = git(repo, "rev-parse", "HEAD")
    return {task.task_id: fixture_origin(repo, commit, task.root.relative_to(repo).as_posix(), task.manifest)
            for task in load_tasks(repo / "corpora" / "tasks")}


def floor(repo: Path, workers: int, where: dict[str, FixtureOrigin]) -> list[tuple[str, int, int]]:
    tasks = load_tasks(repo / "corpora" / "tasks")

    def one(task) -> tuple[str, int, int]:  # type: ignore[no-untyped-def]
        origin = where[task.task_id]
        with tempfile.TemporaryDirectory(prefix="bench-floor-") as tmp:
            return task.task_id, run_bare(origin, task.root, "fixture", Path(tmp)), run_bare(origin, task.root, "solution", Path(tmp))

    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(one, tasks))


def timed(fn):  # type: ignore[no-untyped-def]
    load = os.getloadavg()[0]
    wall, cpu = time.perf_counter(), cpu_seconds()
    result = fn()
    return result, time.perf_counter() - wall, cpu_seconds() - cpu, load, os.getloadavg()[0]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=42)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--workers", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-corpus-") as tmp:
        repo = make_corpus(Path(tmp), args.tasks)
        where = origins(repo)
        for round_ in range(args.rounds):
            bare, f_wall, f_cpu, f_load0, f_load1 = timed(lambda: floor(repo, args.workers, where))
            broken = [t for t, fixture, solution in bare if fixture == 0 or solution != 0]
            report, m_wall, m_cpu, m_load0, m_load1 = timed(lambda: check_corpus(repo / "corpora" / "tasks", repo, workers=args.workers))
            rows.append({"round": round_, "tasks": len(report.tasks), "ok": report.ok, "floor_broken": broken,
                         "floor_wall": round(f_wall, 2), "floor_cpu": round(f_cpu, 2), "check_wall": round(m_wall, 2),
                         "check_cpu": round(m_cpu, 2), "ratio_wall": round(m_wall / f_wall, 2), "ratio_cpu": round(m_cpu / f_cpu, 2),
                         "load_floor": [round(f_load0, 1), round(f_load1, 1)], "load_check": [round(m_load0, 1), round(m_load1, 1)]})
            if not args.json:
                print(json.dumps(rows[-1]))
    summary = {
        "tasks": args.tasks, "workers": args.workers, "cores": os.cpu_count(),
        "floor_wall_median": statistics.median(r["floor_wall"] for r in rows),
        "check_wall_median": statistics.median(r["check_wall"] for r in rows),
        "check_cpu_median": statistics.median(r["check_cpu"] for r in rows),
        "floor_cpu_median": statistics.median(r["floor_cpu"] for r in rows),
        "all_ok": all(r["ok"] and not r["floor_broken"] for r in rows), "rounds": rows,
    }
    summary["ratio_of_wall_medians"] = round(summary["check_wall_median"] / summary["floor_wall_median"], 2)
    print(json.dumps(summary, indent=2) if args.json else
          f"{args.tasks} tasks, {args.workers} workers on {os.cpu_count()} cores: check {summary['check_wall_median']:.1f} s wall "
          f"({summary['check_cpu_median']:.1f} s CPU), floor {summary['floor_wall_median']:.1f} s wall ({summary['floor_cpu_median']:.1f} s CPU), "
          f"ratio {summary['ratio_of_wall_medians']}x; all ok: {summary['all_ok']}")


if __name__ == "__main__":
    main()
