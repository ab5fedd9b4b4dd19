"""Certification: a static, model-free, read-only, fail-closed gate over every agent-visible surface.

It scans the source corpus, the evidence corpus, every graph artifact and the agent-visible text
of the challenge, and reports five kinds of finding (see `Finding.kind`). It never repairs what it
finds (redaction is the only code that changes a tree). A missing surface is an error, never a
skipped check; the one opt-out is the environment variable `MEMTRIAL_ALLOW_UNCHECKED_CORPUS=1`,
whose name says what it does, and the report's verdict is then `unchecked`, never `clean`.

Content is read as an agent would read it: a UTF-16 or NUL-padded file is decoded (`decode_text`),
format characters and compatibility forms are folded (`fold_text`: `９：１５` and `9\u200b:15` are
`9:15`), and the members of a zip or tar archive in the tree get the same path and content rules.
A member that cannot be read is a finding, never a skip.
"""

from __future__ import annotations

import codecs
import functools
import io
import json
import lzma
import os
import re
import tarfile
import unicodedata
import zipfile
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Literal

from tasks_lib.contracts import (
    ArtifactRef,
    CertificationReport,
    ChallengeManifest,
    Document,
    Finding,
    FindingKind,
    FixtureManifest,
    Surface,
    SurfaceScan,
    TaskManifest,
    load_document,
)
from tasks_lib.corpus.rules import AUTO_LOADED_CONTEXT, RuleSet, unbacked, within
from tasks_lib.errors import DigestMismatchError, MemtrialError, MissingSurfaceError
from tasks_lib.settings import ALLOW_UNCHECKED_CORPUS
from tasks_lib.trees import sha256_file, walk_files

UNCHECKED_OPT_OUT = ALLOW_UNCHECKED_CORPUS.name
BINARY_SNIFF = 8000
MAX_HITS_PER_RULE = 5

# Terms naming a harness or an arm. Deliberately narrow so real project prose does not trip them:
# "condition", "arm", "trial", "synthetic" and "ground truth" are ordinary engineering words, and
# so are "treatment arm" (a clinical trial's README) and "tare task" (a scale's firmware); those two
# stay in IDENTITY_TERMS, which only fields the benchmark writes itself are checked against.
HARNESS_TERMS: tuple[str, ...] = (
    r"memtrial", r"smriti[- ]?bench", r"stele[- ]?bench", r"memory[- ]o(?:n|ff) (?:arm|condition)",
    r"ablate:(?:all|[a-z]+)",
)
# Prose that tells the reader it is inside an experiment. Narrow: the tree itself must be called a
# benchmark or evaluation fixture/task/scenario/episode, or the reader addressed as the one being
# evaluated; "benchmark", "evaluation" and "test fixture" alone are ordinary words and never fire.
ANNOUNCEMENTS: tuple[str, ...] = (
    r"(?:this|the)\s+(?:repository|repo|codebase|project|workspace|environment|sandbox|fixture|task)\s+is\s+"
    r"(?:(?:an?|the)\s+)?(?:part\s+of\s+(?:an?|the)\s+)?(?:benchmark|evaluation|eval)\s+(?:fixture|task|scenario|episode)s?",
    "you(?:\\s+are|(?:'|\u2019)re)\\s+(?:currently\\s+|now\\s+)?being\\s+(?:evaluated|benchmarked)",  # plain or curly apostrophe
)
# Stricter terms, checked only in identity fields the benchmark writes itself (graph project,
# workspace, branch), never in bodies: "test fixtures" is ordinary prose in a real project.
IDENTITY_TERMS: tuple[str, ...] = HARNESS_TERMS + (
    r"treatment arm", r"tare (?:task|challenge)", r"fixtures?", r"control(?: arm| group)?", r"negative control",
    r"positive control", r"benchmark", r"evals?", r"evaluation", r"experiment", r"trial", r"tare", r"calibration", r"ablat(?:e|ion)",
    r"harness", r"treatment", r"holdout",
)
GRAPH_IDENTITY_FIELDS = ("project", "workspace", "branch", "name", "realm")

