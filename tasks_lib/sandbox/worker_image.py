"""The worker image, built offline from this machine's files: for an engine that cannot pull.

`deployments/Dockerfile` builds the worker image from `python:3.11-slim`, Debian packages and PyPI;
where nothing can be pulled (the tests, an air-gapped engine) this builds its equivalent from what
the machine already has, as `rootfs` does for the sandbox image: a deterministic tar imported with
`docker import`, tagged with the hash of the tar.

What goes in, at the paths the Dockerfile's image has them:
- the running interpreter (`sys.base_prefix`: the binary and its standard library) as
  `/usr/local/bin/python3`, as in `python:3.11-slim`, with the shared libraries `ldd` names;
- the installed distributions memtrial needs with `extras` (its requirements' closure, read from
  the installed metadata) under `SITE_PACKAGES`, and the project, on the interpreter's path by a `.pth`
  file (as the Dockerfile's editable install puts them), and their console scripts (`memtrial`, `prefect`);
- a clone of the checkout at `commit` (its git objects: fixtures are built from them) as the project,
  with `tasks_lib/bundled` linked to `corpora` as the editable install maps it;
- the programs an arm runs (git and its helpers, bubblewrap, util-linux's setpriv/prlimit/taskset,
  the coreutils of `rootfs.PROGRAMS`, node when the host has it) and a `memtrial` user (uid 1000).

The image's runtime settings (USER, WORKDIR, ENV, CMD) are read from `deployments/Dockerfile` itself,
so both images run the same way.
"""

from __future__ import annotations

import hashlib
import importlib.metadata as metadata
import io
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path, PurePosixPath

from packaging.requirements import Requirement

from tasks_lib.sandbox.errors import SandboxUnavailable
from tasks_lib.sandbox.rootfs import OPTIONAL_PROGRAMS, PROGRAMS, STDLIB_SKIP, _ldd, import_image

IMAGE_REPOSITORY = "memtrial-worker"
SITE_PACKAGES = "opt/memtrial/site-packages"
"""Where the distributions go inside the image (on the interpreter's path through `memtrial.pth`)."""
PROJECT_INSIDE = "home/memtrial/project"
"""The project folder (the Dockerfile's WORKDIR)."""
WORKER_PROGRAMS = ("git", "bwrap", "setpriv", "prlimit", "taskset", "ldd", "bash")
"""Programs an arm or its flow runs, besides the sandbox image's."""
GIT_DIRS = ("/usr/lib/git-core", "/usr/share/git-core")
"""git's helper programs and templates, copied whole when present."""
RUNTIME_DIRECTIVES = ("USER", "WORKDIR", "ENV", "CMD")
"""Dockerfile instructions `docker import --change` takes over from deployments/Dockerfile."""
UID = 1000


def _closure(extras: Iterable[str]) -> list[metadata.Distribution]:
    """memtrial's installed requirements with `extras`, transitively (each distribution once)."""
    found: dict[str, metadata.Distribution] = {}
    pending: list[tuple[str, frozenset[str]]] = [("memtrial", frozenset(extras))]
    while pending:
        name, wanted = pending.pop()
        dist = metadata.distribution(name)
        key = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
        if key in found and not wanted:
            continue
        found[key] = dist
        for text in dist.requires or []:
            requirement = Requirement(text)
            environments = [{"extra": extra} for extra in wanted] or [{"extra": ""}]
            if requirement.marker is None or any(requirement.marker.evaluate(env) for env in environments):
                pending.append((requirement.name, frozenset(requirement.extras)))
    found.pop("memtrial", None)  # the project itself comes from the clone
    return sorted(found.values(), key=lambda d: d.metadata["Name"].lower())


def _console_scripts(dists: Iterable[metadata.Distribution]) -> dict[str, str]:
    """Console script name -> `module:function` of memtrial and every distribution in `dists` (`memtrial`, `prefect`, ...)."""
    scripts = {ep.name: ep.value for ep in metadata.distribution("memtrial").entry_points if ep.group == "console_scripts"}
    for dist in dists:
        for ep in dist.entry_points:
            if ep.group == "console_scripts":
                scripts.setdefault(ep.name, ep.value)
    return scripts


def _interpreter_files() -> dict[str, str]:
    """Image path -> host path of the interpreter and its standard library, under /usr/local."""
    executable = os.path.realpath(sys.executable)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    files = {f"usr/local/bin/{version}": executable}
    stdlib = sysconfig.get_paths()["stdlib"]
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_SKIP and d != "__pycache__")
        for name in filenames:
            host = os.path.join(dirpath, name)
            files[f"usr/local/lib/{version}/{os.path.relpath(host, stdlib)}"] = host
    return files


