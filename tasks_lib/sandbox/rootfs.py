"""The smallest image that works offline: `sh`, a few coreutils, python3 and (when the host has it)
node, copied from the host: what the bundled tasks' verifiers run.

Nothing can be pulled, so the image is a deterministic tar of host files (the named programs, the
shared libraries `ldd` says they need, and python3's standard library) imported with
`docker import`. Its tag is a hash of the tar, so the same inputs give the same image name.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
from collections.abc import Iterable
from pathlib import Path

from tasks_lib.sandbox.errors import SandboxUnavailable

PROGRAMS = ("sh", "cat", "ls", "env", "sleep", "setsid", "head", "tail", "touch", "mkdir", "rmdir", "rm", "mv", "cp", "ln",
            "chmod", "id", "true", "false", "wc", "tr", "grep", "sed", "cut", "sort", "uniq", "date", "dirname", "basename",
            "mktemp", "readlink", "stat", "tee", "seq", "expr", "cmp", "tar", "gzip", "mkfifo")
"""Programs copied into the image besides python3 (Debian's essential set): what the bundled tasks' shell
tests and verifiers call (`rotlog-keep-count` needs dirname, mktemp, basename and gzip; a judged shell
test's `jail` call needs mkfifo)."""

OPTIONAL_PROGRAMS = ("node", "awk", "diff", "find", "xargs")
"""Programs copied when the host has them (verifiers run `node --test`; awk, diff, find, xargs)."""

PYTHON = "/usr/bin/python3"
"""The host interpreter copied into the image (a Debian build with its stdlib under /usr/lib)."""

STDLIB_SKIP = frozenset({"test", "idlelib", "tkinter", "turtledemo", "ensurepip", "lib2to3", "site-packages",
                         "dist-packages", "pydoc_data"})
"""Standard-library folders the image does not need."""

EMPTY_DIRS = ("tmp", "home", "workspace", "proc", "dev", "sys", "etc")

IMAGE_REPOSITORY = "memtrial-sandbox"


def _ldd(paths: Iterable[str]) -> set[str]:
    libs: set[str] = set()
    for path in paths:
        done = subprocess.run(["ldd", path], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            continue  # statically linked or not ELF
        for line in done.stdout.splitlines():
            match = re.search(r"(/\S+)", line.split("=>")[-1])
            if match:
                libs.add(match.group(1))
    return libs


def rootfs_files() -> dict[str, str]:
    """Image path -> host path of every file the rootfs needs.

    Raises:
        SandboxUnavailable: a program or the host python3 is missing.
    """
    files: dict[str, str] = {}
    for name in PROGRAMS:
        found = shutil.which(name, path="/usr/bin:/bin:/usr/sbin:/sbin")
        if found is None:
            raise SandboxUnavailable(f"program {name!r} not found on the host; the image copies it from there")
        files[f"bin/{name}"] = os.path.realpath(found)
    for name in OPTIONAL_PROGRAMS:
        if (found := shutil.which(name, path="/usr/bin:/bin")) is not None:
            files[f"bin/{name}"] = os.path.realpath(found)
    if not os.path.exists(PYTHON):
        raise SandboxUnavailable(f"{PYTHON} not found; install Debian's python3 (scripts/install_test_deps.sh)")
    python = os.path.realpath(PYTHON)
    files["usr/bin/python3"] = python
    stdlib = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['stdlib'])"],
                            capture_output=True, text=True, check=True).stdout.strip()
    for dirpath, dirnames, filenames in os.walk(stdlib):
        dirnames[:] = sorted(d for d in dirnames if d not in STDLIB_SKIP)
        for name in filenames:
            host = os.path.join(dirpath, name)
            files[host.lstrip("/")] = host
    elves = [h for h in files.values() if h.endswith(".so") or "/bin/" in h]
    for lib in _ldd(elves):
        files[lib.lstrip("/")] = os.path.realpath(lib)  # at the path the loader asks for
    return files


def build_rootfs_tar(dest: Path) -> str:
    """Write a deterministic rootfs tar to `dest`; returns its SHA-256."""
    files = rootfs_files()
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        for name in EMPTY_DIRS:
            info = tarfile.TarInfo(name)
            info.type, info.mode, info.mtime = tarfile.DIRTYPE, 0o1777 if name == "tmp" else 0o755, 0
            tar.addfile(info)
        for arcname in sorted(files):
            host = files[arcname]
            info = tar.gettarinfo(host, arcname=arcname)
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = 0
            with open(host, "rb") as handle:
                tar.addfile(info, handle)
    digest = hashlib.sha256()
    with open(dest, "rb") as handle:
        while chunk := handle.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_image(base_url: str, workdir: Path | None = None) -> str:
    """Build (once) and return the tag of the sandbox image on the daemon at `base_url`; the tar is
    written under `workdir` (default: a temporary folder) and removed afterwards.

    Raises:
        SandboxUnavailable: the rootfs cannot be assembled or the daemon refuses the import.
    """
    if workdir is None:
        with tempfile.TemporaryDirectory(prefix="memtrial-rootfs-") as scratch:
            return ensure_image(base_url, Path(scratch))
    tar_path = workdir / "rootfs.tar"
    return import_image(base_url, tar_path, IMAGE_REPOSITORY, build_rootfs_tar(tar_path)[:16], what="the sandbox image")


def import_image(base_url: str, tar_path: Path, repository: str, tag: str, *, what: str,
                 changes: list[str] | None = None, timeout: int = 120) -> str:
    """Import the rootfs tar at `tar_path` as `<repository>:<tag>` on the engine at `base_url` (nothing when
    the engine has it already; the tag is a hash of the inputs); the tar is removed either way. Returns the reference.

    Raises:
        SandboxUnavailable: the engine refuses the import, or the import did not produce the image.
    """
    import docker  # noqa: PLC0415
    from docker.errors import DockerException  # noqa: PLC0415

    reference = f"{repository}:{tag}"
    client = docker.DockerClient(base_url=base_url, timeout=timeout)
    try:
        if not client.images.list(name=reference):
            client.api.import_image_from_file(str(tar_path), repository=repository, tag=tag, changes=changes)
        if not client.images.list(name=reference):
            raise SandboxUnavailable(f"importing {tar_path} did not produce image {reference}")
    except DockerException as error:
        raise SandboxUnavailable(f"could not import {what} from {tar_path}: {error}") from error
    finally:
        client.close()
        tar_path.unlink(missing_ok=True)
    return reference