SUSPICIOUS_PATHS = RuleSet.of((
    ".git/", ".hg/", ".svn/", ".memtrial/",
    ".env", ".envrc", ".netrc", "_netrc", ".pypirc", ".git-credentials", ".htpasswd", ".aws/", ".ssh/",
    "credentials", "credentials.json", "id_rsa", "id_dsa", "id_ecdsa", "id_ed25519",
    "redaction.json", "certification.json", "corpus.json",
))
# The two access key ids AWS's own documentation uses as examples (AKIAIOSFODNN7EXAMPLE and
# AKIAI44QH8DHBEXAMPLE); exact strings, so any other AKIA key still fires. (The documented secret
# key, wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY, matches no secret rule to begin with.)
AWS_DOC_KEY_IDS = rb"IOSFODNN7EXAMPLE|I44QH8DHBEXAMPLE"
ENV_FILE = re.compile(r"(?:^|/)\.env\.(?!example$|sample$|template$|dist$|defaults$)[^/]+$", re.IGNORECASE)
SECRET_CONTENT = re.compile(
    rb"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----|\bAKIA(?!" + AWS_DOC_KEY_IDS + rb"\b)[0-9A-Z]{16}\b"
    rb"|\bsk-ant-[A-Za-z0-9_-]{16,}|\bsk-(?:proj-)?[A-Za-z0-9]{32,}|\bgh[pousr]_[A-Za-z0-9]{36}\b"
    rb"|_authToken\s*=\s*\S+"
)
PATCH_SUFFIXES = (".patch", ".diff", ".orig", ".rej")
# A unified diff: file headers then a hunk, a `diff --git` line, or a bare hunk header followed by a
# hunk line; each may be indented or quoted (`    `, `> `) as in Markdown. The bare hunk needs its
# next line to start with -, + or a space, so a hunk header quoted inline in prose does not fire.
HUNK_HEADER = rb"@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@"
DIFF_HUNK = re.compile(
    rb"^[ \t>]*--- (?P<old>\S+)[^\n]*\n[ \t>]*\+\+\+ (?P<new>\S+)[^\n]*\n[ \t>]*" + HUNK_HEADER
    + rb"|^[ \t>]*diff --git a/(?P<a>\S+) b/(?P<b>\S+)[ \t]*$"
    + rb"|^[ \t>]*" + HUNK_HEADER + rb"[^\n]*\n[ \t>]*[-+ ]",
    re.MULTILINE,
)
# A changelog quotes diffs to show an upgrade. There a diff is a patch-or-diff finding only when
# its headers name a path the agent may write (the task's output paths): only then can it be
# applied as the answer. A headerless hunk in a changelog names no path and never fires; every
# changelog still goes through the answer-phrase rule, so a quoted diff that states the answer is
# a solution leak.
CHANGELOG = re.compile(r"(?:^|[/:])(?:change[-_]?log|changes|history|news|release[-_]?notes)(?:\.(?:md|markdown|rst|txt|adoc))?$", re.IGNORECASE)


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
    """One case-insensitive matcher for answer phrases (folded as text is): whitespace-tolerant, word-bounded at word ends."""
    parts = []
    anchors = []
    for phrase in phrases:
        words = fold_text(phrase).split()
        if not words:
            continue
        body = rb"\s+".join(re.escape(w.encode()) for w in words)
        head = rb"(?<!\w)" if re.match(r"\w", words[0]) else b""
        tail = rb"(?!\w)" if re.search(r"\w$", words[-1]) else b""
        parts.append(head + body + tail)
        anchors.append(words[0].encode().lower())
    return Prefiltered(re.compile(b"|".join(parts), re.IGNORECASE), tuple(anchors)) if parts else None