def _distribution_files(dists: Iterable[metadata.Distribution]) -> dict[str, str]:
    files: dict[str, str] = {}
    for dist in dists:
        for entry in dist.files or []:
            if entry.parts and entry.parts[0] == "..":
                continue  # console scripts outside site-packages; the image runs `python -m`
            if "__pycache__" in entry.parts:
                continue
            host = str(dist.locate_file(entry))
            if os.path.isfile(host):
                files[f"{SITE_PACKAGES}/{PurePosixPath(*entry.parts)}"] = os.path.realpath(host)
    return files


def _program_files() -> dict[str, str]:
    """Image path -> host path of every program an arm runs (missing optional ones skipped)."""
    files: dict[str, str] = {}
    for name in (*PROGRAMS, *WORKER_PROGRAMS, *OPTIONAL_PROGRAMS):
        found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found is None:
            if name in OPTIONAL_PROGRAMS:
                continue
            raise SandboxUnavailable(f"program {name!r} not found on the host; the worker image copies it from there "
                                     "(scripts/install_test_deps.sh)")
        files[f"usr/bin/{name}"] = os.path.realpath(found)
    for folder in GIT_DIRS:
        for dirpath, _dirs, filenames in os.walk(folder):
            for name in filenames:
                host = os.path.join(dirpath, name)
                files[host.lstrip("/")] = host  # a symlink stays one (git-add -> git)
    return files


def _clone(checkout: Path, commit: str, dest: Path) -> None:
    """A clone of `checkout` at `commit` (its objects only, no hardlinks to the checkout)."""
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", "--no-checkout", str(checkout), str(dest)], check=True,
                   capture_output=True)
    subprocess.run(["git", "-C", str(dest), "checkout", "-q", "--detach", commit], check=True, capture_output=True)
    subprocess.run(["git", "-C", str(dest), "remote", "remove", "origin"], check=True, capture_output=True)


def _add_dir(tar: tarfile.TarFile, name: str, mode: int = 0o755, uid: int = 0) -> None:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.mtime, info.uid, info.gid = tarfile.DIRTYPE, mode, 0, uid, uid
    tar.addfile(info)


def _add_text(tar: tarfile.TarFile, name: str, text: str, mode: int = 0o644) -> None:
    data = text.encode()
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), mode, 0
    tar.addfile(info, io.BytesIO(data))


def _add_host_file(tar: tarfile.TarFile, arcname: str, host: str, uid: int = 0,
                   seen: dict[tuple[int, int], str] | None = None) -> None:
    """Add `host` as `arcname`; a file already added (same inode, e.g. git's hardlinked helpers) becomes a hard link."""
    info = tar.gettarinfo(host, arcname=arcname)
    info.uid = info.gid = uid
    info.uname = info.gname = ""
    info.mtime = 0
    stat = os.lstat(host)
    if seen is not None and info.isfile():
        first = seen.setdefault((stat.st_dev, stat.st_ino), arcname)
        if first != arcname:
            info.type, info.linkname, info.size = tarfile.LNKTYPE, first, 0
            tar.addfile(info)
            return
    if info.isfile():
        with open(host, "rb") as handle:
            tar.addfile(info, handle)
    else:
        tar.addfile(info)


