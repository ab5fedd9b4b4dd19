"""Certification: each of the five kinds fires on what it should, never on ordinary prose, and fails closed."""

from __future__ import annotations

import gzip
import io
import json
import random
import tarfile
import zipfile
from pathlib import Path

import pytest

from gitrepo import write_files
from tasks_lib.contracts import FixtureManifest, dump_document, parse_document
from tasks_lib.corpus.certify import UNCHECKED_OPT_OUT, certify, certify_path
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
    ({".envrc": "export TOKEN=1"}, ("suspicious-metadata", ".envrc", ".envrc")),
    ({"config/.env.bak": "TOKEN=1"}, ("suspicious-metadata", "config/.env.bak", ".env")),
    ({"CLAUDE.md.bak": "use tabs"}, ("auto-loaded-context", "CLAUDE.md.bak", "CLAUDE.md")),
    ({"memory-bank/activeContext.md": "x"}, ("auto-loaded-context", "memory-bank", "memory-bank/")),
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
    {"assets/logo.bin": b"\x89PNG\r\n\x1a\n" + (bytes(range(256)) + b"memtrial exit status 3") * 10},
    {"docs/direnv.md": "We load .envrc files with direnv; see envrc.example.\n"},
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
    from tasks_lib.contracts import CertificationReport, ContractError
    from tasks_lib.contracts import parse_document as parse

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


# --------------------------------------------------------------------------- one table per rule added for issue #15


def found(report) -> list[tuple[str, str, str]]:  # type: ignore[no-untyped-def]
    return [(f.kind, f.path, f.rule) for f in report.findings]


def zip_bytes(members: dict[str, str | bytes], method: int = zipfile.ZIP_DEFLATED) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    return buffer.getvalue()


def tar_bytes(members: dict[str, str | bytes], mode: str = "w:gz") -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as archive:  # type: ignore[call-overload]
        for name, content in members.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(name)
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def encrypted_zip(name: str) -> bytes:
    """A zip whose one member carries the 'encrypted' flag (the standard library cannot write real encryption)."""
    data = bytearray(zip_bytes({name: "hidden"}))
    data[6] |= 0x1
    central = data.index(b"PK\x01\x02")
    data[central + 8] |= 0x1
    return bytes(data)


def crc_broken_zip(name: str) -> bytes:
    data = zip_bytes({name: "ordinary text"}, zipfile.ZIP_STORED)
    return data.replace(b"ordinary text", b"ordinary tex!")


ANNOUNCE = "experiment-announcement"
ANNOUNCEMENT_CASES = [
    ("This repository is a benchmark fixture for memory systems.", [("benchmark-awareness", "docs/NOTES.md", ANNOUNCE)]),
    ("Note: you are being evaluated on this change.", [("benchmark-awareness", "docs/NOTES.md", ANNOUNCE)]),
    ("You\u2019re currently being benchmarked.", [("benchmark-awareness", "docs/NOTES.md", ANNOUNCE)]),
    ("The project is\npart of an evaluation scenario.", [("benchmark-awareness", "docs/NOTES.md", ANNOUNCE)]),
    ("you are being eval\u200buated", [("benchmark-awareness", "docs/NOTES.md", ANNOUNCE)]),
    ("We benchmark the parser against the evaluation fixtures in tests/.", []),
    ("This repository is a benchmark suite for JSON parsers.", []),
    ("You are being redirected to the login page.", []),
]


