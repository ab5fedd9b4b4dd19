"""Certification: a static, model-free, read-only, fail-closed gate over every agent-visible surface.

It scans the source corpus, the evidence corpus, every graph artifact and the agent-visible text
of the challenge, and reports five kinds of finding (see `Finding.kind`). It never repairs what it
finds (redaction is the only code that changes a tree). A missing surface is an error, never a
skipped check; the one opt-out is the environment variable `MEMTRIAL_ALLOW_UNCHECKED_CORPUS=1`,
whose name says what it does, and the report's verdict is then `unchecked`, never `clean`.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tasks_lib.contracts import (
    ArtifactRef, CertificationReport, ChallengeManifest, Finding, FindingKind, FixtureManifest, Surface, SurfaceScan,
    TaskManifest, load_document,
)
from tasks_lib.errors import DigestMismatchError, MemtrialError, MissingSurfaceError
from tasks_lib.corpus.rules import AUTO_LOADED_CONTEXT, RuleSet
from tasks_lib.trees import sha256_file, walk_files

UNCHECKED_OPT_OUT = "MEMTRIAL_ALLOW_UNCHECKED_CORPUS"
BINARY_SNIFF = 8000
MAX_HITS_PER_RULE = 5

# Terms naming a harness or an arm. Deliberately narrow so real project prose does not trip them:
# "condition", "arm", "trial", "synthetic" and "ground truth" are ordinary engineering words.
HARNESS_TERMS: tuple[str, ...] = (
    r"memtrial", r"smriti[- ]?bench", r"stele[- ]?bench", r"memory[- ]o(?:n|ff) (?:arm|condition)",
    r"treatment arm", r"ablate:(?:all|[a-z]+)", r"tare (?:task|challenge)",
)
# Stricter terms, checked only in identity fields the benchmark writes itself (graph project,
# workspace, branch), never in bodies: "test fixtures" is ordinary prose in a real project.
IDENTITY_TERMS: tuple[str, ...] = HARNESS_TERMS + (
    r"fixtures?", r"control(?: arm| group)?", r"negative control", r"positive control", r"benchmark",
    r"evals?", r"evaluation", r"experiment", r"trial", r"tare", r"calibration", r"ablat(?:e|ion)",
    r"harness", r"treatment", r"holdout",
)
GRAPH_IDENTITY_FIELDS = ("project", "workspace", "branch", "name", "realm")

SUSPICIOUS_PATHS = RuleSet.of((
    ".git/", ".hg/", ".svn/", ".memtrial/",
    ".env", ".netrc", "_netrc", ".pypirc", ".git-credentials", ".htpasswd", ".aws/", ".ssh/",
    "credentials", "credentials.json", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
    "redaction.json", "certification.json", "corpus.json",
))
ENV_FILE = re.compile(r"(?:^|/)\.env\.(?!example$|sample$|template$|dist$|defaults$)[^/]+$", re.IGNORECASE)
SECRET_CONTENT = re.compile(
    rb"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----|\bAKIA[0-9A-Z]{16}\b"
    rb"|\bsk-ant-[A-Za-z0-9_-]{16,}|\bsk-(?:proj-)?[A-Za-z0-9]{32,}|\bgh[pousr]_[A-Za-z0-9]{36}\b"
    rb"|_authToken\s*=\s*\S+"
)
PATCH_SUFFIXES = (".patch", ".diff", ".orig", ".rej")
DIFF_HUNK = re.compile(
    rb"^--- \S[^\n]*\n\+\+\+ \S[^\n]*\n@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@|^diff --git a/\S+ b/\S+$", re.MULTILINE
)


@dataclass(frozen=True)
class Prefiltered:
    """A regex run only on texts that contain one of its literal anchors (checked on lowercased bytes).

    Python's `re` does no literal prefiltering for alternations; a substring test first makes the
    common case (no anchor anywhere) cost one pass of memchr-speed search instead of a regex scan.
    """

    pattern: re.Pattern[bytes]
    anchors: tuple[bytes, ...]

    def finditer(self, data: bytes, lowered: bytes) -> Iterator[re.Match[bytes]]:
        if any(anchor in lowered for anchor in self.anchors):
            yield from self.pattern.finditer(data)


def _term_regex(terms: Sequence[str]) -> re.Pattern[bytes]:
    return re.compile(rb"(?<![A-Za-z0-9])(?:" + b"|".join(t.encode() for t in terms) + rb")(?![A-Za-z0-9])", re.IGNORECASE)


def phrase_regex(phrases: Sequence[str]) -> Prefiltered | None:
    """One case-insensitive matcher for answer phrases: whitespace-tolerant, word-bounded at word ends."""
    parts = []
    anchors = []
    for phrase in phrases:
        words = phrase.strip().split()
        if not words:
            continue
        body = rb"\s+".join(re.escape(w.encode()) for w in words)
        head = rb"(?<!\w)" if re.match(r"\w", words[0]) else b""
        tail = rb"(?!\w)" if re.search(r"\w$", words[-1]) else b""
        parts.append(head + body + tail)
        anchors.append(words[0].lower().encode())
    return Prefiltered(re.compile(b"|".join(parts), re.IGNORECASE), tuple(anchors)) if parts else None


HARNESS_RE = Prefiltered(_term_regex(HARNESS_TERMS), (b"memtrial", b"smriti", b"stele", b"memory", b"treatment", b"ablate:", b"tare"))
IDENTITY_RE = _term_regex(IDENTITY_TERMS)
DIFF_RE = Prefiltered(DIFF_HUNK, (b"\n+++ ", b"diff --git"))
SECRET_RE = Prefiltered(SECRET_CONTENT, (b"private key-----", b"akia", b"sk-", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"_authtoken"))


@dataclass
class _Collector:
    """Accumulates findings and scan counts."""

    findings: list[Finding] = field(default_factory=list)
    scans: list[SurfaceScan] = field(default_factory=list)
    unchecked: list[str] = field(default_factory=list)

    def add(self, kind: FindingKind, surface: Surface, path: str, rule: str, detail: str, line: int | None = None) -> None:
        self.findings.append(Finding(kind=kind, surface=surface, path=path, line=line, rule=rule, detail=detail[:300]))


def _line_of(data: bytes, offset: int) -> int:
    return data.count(b"\n", 0, offset) + 1


def _excerpt(data: bytes, start: int, end: int) -> str:
    return data[start:end].decode("utf-8", errors="replace").replace("\n", "\\n")[:120]


def _scan_content(out: _Collector, surface: Surface, path: str, data: bytes, answers: Prefiltered | None) -> None:
    """Content rules for one text: harness identity, answer phrases, diff hunks, secrets."""
    checks: list[tuple[FindingKind, str, Prefiltered | None]] = [
        ("benchmark-awareness", "harness-identity-term", HARNESS_RE),
        ("solution-leak", "answer-phrase", answers),
        ("patch-or-diff", "unified-diff-hunk", DIFF_RE),
        ("suspicious-metadata", "secret-shaped-content", SECRET_RE),
    ]
    lowered = data.lower()
    for kind, rule, matcher in checks:
        if matcher is None:
            continue
        for count, match in enumerate(matcher.finditer(data, lowered)):
            if count >= MAX_HITS_PER_RULE:
                break
            out.add(kind, surface, path, rule, f"found {_excerpt(data, match.start(), match.end())!r}", _line_of(data, match.start()))


def _scan_path(out: _Collector, surface: Surface, rel: str, reported_dirs: set[str], extra_wiring: RuleSet) -> None:
    """Path rules for one file: auto-loaded context, suspicious metadata, patch files."""
    for kind, rules in (("auto-loaded-context", AUTO_LOADED_CONTEXT), ("suspicious-metadata", SUSPICIOUS_PATHS), ("suspicious-metadata", extra_wiring)):
        rule = rules.first_match(rel)
        if rule is None:
            continue
        if rule.endswith("/"):
            parts = rel.split("/")
            name = rule.strip("/").split("/")[-1].lower()
            idx = next(i for i, p in enumerate(parts) if p.lower() == name)
            where = "/".join(parts[: idx + 1])
            if where in reported_dirs:
                return
            reported_dirs.add(where)
            out.add(kind, surface, where, rule, f"{where} matches {rule} (a tool or metadata folder)")  # type: ignore[arg-type]
        else:
            out.add(kind, surface, rel, rule, f"file matches {rule}")  # type: ignore[arg-type]
        return
    if ENV_FILE.search(rel):
        out.add("suspicious-metadata", surface, rel, ".env.*", "environment file")
    if rel.lower().endswith(PATCH_SUFFIXES):
        out.add("patch-or-diff", surface, rel, "patch-file-suffix", "patch, diff or merge leftover file")


def _scan_tree(out: _Collector, surface: Surface, root: Path, answers: Prefiltered | None, extra_wiring: RuleSet) -> None:
    if root.is_file():
        files, base = [root.name], root.parent
    else:
        files, base = walk_files(root), root
    if not files:
        raise MissingSurfaceError(f"{root}: the {surface} surface has no files; a gate that checks nothing cannot pass")
    reported_dirs: set[str] = set()
    total = 0
    for rel in files:
        _scan_path(out, surface, rel, reported_dirs, extra_wiring)
        path = base / rel
        if path.is_symlink():
            data = os.readlink(path).encode()
        else:
            data = path.read_bytes()
        total += len(data)
        if b"\0" in data[:BINARY_SNIFF]:
            continue
        _scan_content(out, surface, rel, data, answers)
    out.scans.append(SurfaceScan(surface=surface, name=str(root), files_scanned=len(files), bytes_scanned=total))


def _strings(node: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Every string in a JSON value with its dotted location."""
    if isinstance(node, str):
        yield prefix or "$", node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(value, f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _strings(value, f"{prefix}[{index}]")


def _scan_graph(out: _Collector, graph: Path) -> None:
    """Identity fields get the strict terms; bodies get the content rules except answer phrases.

    A graph is the memory under test: stating the task's answer is what a planted memory is for,
    so solution-leak is checked on the corpus and the challenge, not on graph bodies.
    """
    data = graph.read_bytes()
    name = graph.name
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        document = None
    if isinstance(document, dict):
        for key in GRAPH_IDENTITY_FIELDS:
            value = document.get(key)
            if isinstance(value, str):
                for match in IDENTITY_RE.finditer(value.encode()):
                    out.add("benchmark-awareness", "graph", f"{name}:{key}", "identity-term", f"identity field {key}={value!r} says {match.group().decode()!r}")
                    break
        for where, text in _strings(document):
            _scan_content(out, "graph", f"{name}:{where}", text.encode(), None)
    else:
        _scan_content(out, "graph", name, data, None)
    out.scans.append(SurfaceScan(surface="graph", name=name, files_scanned=1, bytes_scanned=len(data)))


def _require(out: _Collector, path: Path, what: str) -> bool:
    """True when `path` exists; otherwise raise, or record it as unchecked under the opt-out."""
    if path.exists():
        return True
    if os.environ.get(UNCHECKED_OPT_OUT) == "1":
        out.unchecked.append(f"{what} {path}")
        return False
    raise MissingSurfaceError(
        f"{path}: the {what} does not exist; certification never skips a surface "
        f"(set {UNCHECKED_OPT_OUT}=1 only to record it as unchecked)"
    )


def certify(
    source: Path,
    *,
    challenge_texts: Mapping[str, str] | None = None,
    answer_phrases: Sequence[str] = (),
    evidence: Sequence[Path] = (),
    graphs: Sequence[Path] = (),
    runner_owned_names: Sequence[str] = (),
) -> CertificationReport:
    """Scan every agent-visible surface and return the report; reads only.

    `challenge_texts` maps a challenge field (prompt, follow-up) to its agent-visible text;
    `runner_owned_names` are extra path rules for runner-owned wiring (e.g. the verifier's name).
    Raises MissingSurfaceError for a missing or empty surface (unless the opt-out is set).
    """
    out = _Collector()
    answers = phrase_regex(answer_phrases)
    wiring = RuleSet.of(tuple(runner_owned_names))
    if _require(out, source, "source corpus"):
        _scan_tree(out, "source", source, answers, wiring)
    for folder in evidence:
        if _require(out, folder, "evidence corpus"):
            _scan_tree(out, "evidence", folder, answers, wiring)
    for graph in graphs:
        if _require(out, graph, "graph artifact"):
            _scan_graph(out, graph)
    if challenge_texts:
        for field_name, text in challenge_texts.items():
            _scan_content(out, "challenge", field_name, text.encode(), answers)
        size = sum(len(t.encode()) for t in challenge_texts.values())
        out.scans.append(SurfaceScan(surface="challenge", name="challenge", files_scanned=len(challenge_texts), bytes_scanned=size))
    findings = sorted(out.findings, key=lambda f: (f.surface, f.path, f.line or 0, f.kind, f.rule))
    verdict = "findings" if findings else ("unchecked" if out.unchecked else "clean")
    return CertificationReport(verdict=verdict, scans=tuple(out.scans), findings=tuple(findings), unchecked=tuple(out.unchecked))


def challenge_surface(manifest: ChallengeManifest | TaskManifest) -> tuple[dict[str, str], tuple[str, ...], tuple[str, ...]]:
    """Agent-visible texts, answer phrases and runner-owned file names of a challenge or task."""
    if isinstance(manifest, TaskManifest):
        texts = {"instruction": manifest.instruction}
        phrases = manifest.answer_terms
    else:
        texts = {"prompt": manifest.prompt}
        phrases = manifest.answer_phrases
    texts.update({f"follow_up_prompts[{i}]": text for i, text in enumerate(manifest.follow_up_prompts)})
    return texts, phrases, (Path(manifest.verifier.asset.path).name,)


def resolve_pinned(ref: ArtifactRef, base: Path, manifest: Path) -> Path:
    """The file a manifest pins, checked against its digest; raises DigestMismatchError or MissingSurfaceError."""
    path = base / ref.path
    if not path.exists():
        raise MissingSurfaceError(f"{manifest}: pinned artifact {ref.path} does not exist")
    actual = sha256_file(path) if path.is_file() else None
    if actual != ref.sha256:
        raise DigestMismatchError(f"{manifest}: {ref.path} has sha256 {actual}, the manifest pins {ref.sha256}; re-pin or restore the file")
    return path


def certify_path(
    path: Path,
    *,
    challenge: Path | None = None,
    fixture: Path | None = None,
    evidence: Sequence[Path] = (),
    graphs: Sequence[Path] = (),
) -> CertificationReport:
    """Certify a packaged corpus folder (its tree/) or a plain tree, with optional challenge and fixture manifests."""
    source = path / "tree" if (path / "corpus.json").is_file() and (path / "tree").is_dir() else path
    texts: dict[str, str] = {}
    phrases: tuple[str, ...] = ()
    wiring: tuple[str, ...] = ()
    if challenge is not None:
        manifest = load_document(challenge)
        if not isinstance(manifest, (ChallengeManifest, TaskManifest)):
            raise MemtrialError(f"{challenge}: --challenge takes a challenge.json or task.json, not a {manifest.KIND}")
        texts, phrases, wiring = challenge_surface(manifest)
    evidence, graphs = list(evidence), list(graphs)
    if fixture is not None:
        fixture_doc = load_document(fixture, FixtureManifest)
        for arm in fixture_doc.arms:
            if arm.graph is not None:
                graphs.append(resolve_pinned(arm.graph, fixture.parent, fixture))
            if arm.evidence is not None:
                evidence.append(resolve_pinned(arm.evidence, fixture.parent, fixture))
    return certify(source, challenge_texts=texts, answer_phrases=phrases, evidence=evidence, graphs=graphs, runner_owned_names=wiring)
