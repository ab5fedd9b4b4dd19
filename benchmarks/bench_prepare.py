"""Benchmark: build + redact + certify a real ~5k-file repository vs `git archive | tar -x` + `rg`.

The fixture is Django 5.1.4's source distribution from PyPI (pinned by SHA-256), unpacked and
committed into a git repository in a temporary folder. Both sides run in the same process run,
alternating, several rounds; the figure is the ratio of medians (these machines are noisy).

    .venv/bin/python benchmarks/bench_prepare.py [--rounds 5] [--json]

Needs `rg` (Debian's ripgrep) for the floor; `make bench` installs it when apt-get is available.
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

from tasks_lib.corpus.build import build_tree
from tasks_lib.corpus.certify import HARNESS_TERMS, certify
from tasks_lib.corpus.redact import redact_tree

SDIST = "Django==5.1.4"
SDIST_FILE = "Django-5.1.4.tar.gz"
SDIST_SHA256 = "de450c09e91879fa5a307f696e57c851955c910a438a35e6b4c895e86bedc82a"
CACHE = Path(__file__).resolve().parents[1] / ".memtrial" / "bench-cache"
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.org", "GIT_COMMITTER_NAME": "bench",
           "GIT_COMMITTER_EMAIL": "bench@example.org", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
           "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z"}
# The floor's scan: the same content patterns certification applies to every file.
RG_PATTERN = "|".join(HARNESS_TERMS) + r"|^diff --git a/|^@@ -[0-9]+|PRIVATE KEY-----"


def fetch_sdist() -> Path:
    """Download the pinned sdist once into the cache and check its digest."""
    target = CACHE / SDIST_FILE
    if not target.exists():
        CACHE.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps",
                        SDIST, "-d", str(CACHE)], check=True)
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    if digest != SDIST_SHA256:
        raise SystemExit(f"{target}: sha256 {digest} is not the pinned {SDIST_SHA256}; delete it and retry")
    return target


def make_repository(sdist: Path, where: Path) -> tuple[Path, str]:
    """Unpack the sdist and commit it into a fresh git repository; return (repo, commit)."""
    with tarfile.open(sdist) as archive:
        archive.extractall(where, filter="data")
    repo = next(where.iterdir())
    env = {**os.environ, **GIT_ENV}
    for args in (["init", "-q"], ["add", "-A", "-f"], ["commit", "-q", "-m", "Django 5.1.4 sdist"]):
        subprocess.run(["git", "-C", str(repo), *args], check=True, env=env)
    commit = subprocess.run(["git", "-C", str(repo), "rev-parse", "HEAD"], check=True, capture_output=True, text=True).stdout.strip()
    return repo, commit


def floor_once(repo: Path, commit: str, dest: Path) -> float:
    """`git archive COMMIT | tar -x -C dest` then `rg` over the tree; seconds."""
    dest.mkdir()
    start = time.perf_counter()
    archive = subprocess.Popen(["git", "-C", str(repo), "archive", commit], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", str(dest)], stdin=archive.stdout, check=True)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() != 0:
        raise SystemExit("git archive failed")
    scan = subprocess.run(["rg", "--hidden", "--no-ignore", "-i", "-c", "-e", RG_PATTERN, str(dest)], stdout=subprocess.DEVNULL)
    if scan.returncode not in (0, 1):
        raise SystemExit(f"rg failed with exit status {scan.returncode}")
    return time.perf_counter() - start


def memtrial_once(repo: Path, commit: str, dest: Path) -> tuple[float, int, str]:
    """build_tree + redact_tree + certify; seconds, files scanned, verdict."""
    start = time.perf_counter()
    build = build_tree(repo, commit, dest)
    redact_tree(dest, build.corpus_id, listing=build.files)
    report = certify(dest)
    seconds = time.perf_counter() - start
    return seconds, sum(s.files_scanned for s in report.scans), report.verdict


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds of each side")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args()
    if shutil.which("rg") is None:
        raise SystemExit("rg (ripgrep) is not installed: apt-get install -y ripgrep")
    with tempfile.TemporaryDirectory(prefix="memtrial-bench-") as tmp:
        work = Path(tmp)
        repo, commit = make_repository(fetch_sdist(), work / "src")
        files = int(subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True, check=True).stdout.count("\n"))
        floor, ours = [], []
        scanned, verdict = 0, ""
        for round_ in range(args.rounds):
            floor.append(floor_once(repo, commit, work / f"floor{round_}"))
            seconds, scanned, verdict = memtrial_once(repo, commit, work / f"ours{round_}")
            ours.append(seconds)
            shutil.rmtree(work / f"floor{round_}")
            shutil.rmtree(work / f"ours{round_}")
    result = {
        "fixture": f"{SDIST_FILE} sha256 {SDIST_SHA256[:16]}…",
        "files": files,
        "files_scanned": scanned,
        "certification": verdict,
        "rounds": args.rounds,
        "floor_median_s": round(statistics.median(floor), 3),
        "memtrial_median_s": round(statistics.median(ours), 3),
        "ratio": round(statistics.median(ours) / statistics.median(floor), 2),
        "round_ratios": [round(o / f, 2) for o, f in zip(ours, floor)],
        "goal": "ratio <= 2.0",
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(f"fixture   {result['fixture']}, {files} files (certification: {verdict}, {scanned} files scanned)")
        print(f"floor     git archive | tar -x + rg       median {result['floor_median_s']:.3f} s  {[round(x, 3) for x in floor]}")
        print(f"memtrial  build + redact + certify        median {result['memtrial_median_s']:.3f} s  {[round(x, 3) for x in ours]}")
        print(f"ratio     {result['ratio']:.2f}x   (goal <= 2.0x); per round {result['round_ratios']}, worst {max(result['round_ratios'])}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