@pytest.mark.parametrize(
    ("text", "expected"),
    ANNOUNCEMENT_CASES,
    ids=[
        "prose-calls-the-tree-a-benchmark-fixture", "prose-tells-the-reader-it-is-evaluated", "curly-apostrophe-hides-the-address",
        "line-break-hides-the-announcement", "zero-width-space-hides-the-announcement", "benchmark-and-evaluation-as-ordinary-words",
        "a-benchmark-project-describing-itself", "being-redirected-is-not-being-evaluated",
    ],
)
def test_prose_announcing_the_experiment_is_benchmark_awareness(tmp_path: Path, text: str, expected: list[tuple[str, str, str]]) -> None:
    """An agent told it is inside a benchmark behaves differently; ordinary uses of the words stay clean."""
    assert found(certify_files(tmp_path, {"docs/NOTES.md": text})) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Runs under mem\u200btrial.", [("benchmark-awareness", "docs/x.md", "harness-identity-term")]),
        ("Runs under \uff4d\uff45\uff4d\uff54\uff52\uff49\uff41\uff4c.", [("benchmark-awareness", "docs/x.md", "harness-identity-term")]),
        ("Patients in the treatment arm received 10 mg daily; the control arm received placebo.", []),
        ("The tare task zeroes the load cell at boot; the tare weight is then subtracted.", []),
    ],
    ids=["zero-width-space-hides-the-harness-name", "fullwidth-letters-hide-the-harness-name", "clinical-treatment-arm", "firmware-tare-task"],
)
def test_harness_terms_see_through_unicode_but_not_into_domain_prose(tmp_path: Path, text: str, expected: list[tuple[str, str, str]]) -> None:
    """The harness's name fires however it is spelled; a clinical or firmware README never does."""
    assert found(certify_files(tmp_path, {"docs/x.md": text})) == expected


UTF16_NOTE = "intro\nRuns under memtrial.\n"


@pytest.mark.parametrize(
    ("data", "expected"),
    [
        (UTF16_NOTE.encode("utf-16"), [("harness-identity-term", 2)]),
        (UTF16_NOTE.encode("utf-16-le"), [("harness-identity-term", 2)]),
        (UTF16_NOTE.encode("utf-16-be"), [("harness-identity-term", 2)]),
        (UTF16_NOTE.encode("utf-32"), [("harness-identity-term", 2)]),
        (UTF16_NOTE.encode() + b"\0" * 64, [("harness-identity-term", 2)]),
        (b"\0" + b"intro\nStandup at 9:15 daily.\n", [("answer-phrase", 2)]),
        (b"\0".join(bytes([c]) for c in b"Standup at 9:15 daily."), [("answer-phrase", 1)]),
        (b"\x00memtrial exit status 3" * 10, [("harness-identity-term", 1), ("answer-phrase", 1)]),
        ("Each trial runs under a condition.\n".encode("utf-16"), []),
        (b"\x89PNG\r\n\x1a\n" + random.Random(15).randbytes(4000) + b"memtrial exit status 3", []),
    ],
    ids=[
        "utf16-with-bom-is-read", "utf16le-without-bom-is-read", "utf16be-without-bom-is-read", "utf32-with-bom-is-read",
        "nul-padded-text-is-read", "one-leading-nul-does-not-hide-a-file", "nul-between-every-byte-is-read",
        "nul-joined-text-is-read-as-displayed", "utf16-ordinary-prose-stays-clean", "binary-noise-around-a-term-is-binary",
    ],
)
def test_utf16_and_nul_padded_files_are_decoded_and_scanned(tmp_path: Path, data: bytes, expected: list[tuple[str, int]]) -> None:
    """A NUL or a UTF-16 encoding used to make a file 'binary' and unscanned; now it is read as text, with its lines."""
    report = certify_files(tmp_path, {"docs/notes.txt": data})
    assert sorted((f.rule, f.line) for f in report.findings) == sorted(expected)
    assert all(f.path == "docs/notes.txt" for f in report.findings)