HARNESS_RE = Prefiltered(_term_regex(HARNESS_TERMS), (b"memtrial", b"smriti", b"stele", b"memory", b"ablate:"))
ANNOUNCEMENT_RE = Prefiltered(_term_regex(ANNOUNCEMENTS), (b"being", b"benchmark", b"eval"))
IDENTITY_RE = _term_regex(IDENTITY_TERMS)
DIFF_RE = Prefiltered(DIFF_HUNK, (b"@@ -", b"diff --git"))
SECRET_RE = Prefiltered(SECRET_CONTENT, (b"private key-----", b"akia", b"sk-", b"ghp_", b"gho_", b"ghu_", b"ghs_", b"ghr_", b"_authtoken"))


# --------------------------------------------------------------------------- reading text as an agent would

BOMS: tuple[tuple[bytes, str], ...] = (
    (codecs.BOM_UTF32_LE, "utf-32-le"), (codecs.BOM_UTF32_BE, "utf-32-be"), (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"),
)
UTF16_NUL_SHARE = 0.1
"""BOM-less UTF-16: at least this share of one byte parity is NUL (and nine times the other's)."""
BINARY_SHARE = 0.1
"""A reading with more than this share of control or undecodable characters is binary."""
UNREADABLE_CHAR = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")


def _reads_as_text(text: str) -> bool:
    sample = text[:BINARY_SNIFF]
    return len(UNREADABLE_CHAR.findall(sample)) <= BINARY_SHARE * len(sample)


def _nul_readings(data: bytes) -> Iterator[str]:
    """Readings of data holding NULs: BOM-less UTF-16 when its NULs keep to one byte parity, then NULs dropped."""
    sniff = data[:BINARY_SNIFF]
    even, odd = sniff[0::2].count(0), sniff[1::2].count(0)
    floor = UTF16_NUL_SHARE * len(sniff) / 2
    if odd >= floor and odd > 9 * even:
        yield data.decode("utf-16-le", errors="replace")
    elif even >= floor and even > 9 * odd:
        yield data.decode("utf-16-be", errors="replace")
    yield data.replace(b"\0", b"").decode("utf-8", errors="replace")


def decode_text(data: bytes) -> str | None:
    """The text a reader of `data` sees, or None when it is binary.

    A BOM names the encoding; data without NUL is UTF-8; data with NULs is read as BOM-less UTF-16
    when its NULs keep to one byte parity, else with its NULs dropped (NUL padding hides nothing
    from a reader), and is binary only when no reading is mostly text.
    """
    for bom, codec in BOMS:
        if data.startswith(bom):
            return data[len(bom) :].decode(codec, errors="replace")
    if b"\0" not in data:
        return data.decode("utf-8", errors="replace")
    return next((text for text in _nul_readings(data) if _reads_as_text(text)), None)


@functools.cache
def _format_chars() -> re.Pattern[str]:
    """Every format character (category Cf: zero-width, bidi controls, soft hyphen); they live in planes 0, 1 and 14."""
    planes = (range(0x20000), range(0xE0000, 0xE1000))
    ranges: list[list[int]] = []
    for c in (c for plane in planes for c in plane if unicodedata.category(chr(c)) == "Cf"):
        if ranges and ranges[-1][1] == c - 1:
            ranges[-1][1] = c
        else:
            ranges.append([c, c])
    # a class of ranges, not of single characters: ten times faster to match
    return re.compile("[" + "".join(f"{re.escape(chr(lo))}-{re.escape(chr(hi))}" for lo, hi in ranges) + "]")


def fold_text(text: str) -> str:
    """`text` as terms are matched against it: format characters dropped, then NFKC (fullwidth `９` is `9`).

    Neither step adds or removes a line break, so line numbers stay those of the original.
    """
    if text.isascii():
        return text
    return unicodedata.normalize("NFKC", _format_chars().sub("", text))


def _scannable(data: bytes) -> bytes | None:
    """What the content rules read: `data` itself when plain ASCII, else its decoded, folded UTF-8; None for binary."""
    if data.isascii() and b"\0" not in data:
        return data
    text = decode_text(data)
    return None if text is None else fold_text(text).encode()


# --------------------------------------------------------------------------- archives

ARCHIVE_SUFFIXES = (".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tbz2", ".tar.xz", ".txz")
ZIP_MAGIC = (b"PK\x03\x04", b"PK\x05\x06")
COMPRESSED_MAGIC = (b"\x1f\x8b", b"BZh", b"\xfd7zXZ\x00")
MAX_ARCHIVE_DEPTH = 3
"""Archives nested deeper than this are a finding, not opened."""
MAX_UNPACKED_BYTES = 256 << 20
"""Bytes one archive (with everything nested in it) may unpack to; more is a finding."""
ARCHIVE_ERRORS = (tarfile.TarError, zipfile.BadZipFile, zlib.error, lzma.LZMAError, EOFError, OSError, NotImplementedError, RuntimeError, ValueError)
"""What the standard library raises for a corrupt, truncated, encrypted or unsupported archive."""


class _Unreadable(Exception):
    """An archive certification cannot read to the end; the message says why."""


@dataclass(frozen=True)
class _Member:
    """One archive entry: its normalized path and content (a link's target), or why it cannot be read."""

    path: str
    data: bytes
    regular: bool = False
    problem: str | None = None


@dataclass
class _Budget:
    """Bytes an archive may still unpack to."""

    left: int = MAX_UNPACKED_BYTES

    def spend(self, size: int) -> None:
        if size > self.left:
            raise _Unreadable(f"unpacks to more than {MAX_UNPACKED_BYTES} bytes; certification reads no further")
        self.left -= size


def _archive_format(name: str, data: bytes) -> str | None:
    """`zip` or `tar` when the name or the bytes say archive; `tar?` for compressed data that may hold a tar."""
    lower = name.lower()
    if data.startswith(ZIP_MAGIC) or lower.endswith(".zip"):
        return "zip"
    if data[257:262] == b"ustar" or lower.endswith(ARCHIVE_SUFFIXES):
        return "tar"
    return "tar?" if data.startswith(COMPRESSED_MAGIC) else None


def _member_path(name: str) -> str:
    """An entry name as a relative POSIX path (backslashes, `/`, `.` and `..` parts dropped)."""
    return "/".join(p for p in PurePosixPath(name.replace("\\", "/")).parts if p not in ("/", ".", ".."))


def _zip_members(data: bytes, budget: _Budget) -> Iterator[_Member]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
    except ARCHIVE_ERRORS as error:
        raise _Unreadable(f"is not a readable zip archive ({error})") from None
    with archive:
        for info in archive.infolist():
            path = _member_path(info.filename)
            if info.is_dir():
                yield _Member(path, b"")
                continue
            if info.flag_bits & 0x1:
                yield _Member(path, b"", problem="is encrypted")
                continue
            try:
                with archive.open(info) as handle:
                    content = handle.read(budget.left + 1)
            except ARCHIVE_ERRORS as error:
                yield _Member(path, b"", problem=f"cannot be unpacked ({error})")
                continue
            budget.spend(len(content))
            yield _Member(path, content, regular=True)


def _tar_members(archive: tarfile.TarFile, budget: _Budget) -> Iterator[_Member]:
    with archive:
        while True:
            try:
                info = archive.next()
            except ARCHIVE_ERRORS as error:
                raise _Unreadable(f"is truncated or corrupt ({error})") from None
            if info is None:
                return
            path = _member_path(info.name)
            if info.isdir():
                yield _Member(path, b"")
            elif info.issym() or info.islnk():
                yield _Member(path, info.linkname.encode())
            elif not info.isreg():
                yield _Member(path, b"", problem="is a device or fifo entry, which has no content to read")
            else:
                budget.spend(info.size)
                try:
                    handle = archive.extractfile(info)
                    content = handle.read() if handle is not None else b""
                except ARCHIVE_ERRORS as error:
                    yield _Member(path, b"", problem=f"cannot be unpacked ({error})")
                    continue
                yield _Member(path, content, regular=True)


def _members(fmt: str, data: bytes, budget: _Budget) -> Iterator[_Member] | None:
    """The entries of an archive, lazily; None when `tar?` data holds no tar. Raises _Unreadable."""
    if fmt == "zip":
        return _zip_members(data, budget)
    try:
        archive = tarfile.open(fileobj=io.BytesIO(data), mode="r:*")
    except ARCHIVE_ERRORS as error:
        if fmt == "tar?":
            return None
        raise _Unreadable(f"is not a readable tar archive ({error})") from None
    return _tar_members(archive, budget)


# --------------------------------------------------------------------------- scanning


@dataclass(frozen=True)
class _Rules:
    """What one certification run checks besides the fixed rules."""

    answers: Prefiltered | None
    """Answer phrases (solution-leak), or None."""
    wiring: RuleSet
    """Runner-owned names (suspicious-metadata)."""
    output_paths: tuple[str, ...]
    """Paths the agent may write; a changelog's diff counts only when it touches one."""


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


def _diff_path(header: bytes) -> str:
    path = header.decode("utf-8", errors="replace")
    return path[2:] if path.startswith(("a/", "b/")) else path


def _diff_counts(path: str, match: re.Match[bytes], output_paths: Sequence[str]) -> bool:
    """False for a diff quoted in a changelog unless its headers name an output path (see CHANGELOG)."""
    if not CHANGELOG.search(path):
        return True
    named = [_diff_path(h) for h in match.group("old", "new", "a", "b") if h is not None]
    return any(within(p, out) for p in named for out in output_paths)


def _scan_content(out: _Collector, surface: Surface, path: str, data: bytes, rules: _Rules) -> None:
    """Content rules for one text (as `_scannable` gives it): harness identity, announcements, answers, diffs, secrets."""
    checks: list[tuple[FindingKind, str, Prefiltered | None]] = [
        ("benchmark-awareness", "harness-identity-term", HARNESS_RE),
        ("benchmark-awareness", "experiment-announcement", ANNOUNCEMENT_RE),
        ("solution-leak", "answer-phrase", rules.answers),
        ("patch-or-diff", "unified-diff-hunk", DIFF_RE),
        ("suspicious-metadata", "secret-shaped-content", SECRET_RE),
    ]
    lowered = data.lower()
    for kind, rule, matcher in checks:
        if matcher is None:
            continue
        count = 0
        for match in matcher.finditer(data, lowered):
            if matcher is DIFF_RE and not _diff_counts(path, match, rules.output_paths):
                continue
            if count >= MAX_HITS_PER_RULE:
                break
            count += 1
            out.add(kind, surface, path, rule, f"found {_excerpt(data, match.start(), match.end())!r}", _line_of(data, match.start()))


def _scan_path(out: _Collector, surface: Surface, rel: str, reported_dirs: set[str], rules: _Rules, prefix: str = "") -> None:
    """Path rules for one file (shown as `prefix + rel`): auto-loaded context, suspicious metadata, patch files."""
    for kind, ruleset in (("auto-loaded-context", AUTO_LOADED_CONTEXT), ("suspicious-metadata", SUSPICIOUS_PATHS), ("suspicious-metadata", rules.wiring)):
        rule = ruleset.first_match(rel)
        if rule is None:
            continue
        if rule.endswith("/"):
            parts = rel.split("/")
            name = rule.strip("/").split("/")[-1].lower()
            idx = next(i for i, p in enumerate(parts) if unbacked(p.lower()) == name)
            where = prefix + "/".join(parts[: idx + 1])
            if where in reported_dirs:
                return
            reported_dirs.add(where)
            out.add(kind, surface, where, rule, f"{where} matches {rule} (a tool or metadata folder)")  # type: ignore[arg-type]
        else:
            out.add(kind, surface, prefix + rel, rule, f"file matches {rule}")  # type: ignore[arg-type]
        return
    if ENV_FILE.search(rel):
        out.add("suspicious-metadata", surface, prefix + rel, ".env.*", "environment file")
    if rel.lower().endswith(PATCH_SUFFIXES):
        out.add("patch-or-diff", surface, prefix + rel, "patch-file-suffix", "patch, diff or merge leftover file")


@dataclass
class _FileScan:
    """Scanning one surface's files: where findings go, the rules, and the folders already reported."""

    out: _Collector
    surface: Surface
    rules: _Rules
    reported_dirs: set[str] = field(default_factory=set)

    def file(self, rel: str, data: bytes, *, regular: bool, prefix: str = "", depth: int = 0, budget: _Budget | None = None) -> None:
        """Path rules, then the content rules, or every member's rules when the file is an archive."""
        _scan_path(self.out, self.surface, rel, self.reported_dirs, self.rules, prefix)
        fmt = _archive_format(rel, data) if regular else None
        if fmt is not None and self.archive(prefix + rel, fmt, data, depth, budget or _Budget()):
            return
        text = _scannable(data)
        if text is not None:
            _scan_content(self.out, self.surface, prefix + rel, text, self.rules)

    def archive(self, shown: str, fmt: str, data: bytes, depth: int, budget: _Budget) -> bool:
        """Scan every member of the archive `shown` as `shown:member`; False when `tar?` data holds no tar."""
        if depth >= MAX_ARCHIVE_DEPTH:
            self.out.add("suspicious-metadata", self.surface, shown, "unreadable-archive", f"archive nested {depth + 1} deep; certification opens {MAX_ARCHIVE_DEPTH} levels")
            return True
        prefix = f"{shown}:"
        try:
            members = _members(fmt, data, budget)
            if members is None:
                return False
            for member in members:
                if not member.path:
                    continue
                if member.problem is None:
                    self.file(member.path, member.data, regular=member.regular, prefix=prefix, depth=depth + 1, budget=budget)
                    continue
                _scan_path(self.out, self.surface, member.path, self.reported_dirs, self.rules, prefix)
                detail = f"archive member {member.path} {member.problem}; certification cannot vouch for what it holds"
                self.out.add("suspicious-metadata", self.surface, prefix + member.path, "unreadable-archive-member", detail)
        except _Unreadable as error:
            self.out.add("suspicious-metadata", self.surface, shown, "unreadable-archive", f"archive {error}")
        return True


def _scan_tree(out: _Collector, surface: Surface, root: Path, rules: _Rules) -> None:
    if root.is_file():
        files, base = [root.name], root.parent
    else:
        files, base = walk_files(root), root
    if not files:
        raise MissingSurfaceError(f"{root}: the {surface} surface has no files; a gate that checks nothing cannot pass")
    scan = _FileScan(out, surface, rules)
    total = 0
    for rel in files:
        path = base / rel
        link = path.is_symlink()
        data = os.readlink(path).encode() if link else path.read_bytes()
        total += len(data)
        scan.file(rel, data, regular=not link)
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
    bodies = _Rules(answers=None, wiring=RuleSet.of(()), output_paths=())
    try:
        document = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError):
        document = None
    if isinstance(document, dict):
        for key in GRAPH_IDENTITY_FIELDS:
            value = document.get(key)
            if isinstance(value, str):
                for match in IDENTITY_RE.finditer(fold_text(value).encode()):
                    out.add("benchmark-awareness", "graph", f"{name}:{key}", "identity-term", f"identity field {key}={value!r} says {match.group().decode()!r}")
                    break
        for where, text in _strings(document):
            _scan_content(out, "graph", f"{name}:{where}", fold_text(text).encode(), bodies)
    else:  # not JSON (a database, say): its raw bytes are scanned even when they read as binary
        scannable = _scannable(data)
        _scan_content(out, "graph", name, data if scannable is None else scannable, bodies)
    out.scans.append(SurfaceScan(surface="graph", name=name, files_scanned=1, bytes_scanned=len(data)))


