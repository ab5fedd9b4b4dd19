"""A real package index on 127.0.0.1 for the upstream-source tests, and archives built in tmp_path.

`PackageIndex` serves a PEP 503 simple index (`/simple/<name>/`) and npm-registry tarball paths
(`/<name>/-/<name>-<version>.tgz`) from a dict of paths to bytes, counts every request, and can be
told to hang (accept, never answer) to prove downloads time out. The archives are built here with
tarfile/zipfile, so no third-party archive is committed.
"""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


def tar_gz(top: str, files: dict[str, str | bytes], *, extra: list[tarfile.TarInfo] | None = None) -> bytes:
    """A gzip tarball with every file under the folder `top` (like an sdist or an npm tarball)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for rel, content in files.items():
            data = content.encode() if isinstance(content, str) else content
            info = tarfile.TarInfo(f"{top}/{rel}")
            info.size, info.mode, info.mtime = len(data), 0o755 if rel.endswith(".sh") else 0o644, 0
            tar.addfile(info, io.BytesIO(data))
        for info in extra or []:
            tar.addfile(info)
    return buffer.getvalue()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def simple_page(name: str, filename: str, digest: str | None) -> bytes:
    """A PEP 503 project page linking one file (with a `#sha256=` fragment when given)."""
    fragment = f"#sha256={digest}" if digest else ""
    return f'<!DOCTYPE html><html><body><a href="../../files/{filename}{fragment}">{filename}</a></body></html>'.encode()


class PackageIndex:
    """Serve `files` (URL path -> bytes) on 127.0.0.1; `requests` counts GETs by path."""

    def __init__(self) -> None:
        self.files: dict[str, bytes] = {}
        self.requests: Counter[str] = Counter()
        self.hang = False
        index = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                index.requests[self.path] += 1
                if index.hang:
                    time.sleep(30)
                    return
                body = index.files.get(self.path)
                if body is None:
                    self.send_error(404)
                    return
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def add_sdist(self, name: str, version: str, archive: bytes, *, with_hash: bool = True) -> str:
        filename = f"{name}-{version}.tar.gz"
        self.files[f"/files/{filename}"] = archive
        self.files[f"/simple/{name}/"] = simple_page(name, filename, sha256(archive) if with_hash else None)
        return sha256(archive)

    def add_tarball(self, name: str, version: str, archive: bytes) -> str:
        self.files[f"/npm/{name}/-/{name}-{version}.tgz"] = archive
        return sha256(archive)


@contextmanager
def serving(index: PackageIndex) -> Iterator[PackageIndex]:
    thread = threading.Thread(target=index.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield index
    finally:
        index.server.shutdown()
        index.server.server_close()