def nested(depth: int) -> bytes:
    data = zip_bytes({"AGENTS.md": "x"})
    for _ in range(depth - 1):
        data = zip_bytes({"inner.zip": data})
    return data


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"docs.zip": zip_bytes({"CLAUDE.md": "use tabs", "src/a.py": "a"})}, [("auto-loaded-context", "docs.zip:CLAUDE.md", "CLAUDE.md")]),
        ({"b.tar.gz": tar_bytes({"./.claude/settings.json": "{}", ".claude/skills/s.md": "x"})}, [("auto-loaded-context", "b.tar.gz:.claude", ".claude/")]),
        ({"b.tgz": tar_bytes({"pkg/AGENTS.md~": "x"})}, [("auto-loaded-context", "b.tgz:pkg/AGENTS.md~", "AGENTS.md")]),
        ({"b.tar": tar_bytes({"notes.txt": "Runs under memtrial."}, "w")}, [("benchmark-awareness", "b.tar:notes.txt", "harness-identity-term")]),
        ({"data.bin": zip_bytes({"GEMINI.md": "x"})}, [("auto-loaded-context", "data.bin:GEMINI.md", "GEMINI.md")]),
        ({"o.tar.gz": tar_bytes({"i.zip": zip_bytes({"AGENTS.md": "x"})})}, [("auto-loaded-context", "o.tar.gz:i.zip:AGENTS.md", "AGENTS.md")]),
        ({"deep.zip": nested(4)}, [("suspicious-metadata", "deep.zip:inner.zip:inner.zip:inner.zip", "unreadable-archive")]),
        ({"broken.zip": b"PK\x03\x04 not really a zip"}, [("suspicious-metadata", "broken.zip", "unreadable-archive")]),
        ({"half.tar.gz": tar_bytes({"a.txt": "x" * 4000})[:40]}, [("suspicious-metadata", "half.tar.gz", "unreadable-archive")]),
        ({"s.zip": encrypted_zip("CLAUDE.md")}, [("auto-loaded-context", "s.zip:CLAUDE.md", "CLAUDE.md"), ("suspicious-metadata", "s.zip:CLAUDE.md", "unreadable-archive-member")]),
        ({"c.zip": crc_broken_zip("notes.txt")}, [("suspicious-metadata", "c.zip:notes.txt", "unreadable-archive-member")]),
        ({"dist/app.zip": zip_bytes({"src/app.py": "x", "tests/fixtures/a.json": "{}", "README.md": "# app"})}, []),
        ({"logs/app.log.gz": gzip.compress(b"started\nRuns fine.\n")}, []),
    ],
    ids=[
        "zip-member-is-agent-memory", "tar-gz-member-folder-is-a-tool-folder", "tgz-member-backup-copy", "tar-member-content-is-scanned",
        "zip-named-as-data-is-still-opened", "archive-inside-an-archive-is-opened", "archive-nested-too-deep-is-a-finding",
        "unreadable-zip-is-a-finding-not-a-skip", "truncated-tar-is-a-finding-not-a-skip", "encrypted-member-is-a-finding-not-a-skip",
        "member-with-bad-crc-is-a-finding-not-a-skip", "ordinary-archive-stays-clean", "gzip-of-a-log-is-not-an-archive",
    ],
)
def test_archive_members_get_the_path_and_content_rules(tmp_path: Path, files: dict[str, bytes], expected: list[tuple[str, str, str]]) -> None:
    """An archive used to be one opaque file; its members are now certified, and one that cannot be read is reported."""
    assert sorted(found(certify_files(tmp_path, files))) == sorted(expected)


DIFF = "--- a/{0}\n+++ b/{0}\n@@ -1 +1 @@\n-x\n+y\n"