def _require(out: _Collector, path: Path, what: str) -> bool:
    """True when `path` exists; otherwise raise, or record it as unchecked under the opt-out."""
    if path.exists():
        return True
    if ALLOW_UNCHECKED_CORPUS.flag():
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
    output_paths: Sequence[str] = (),
) -> CertificationReport:
    """Scan every agent-visible surface and return the report; reads only.

    `challenge_texts` maps a challenge field (prompt, follow-up) to its agent-visible text;
    `runner_owned_names` are extra path rules for runner-owned wiring (e.g. the verifier's name);
    `output_paths` are the paths the agent may write (a changelog's diff counts only on those).
    Raises MissingSurfaceError for a missing or empty surface (unless the opt-out is set).
    """
    out = _Collector()
    rules = _Rules(answers=phrase_regex(answer_phrases), wiring=RuleSet.of(tuple(runner_owned_names)), output_paths=tuple(output_paths))
    if _require(out, source, "source corpus"):
        _scan_tree(out, "source", source, rules)
    for folder in evidence:
        if _require(out, folder, "evidence corpus"):
            _scan_tree(out, "evidence", folder, rules)
    for graph in graphs:
        if _require(out, graph, "graph artifact"):
            _scan_graph(out, graph)
    if challenge_texts:
        for field_name, text in challenge_texts.items():
            _scan_content(out, "challenge", field_name, fold_text(text).encode(), rules)
        size = sum(len(t.encode()) for t in challenge_texts.values())
        out.scans.append(SurfaceScan(surface="challenge", name="challenge", files_scanned=len(challenge_texts), bytes_scanned=size))
    findings = sorted(out.findings, key=lambda f: (f.surface, f.path, f.line or 0, f.kind, f.rule))
    verdict: Literal["clean", "findings", "unchecked"] = "findings" if findings else ("unchecked" if out.unchecked else "clean")
    return CertificationReport(verdict=verdict, scans=tuple(out.scans), findings=tuple(findings), unchecked=tuple(out.unchecked))


