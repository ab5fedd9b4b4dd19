"""The runner-owned post-turn harness, run inside the check's sandbox (standard library only).

Usage: `python3 -I -B driver.py NONCE FILE... -- VERIFIER_ARGV...`, with the workspace as cwd.

It runs every post-turn test FILE first, each in its own process, by its runtime (`test*.py`:
unittest through `pyunit.py`; `*.test.js`: `node --test` with `reporter.mjs`; `*.sh`: `sh FILE`,
one case), then the task's verifier. Everything the tests and the verifier print goes to stderr;
the only thing on stdout is one JSON object, written last: the nonce, each case with its outcome,
the SHA-256 of each post-turn file before and after its run, flags, and the verifier's exit status.
The process exits with the verifier's status. A run that dies before the end writes nothing, so
the runner grades it as missing its result.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))


def _digest(path: str) -> str | None:
    try:
        with open(path, "rb") as handle:
            return hashlib.sha256(handle.read()).hexdigest()
    except OSError:
        return None


def _runtime(path: str) -> str:
    name = os.path.basename(path)
    if name.endswith(".py"):
        return "python"
    if name.endswith((".test.js", ".test.mjs", ".test.cjs")):
        return "node"
    return "shell"


def _lines(path: str) -> list[dict[str, object]]:
    try:
        with open(path, encoding="utf-8") as handle:
            return [json.loads(line) for line in handle if line.strip()]
    except (OSError, ValueError):
        return []


def _run_file(path: str, report: str) -> tuple[list[dict[str, object]], list[str]]:
    """Run one post-turn file, its per-case report going to `report`; its cases and flags."""
    runtime = _runtime(path)
    if runtime == "shell":
        code = subprocess.run(["sh", path], stdin=subprocess.DEVNULL, check=False).returncode
        return [{"case": path, "outcome": "pass" if code == 0 else "fail"}], []
    if runtime == "python":
        argv = [sys.executable, "-I", "-B", os.path.join(HERE, "pyunit.py"), report, path]
    else:
        argv = ["node", "--test", f"--test-reporter={os.path.join(HERE, 'reporter.mjs')}",
                f"--test-reporter-destination={report}", path]
    subprocess.run(argv, stdin=subprocess.DEVNULL, check=False)
    cases, flags = [], []
    for line in _lines(report):
        if "flag" in line:
            flags.append(str(line["flag"]))
        elif runtime == "node" and line.get("nesting") == 0:
            cases.append({"case": f"{path}::{line.get('name')}", "outcome": line.get("outcome")})
        elif runtime == "python":
            cases.append({"case": line.get("case"), "outcome": line.get("outcome")})
    return cases, flags


def main(argv: list[str]) -> int:
    """Run the harness; return the verifier's exit status."""
    split = argv.index("--")
    nonce, files, verifier = argv[0], argv[1:split], argv[split + 1:]
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    found: list[object] = []
    raised: list[object] = []
    digests: list[object] = []
    result: dict[str, object] = {"nonce": nonce, "cases": found, "files": digests, "flags": raised}
    with tempfile.TemporaryDirectory(prefix="post-turn-") as scratch:
        for index, path in enumerate(files):
            before = _digest(path)
            cases, flags = _run_file(path, os.path.join(scratch, f"report-{index}.jsonl"))
            found += cases
            raised += flags
            digests.append({"path": path, "before": before, "after": _digest(path)})
    code = subprocess.run(verifier, stdin=subprocess.DEVNULL, check=False).returncode if verifier else 2
    result["verifier_exit"] = code
    out.write(json.dumps(result) + "\n")
    out.close()
    return code if code >= 0 else 128 - code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