@pytest.mark.parametrize(
    ("files", "expected"),
    [
        ({"docs/fix.txt": "@@ -3,2 +3,2 @@\n-warn=80\n+warn=92\n"}, [("docs/fix.txt", 1)]),
        ({"docs/howto.md": "Apply:\n\n" + "".join("    " + line + "\n" for line in DIFF.format("src/app.py").splitlines())}, [("docs/howto.md", 3)]),
        ({"docs/mail.txt": "> @@ -1 +1 @@\n> -x\n> +y\n"}, [("docs/mail.txt", 1)]),
        ({"docs/notes.md": "see\n  diff --git a/src/app.py b/src/app.py\n"}, [("docs/notes.md", 2)]),
        ({"CHANGELOG.md": "## 2.0\n\n```diff\n" + DIFF.format("src/app.py") + "```\n"}, [("CHANGELOG.md", 4)]),
        ({"CHANGELOG.md": "## 2.0\n\n```diff\n" + DIFF.format("config.yml") + "```\n"}, []),
        ({"docs/HISTORY.rst": "2.0\n\n    @@ -1 +1 @@\n    -timeout: 5\n    +timeout: 10\n"}, []),
        ({"dist/docs.zip": zip_bytes({"CHANGELOG.md": DIFF.format("config.yml")})}, []),
        ({"docs/format.md": "A line like @@ -1,3 +1,4 @@ starts a hunk.\n"}, []),
        ({"docs/format.md": "@@ -1 +1 @@\n\nis how a hunk starts.\n"}, []),
    ],
    ids=[
        "hunk-only-patch", "diff-indented-in-markdown", "diff-quoted-in-mail", "indented-diff-git-line",
        "changelog-diff-of-an-output-path", "changelog-diff-of-another-file", "changelog-hunk-names-no-path", "changelog-inside-an-archive",
        "hunk-header-quoted-inline", "hunk-header-without-a-hunk-line",
    ],
)
def test_diffs_fire_in_any_shape_except_a_changelog_quoting_another_file(tmp_path: Path, files: dict[str, str | bytes], expected: list[tuple[str, int]]) -> None:
    """A patch without headers or indented in Markdown used to pass; a changelog's upgrade diff no longer fails a real project."""
    report = certify_files(tmp_path, files, output_paths=("src/",))
    assert [(f.path, f.line) for f in report.findings] == expected
    assert all(f.rule == "unified-diff-hunk" for f in report.findings)


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("aws_access_key_id = AKIAABCDEFGHIJKLMNOP\n", True),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLF\n", True),
        ("aws_access_key_id = AKIAIOSFODNN7EXAMPLE\naws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n", False),
        ("AKIAI44QH8DHBEXAMPLE is the second user's key in the AWS guide.\n", False),
    ],
    ids=["real-shaped-key-id", "near-copy-of-the-documented-example", "aws-documented-example-pair", "aws-documented-second-example"],
)
def test_secret_rule_spares_only_the_aws_documented_examples(tmp_path: Path, text: str, fires: bool) -> None:
    """Projects quoting AWS's documentation must not fail; any other key id still does."""
    expected = [("suspicious-metadata", "docs/aws.md", "secret-shaped-content")] if fires else []
    assert found(certify_files(tmp_path, {"docs/aws.md": text})) == expected


@pytest.mark.parametrize(
    ("text", "fires"),
    [
        ("Standup at \uff19\uff1a\uff11\uff15 daily.", True),
        ("Standup at 9\u200b:15 daily.", True),
        ("A partial delivery ends with exit\u00a0status \uff13.", True),
        ("A partial delivery ends with ex\u00adit status 3.", True),
        ("\u4f1a\u8b70\u306f\uff11\uff19\uff1a\uff11\uff15\u304b\u3089", False),
        ("exit status \uff13\uff11 means retry", False),
    ],
    ids=[
        "fullwidth-digits-hide-the-answer", "zero-width-space-hides-the-answer", "nbsp-and-fullwidth-hide-the-answer",
        "soft-hyphen-hides-the-answer", "fullwidth-longer-time-is-another-time", "fullwidth-longer-number-is-another-number",
    ],
)
def test_answer_phrases_are_matched_on_folded_text(tmp_path: Path, text: str, fires: bool) -> None:
    """Fullwidth digits and zero-width characters used to hide an answer from the solution-leak rule."""
    expected = [("solution-leak", "docs/ops.md", "answer-phrase")] if fires else []
    assert found(certify_files(tmp_path, {"docs/ops.md": text})) == expected
