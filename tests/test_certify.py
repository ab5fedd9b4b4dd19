"""Certification: each of the five kinds fires on what it should, never on ordinary prose, and fails closed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gitrepo import write_files

from tasks_lib.corpus.certify import UNCHECKED_OPT_OUT, certify, certify_path
from tasks_lib.contracts import dump_document, parse_document, FixtureManifest
from tasks_lib.errors import DigestMismatchError, MissingSurfaceError
from tasks_lib.trees import sha256_file

BASE = {"src/app.py": "def main() -> int:\n    return 0\n", "README.md": "# app\n"}
ANSWERS = ("exit status 3", "9:15")

# (files added to a clean tree, expected (kind, path, rule))
FIRES = [
    ({"CLAUDE.md": "use tabs"}, ("auto-loaded-context", "CLAUDE.md", "CLAUDE.md")),
    ({"lib/.cursor/rules/a.mdc": "x"}, ("auto-loaded-context", "lib/.cursor", ".cursor/")),
    ({".git/config": "[core]"}, ("suspicious-metadata", ".git", ".git/")),
    ({".git": "gitdir: ../x"}, ("suspicious-metadata", ".git", ".git/")),
    ({".env": "TOKEN=1"}, ("suspicious-metadata", ".env", ".env")),
    ({"config/.env.production": "TOKEN=1"}, ("suspicious-metadata", "config/.env.production", ".env.*")),
    ({"deploy/id_ed25519": "key"}, ("suspicious-metadata", "deploy/id_ed25519", "id_ed25519")),
    ({"home/.aws/credentials": "[default]"}, ("suspicious-metadata", "home/.aws", ".aws/")),
    ({"certs/server.pem": "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n"}, ("suspicious-metadata", "certs/server.pem", "secret-shaped-content")),
    ({"settings.py": "AWS_KEY = 'AKIAABCDEFGHIJKLMNOP'\n"}, ("suspicious-metadata", "settings.py", "secret-shaped-content")),
    ({".memtrial/task.json": "{}"}, ("suspicious-metadata", ".memtrial", ".memtrial/")),
    ({"verifier.sh": "exit 0"}, ("suspicious-metadata", "verifier.sh", "verifier.sh")),
    ({"docs/NOTES.md": "Runs under memtrial."}, ("benchmark-awareness", "docs/NOTES.md", "harness-identity-term")),
    ({"docs/NOTES.md": "This is the memory-off arm."}, ("benchmark-awareness", "docs/NOTES.md", "harness-identity-term")),
    ({"src/x.py": "# ablate:graph\n"}, ("benchmark-awareness", "src/x.py", "harness-identity-term")),
    ({"fix.patch": "anything"}, ("patch-or-diff", "fix.patch", "patch-file-suffix")),
    ({"src/app.py.orig": "old"}, ("patch-or-diff", "src/app.py.orig", "patch-file-suffix")),
    ({"src/app.py.rej": "old"}, ("patch-or-diff", "src/app.py.rej", "patch-file-suffix")),
    ({"notes.txt": "--- a/src/app.py\n+++ b/src/app.py\n@@ -1,2 +1,2 @@\n-x\n+y\n"}, ("patch-or-diff", "notes.txt", "unified-diff-hunk")),
    ({"notes.txt": "see\ndiff --git a/src/app.py b/src/app.py\n"}, ("patch-or-diff", "notes.txt", "unified-diff-hunk")),
    ({"docs/ops.md": "A partial delivery ends with exit status 3."}, ("solution-leak", "docs/ops.md", "answer-phrase")),
    ({"docs/ops.md": "Standup at 9:15 daily."}, ("solution-leak", "docs/ops.md", "answer-phrase")),
    ({"docs/ops.md": "ends with EXIT\n  STATUS 3."}, ("solution-leak", "docs/ops.md", "answer-phrase")),
]

# Ordinary engineering files that share words with the rules and must not fire.
QUIET = [
    {"tests/conftest.py": "# spin up a temp directory with test fixtures\n"},
    {"tests/fixtures/sample.json": "{}"},
    {"docs/design.md": "Each trial runs under a condition; the control flow is simple. Ground truth is synthetic."},
    {"docs/eval.md": "We benchmark the parser; the experiment arm of the A/B test is in ab.py."},
    {".env.example": "TOKEN=changeme"},
    {"src/agents/planner.py": "class Planner: ...\n"},
    {"docs/time.md": "The job runs at 19:15 and 09:150 is not a time."},
    {"docs/exit.md": "exit status 31 means retry; exit status 3a is not used"},
    {"docs/markdown.md": "Title\n---\n\nText\n+++\nmore\n"},
    {"src/memory.py": "def trial_run(): pass  # memory-on demand loading\n"},
    {"assets/logo.bin": b"\x00memtrial exit status 3" * 10},
    {"docs/diffing.md": "Use `git diff` to compare; a line starting with --- is a rule.\n"},
]


def certify_files(tmp_path: Path, files: dict[str, str | bytes], **kwargs: object):  # type: ignore[no-untyped-def]
    write_files(tmp_path / "tree", {**BASE, **files})
    return certify(tmp_path / "tree", answer_phrases=ANSWERS, runner_owned_names=("verifier.sh",), **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(("files", "expected"), FIRES, ids=[f"{e[0]}:{e[1]}" for _, e in FIRES])
def test_rule_fires(tmp_path: Path, files: dict[str, str], expected: tuple[str, str, str]) -> None:
    report = certify_files(tmp_path, files)
    assert report.verdict == "findings"
    assert expected in [(f.kind, f.path, f.rule) for f in report.findings]


@pytest.mark.parametrize("files", QUIET, ids=[next(iter(f)) for f in QUIET])
def test_ordinary_project_text_does_not_fire(tmp_path: Path, files: dict[str, str]) -> None:
    report = certify_files(tmp_path, files)
    assert report.findings == ()
    assert report.verdict == "clean"


def test_content_findings_carry_the_line(tmp_path: Path) -> None:
    report = certify_files(tmp_path, {"docs/ops.md": "one\ntwo\nexit status 3\n"})
    (finding,) = report.findings
    assert finding.line == 3
    assert "exit status 3" in finding.detail


def test_a_directory_is_reported_once(tmp_path: Path) -> None:
    report = certify_files(tmp_path, {f".claude/skills/s{i}.md": "x" for i in range(20)})
    assert [(f.kind, f.path) for f in report.findings] == [("auto-loaded-context", ".claude")]


def test_scan_counts_every_file_and_byte(tmp_path: Path) -> None:
    report = certify_files(tmp_path, {})
    (scan,) = report.scans
    assert scan.files_scanned == 2
    assert scan.bytes_scanned == sum(len(v) for v in BASE.values())


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("Please make the partial path exit with exit status 3.", True),
        ("Please make the partial path exit correctly.", False),
        ("Which run is the memory-on arm?", True),
        ("Add fixtures for the new parser tests.", False),
    ],
    ids=["answer-in-prompt", "clean-prompt", "harness-term-in-prompt", "fixture-word-in-prompt"],
)
def test_challenge_text_is_a_surface(tmp_path: Path, text: str, fires: bool) -> None:
    report = certify_files(tmp_path, {}, challenge_texts={"prompt": text})
    assert bool(report.findings) is fires
    assert all(f.surface == "challenge" and f.path == "prompt" for f in report.findings)


@pytest.mark.parametrize(
    ("graph", "expected"),
    [
        ({"project": "logship", "nodes": [{"body": "spin up a temp directory with test fixtures"}]}, []),
        ({"project": "logship-fixture", "nodes": []}, [("benchmark-awareness", "g.json:project")]),
        ({"workspace": "negative control", "nodes": []}, [("benchmark-awareness", "g.json:workspace")]),
        ({"branch": "main", "nodes": [{"body": "runs under memtrial"}]}, [("benchmark-awareness", "g.json:nodes[0].body")]),
        ({"project": "x", "nodes": [{"body": "exit status 3 on partial delivery"}]}, []),
        ({"project": "x", "nodes": [{"body": "--- a/x\n+++ b/x\n@@ -1 +1 @@\n"}]}, [("patch-or-diff", "g.json:nodes[0].body")]),
    ],
    ids=["prose-fixtures-in-body", "fixture-in-project", "control-in-workspace", "harness-in-body", "answer-in-memory-is-the-point", "diff-in-body"],
)
def test_graph_identity_fields_get_the_strict_terms_bodies_do_not(tmp_path: Path, graph: dict[str, object], expected: list[tuple[str, str]]) -> None:
    write_files(tmp_path / "tree", BASE)
    path = tmp_path / "g.json"
    path.write_text(json.dumps(graph))
    report = certify(tmp_path / "tree", graphs=[path], answer_phrases=ANSWERS)
    assert [(f.kind, f.path) for f in report.findings] == expected
    assert [s.surface for s in report.scans] == ["source", "graph"]


def test_evidence_corpus_is_scanned(tmp_path: Path) -> None:
    write_files(tmp_path / "tree", BASE)
    write_files(tmp_path / "evidence", {"notes/AGENTS.md": "x"})
    report = certify(tmp_path / "tree", evidence=[tmp_path / "evidence"])
    assert [(f.surface, f.kind) for f in report.findings] == [("evidence", "auto-loaded-context")]


@pytest.mark.parametrize("surface", ["source", "evidence", "graph"], ids=["source", "evidence", "graph"])
def test_a_missing_surface_is_an_error_not_a_skip(tmp_path: Path, surface: str) -> None:
    write_files(tmp_path / "tree", BASE)
    missing = tmp_path / "missing"
    kwargs: dict[str, object] = {"evidence": [missing]} if surface == "evidence" else {"graphs": [missing]} if surface == "graph" else {}
    source = missing if surface == "source" else tmp_path / "tree"
    with pytest.raises(MissingSurfaceError, match="never skips a surface"):
        certify(source, **kwargs)  # type: ignore[arg-type]


def test_an_empty_corpus_fails_because_the_gate_checked_nothing(tmp_path: Path) -> None:
    (tmp_path / "tree").mkdir()
    with pytest.raises(MissingSurfaceError, match="a gate that checks nothing cannot pass"):
        certify(tmp_path / "tree")


def test_the_opt_out_records_unchecked_never_clean(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(UNCHECKED_OPT_OUT, "1")
    report = certify(tmp_path / "missing")
    assert report.verdict == "unchecked"
    assert report.unchecked == (f"source corpus {tmp_path / 'missing'}",)


def test_a_clean_report_over_nothing_cannot_be_constructed() -> None:
    from tasks_lib.contracts import CertificationReport, ContractError, parse_document as parse

    with pytest.raises(ContractError, match="checked nothing"):
        parse(CertificationReport, {"schema_version": 1, "verdict": "clean", "scans": [], "findings": []}, "c.json")


def _fixture_manifest(tmp_path: Path, digest: str) -> Path:
    manifest = parse_document(
        FixtureManifest,
        {
            "schema_version": 1,
            "fixture_id": "logship",
            "source": {"repository": "https://example.org/logship.git", "commit": "a" * 40},
            "arms": [{"arm": "graph-on", "graph": {"path": "arms/graph.json", "sha256": digest}}],
        },
        "fixture.json",
    )
    path = tmp_path / "fixture.json"
    path.write_bytes(dump_document(manifest))
    return path


def test_fixture_arms_are_certified_after_their_digests_are_checked(tmp_path: Path) -> None:
    write_files(tmp_path / "tree", BASE)
    write_files(tmp_path, {"arms/graph.json": json.dumps({"project": "fixture-logship"})})
    good = _fixture_manifest(tmp_path, sha256_file(tmp_path / "arms/graph.json"))
    report = certify_path(tmp_path / "tree", fixture=good)
    assert [(f.surface, f.path) for f in report.findings] == [("graph", "graph.json:project")]
    bad = _fixture_manifest(tmp_path, "0" * 64)
    with pytest.raises(DigestMismatchError, match="arms/graph.json has sha256"):
        certify_path(tmp_path / "tree", fixture=bad)
