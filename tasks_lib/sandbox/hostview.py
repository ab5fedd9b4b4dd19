"""What a bwrap sandbox sees of the host: an allow-list, never the host minus a deny-list.

The root is an empty tmpfs. Onto it go, read-only, the toolchain (`/usr` and the top-level
`/bin`, `/sbin`, `/lib*` entries, recreated as the symlinks they are on merged-/usr systems) and
the few `/etc` files that programs need to start (the loader cache, alternatives, users, hosts,
time zone, Python's site folder); then private tmpfs for `/tmp`, `/var/tmp` and `/home`. Nothing
else of the host exists inside: not `/work`, `/opt`, `/srv`, `/root`, another checkout, an
artifact root, another arm's scratch folder. A caller adds the workspace and its own read-only
mounts on top (`parent_dirs` creates the folders leading to a mount point, readable by anyone, so
an unprivileged command can reach what is mounted there).
"""

from __future__ import annotations

import glob
import os
from collections.abc import Iterable

TOOLCHAIN_TOP = ("usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32")
"""Top-level host entries shown read-only (those that exist here)."""

ETC_ALLOWED = ("alternatives", "group", "host.conf", "hosts", "ld.so.cache", "ld.so.conf", "ld.so.conf.d",
               "localtime", "nsswitch.conf", "passwd", "python3*")
"""Entries of the host's `/etc` shown read-only (glob patterns); nothing else of `/etc` is."""

NETWORK_ETC = ("ca-certificates", "ca-certificates.conf", "gai.conf", "protocols", "resolv.conf", "services", "ssl")
"""Further `/etc` entries for a sandbox that shares the network (name resolution, TLS roots)."""

PRIVATE_TMP = ("/tmp", "/var/tmp")
"""World-writable (sticky) private tmpfs folders."""

VIEW_ROOTS = frozenset({*TOOLCHAIN_TOP, "etc", "tmp", "var", "home", "proc", "dev"})
"""Every top-level name of the view before the caller's workspace and mounts."""


def _etc_entries(extra: Iterable[str] = ()) -> list[str]:
    found: set[str] = set()
    for pattern in (*ETC_ALLOWED, *extra):
        found.update(glob.glob(os.path.join("/etc", pattern)))
    return sorted(found)


def parent_dirs(path: str, made: set[str]) -> list[str]:
    """bwrap arguments creating every missing folder above `path` (mode 0755); records them in `made`."""
    args: list[str] = []
    parts = path.strip("/").split("/")[:-1]
    for depth in range(1, len(parts) + 1):
        folder = "/" + "/".join(parts[:depth])
        if folder in made or parts[0] in TOOLCHAIN_TOP:
            continue
        made.add(folder)
        args += ["--perms", "0755", "--dir", folder]
    return args


def host_view_args(home: str | None, made: set[str], etc_extra: Iterable[str] = (), tmpfs_bytes: int | None = None) -> list[str]:
    """bwrap arguments for the allow-listed view described above, an empty HOME at `home` (mode
    1777; none when None) and the `/etc` entries `etc_extra` besides the allowed ones; each
    private tmpfs (`/tmp`, `/var/tmp`, `/home`) capped at `tmpfs_bytes` (bwrap `--size`) when given.

    `made` collects the folders created, for `parent_dirs`.
    """
    args = ["--perms", "0755", "--tmpfs", "/"]
    for name in TOOLCHAIN_TOP:
        path = f"/{name}"
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    args += ["--perms", "0755", "--dir", "/etc"]
    for path in _etc_entries(etc_extra):
        args += ["--ro-bind", path, path]
    args += ["--proc", "/proc", "--dev", "/dev", "--perms", "0755", "--dir", "/var"]
    size = ["--size", str(tmpfs_bytes)] if tmpfs_bytes is not None else []
    for private in PRIVATE_TMP:
        args += ["--perms", "01777", *size, "--tmpfs", private]
    args += ["--perms", "0755", *size, "--tmpfs", "/home"]
    if home is not None:
        args += ["--perms", "01777", "--dir", home]
    made.update({"/etc", "/var", *PRIVATE_TMP, "/home", *([home] if home else [])})
    return args


def under(path: str, roots: Iterable[str]) -> bool:
    """True when `path` is one of `roots` or lies below one."""
    return any(path == root or path.startswith(root.rstrip("/") + "/") for root in roots)


def is_visible(path: str, extra: Iterable[str] = ()) -> bool:
    """True when host path `path` lies in the view (the toolchain, allowed /etc entries) or under `extra`."""
    return under(path, [f"/{n}" for n in TOOLCHAIN_TOP] + _etc_entries() + list(extra))