def build_worker_tar(dest: Path, checkout: Path, commit: str, extras: Iterable[str] = ("dask",)) -> str:
    """Write the worker image's rootfs tar to `dest` (deterministic for the same inputs); returns its SHA-256.

    Raises:
        SandboxUnavailable: a program the image needs is missing on the host.
    """
    dists = _closure(extras)
    files = {**_interpreter_files(), **_distribution_files(dists), **_program_files()}
    elves = [h for a, h in files.items() if a.startswith(("usr/bin/", "usr/local/bin/", "usr/lib/git-core/")) or h.endswith(".so")
             or ".so." in h]
    copied = {os.path.realpath(h) for h in files.values()}
    for lib in _ldd(elves):
        if os.path.realpath(lib) in copied:
            continue  # a wheel's own library is found next to it
        standard = lib.startswith(("/usr/", "/lib"))
        # the interpreter's own libpython (e.g. under ~/.pyenv) goes where the loader looks by default:
        # the sandbox shows only the toolchain, and the check's python3 is this one
        files.setdefault(lib.lstrip("/") if standard else f"usr/lib/{os.path.basename(lib)}", os.path.realpath(lib))
    dirs = {str(parent) for arcname in files for parent in PurePosixPath(arcname).parents if str(parent) != "."}
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    with tempfile.TemporaryDirectory(prefix="memtrial-worker-") as scratch, \
            tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in sorted(dirs | {"etc", "proc", "dev", "sys", "run", "var", "var/tmp", "usr/local/bin"}):
            _add_dir(tar, name)
        _add_dir(tar, "tmp", 0o1777)
        _add_dir(tar, "home")
        seen: dict[tuple[int, int], str] = {}
        for arcname in sorted(files):
            _add_host_file(tar, arcname, files[arcname], seen=seen)
        for link, target in (("usr/local/bin/python3", version), ("usr/local/bin/python", version),
                             ("bin", "usr/bin"), ("sbin", "usr/bin"), ("lib", "usr/lib"), ("lib64", "usr/lib64")):
            if link in files or link in dirs:
                continue
            info = tarfile.TarInfo(link)
            info.type, info.linkname, info.mtime, info.mode = tarfile.SYMTYPE, target, 0, 0o777
            tar.addfile(info)
        for name, target in sorted(_console_scripts(dists).items()):
            module, _, attr = target.partition(":")
            _add_text(tar, f"usr/local/bin/{name}", f"#!/usr/local/bin/python3\nimport sys\nfrom {module} import {attr.split('.')[0]}\n"
                                                    f"sys.exit({attr}())\n", 0o755)
        for site in ("site-packages", "dist-packages"):  # importable without PYTHONPATH (the hooks' environment is scrubbed)
            _add_text(tar, f"usr/local/lib/{version}/{site}/memtrial.pth", f"/{PROJECT_INSIDE}\n/{SITE_PACKAGES}\n")
        _add_text(tar, "etc/passwd", f"root:x:0:0:root:/root:/bin/sh\nmemtrial:x:{UID}:{UID}::/home/memtrial:/bin/sh\n"
                                     "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
        _add_text(tar, "etc/group", f"root:x:0:\nmemtrial:x:{UID}:\nnogroup:x:65534:\n")
        _add_text(tar, "etc/hosts", "127.0.0.1 localhost\n")
        # as the Dockerfile's `git config --system/--global --add safe.directory` (root's, for a root worker)
        _add_text(tar, "etc/gitconfig", f"[safe]\n\tdirectory = /{PROJECT_INSIDE}\n")
        _add_dir(tar, "root", 0o700)
        _add_text(tar, "root/.gitconfig", f"[safe]\n\tdirectory = /{PROJECT_INSIDE}\n")
        clone = Path(scratch) / "project"
        _clone(checkout, commit, clone)
        _add_dir(tar, "home/memtrial", 0o755, UID)
        _add_dir(tar, PROJECT_INSIDE, 0o755, UID)
        for path in sorted(clone.rglob("*")):
            _add_host_file(tar, f"{PROJECT_INSIDE}/{path.relative_to(clone).as_posix()}", str(path), UID)
        info = tarfile.TarInfo(f"{PROJECT_INSIDE}/tasks_lib/bundled")
        info.type, info.linkname, info.mtime, info.mode = tarfile.SYMTYPE, "../corpora", 0, 0o777
        tar.addfile(info)
    digest = hashlib.sha256()
    with open(dest, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def runtime_changes(dockerfile: Path) -> list[str]:
    """The Dockerfile's runtime instructions (USER, WORKDIR, ENV, CMD; continuation lines joined) as
    `docker import --change` values."""
    text = re.sub(r"\\\n\s*", " ", dockerfile.read_text())
    changes = [line.strip() for line in text.splitlines() if line.strip().split(" ", 1)[0] in RUNTIME_DIRECTIVES]
    return changes


def build_worker_image(base_url: str, checkout: Path, commit: str, dockerfile: Path, workdir: Path) -> str:
    """Build (once per content) the worker image on the engine at `base_url`; returns its reference.

    Raises:
        SandboxUnavailable: a program is missing on the host or the engine refuses the import.
    """
    tar_path = workdir / "worker.tar"
    changes = runtime_changes(dockerfile)
    digest = hashlib.sha256((build_worker_tar(tar_path, checkout, commit) + "\n".join(changes)).encode()).hexdigest()
    return import_image(base_url, tar_path, IMAGE_REPOSITORY, digest[:16], what="the worker image", changes=changes, timeout=600)