def certify_home(home: Path, notes: Mapping[str, str] | None = None) -> tuple[Finding, ...]:
    """The arm's HOME just before the agent starts, read only: no file an agent's harness auto-loads
    (CLAUDE.md, AGENTS.md, .claude/, ...) except, in the notes arm, the runner's notes files (`notes`:
    path under HOME -> the exact text the runner wrote, each required); every file's content is scanned
    like a source file's, so a notes file naming the harness or the experiment is a finding too.
    An empty tuple is clean (an empty HOME is the common case and is checked, not skipped)."""
    out = _Collector()
    rules = _Rules(answers=None, wiring=RuleSet.of(()), output_paths=())
    notes = dict(notes or {})
    reported: set[str] = set()
    for rel in walk_files(home) if home.is_dir() else []:
        path = home / rel
        data = os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        if notes.get(rel) is None or path.is_symlink() or data != notes[rel].encode():
            _scan_path(out, "home", rel, reported, rules)
        _scan_content(out, "home", rel, data, rules)
    for rel, text in notes.items():
        path = home / rel
        if not path.is_file() or path.is_symlink() or path.read_bytes() != text.encode():
            out.add("auto-loaded-context", "home", rel, "runner-notes-file", "the runner's notes file is missing or not what it wrote")
    return tuple(sorted(out.findings, key=lambda f: (f.path, f.line or 0, f.kind, f.rule)))


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
    outputs: tuple[str, ...] = ()
    if challenge is not None:
        manifest: Document = load_document(challenge)
        if not isinstance(manifest, (ChallengeManifest, TaskManifest)):
            raise MemtrialError(f"{challenge}: --challenge takes a challenge.json or task.json, not a {manifest.KIND}")
        texts, phrases, wiring = challenge_surface(manifest)
        outputs = manifest.allowed_output_paths
    evidence, graphs = list(evidence), list(graphs)
    if fixture is not None:
        fixture_doc = load_document(fixture, FixtureManifest)
        for arm in fixture_doc.arms:
            if arm.graph is not None:
                graphs.append(resolve_pinned(arm.graph, fixture.parent, fixture))
            if arm.evidence is not None:
                evidence.append(resolve_pinned(arm.evidence, fixture.parent, fixture))
    return certify(source, challenge_texts=texts, answer_phrases=phrases, evidence=evidence, graphs=graphs, runner_owned_names=wiring, output_paths=outputs)
