"""The artifact store: one root, a local folder or `s3://bucket/prefix` on any S3-compatible service.

Every write is atomic: a reader never sees a half-written object. Locally an object is written to
a temporary sibling, flushed and renamed over its name; on S3 it is one PUT, or a multipart upload
that only appears once completed (and is aborted on failure). Keys are portable relative POSIX
paths; the run layout (`runs/<run_id>/...`) is built from the constants below, never from the
current directory.
"""

from __future__ import annotations

import io
import json
import os
import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from tasks_lib.contracts import Document, check_rel_path, dump_document, parse_document
from tasks_lib.errors import ArtifactError, ArtifactNotFound
from tasks_lib.settings import S3_ENDPOINT_URL
from tasks_lib.trees import TEMP_MARK, sha256_bytes, write_atomically

if TYPE_CHECKING:  # pyarrow is imported where a table is read or written: input checks never wait on it
    import pyarrow as pa

D = TypeVar("D", bound=Document)
T = TypeVar("T")
R = TypeVar("R")

RUNS = "runs"
"""The folder of every run under the artifact root (`tasks_lib.run.layout` names what is inside one)."""
BLOBS = "blobs/sha256"
SUITES_FOLDER = "suites"
"""A run's suite results: `runs/<run_id>/suites/<name>.json`, and the public datasets' rankings beside them."""
MULTIPART_THRESHOLD = 64 * 1024 * 1024
READ_THREADS = 16
"""Most artifact reads in flight at once in one process when stages read many objects (each an S3 round
trip): `read_concurrently` runs up to this many per call and, across calls, holds one of as many slots."""
S3_POOL_CONNECTIONS = READ_THREADS + 48
"""boto3's connection pool of an S3 store: one connection for each concurrent read (`READ_THREADS`) and 48
for the requests of the stage tasks running at once in the same process (task-runner threads, Prefect's
result storage). A smaller pool (boto3's default is 10) makes urllib3 open extra connections and log
"Connection pool is full, discarding connection" for each."""
_read_slots = threading.BoundedSemaphore(READ_THREADS)


def new_run_id(prefix: str = "run") -> str:
    """A fresh, sortable run id: `<prefix>-YYYYMMDD-HHMMSS-<6 hex>` (UTC)."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{prefix}-{stamp}-{secrets.token_hex(3)}"


def read_concurrently(read: Callable[[T], R], items: Sequence[T]) -> list[R]:
    """`read` over `items` on up to READ_THREADS threads, results in the order of `items` (the first
    exception propagates). For artifact reads: I/O-bound, so threads overlap the round trips; concurrent
    calls share READ_THREADS slots, so the reads in flight never outgrow an S3 store's pool (so `read` must
    not call `read_concurrently` itself)."""
    if len(items) < 2:
        return [read(item) for item in items]

    def slotted(item: T) -> R:
        with _read_slots:
            return read(item)

    with ThreadPoolExecutor(max_workers=min(READ_THREADS, len(items))) as pool:
        return list(pool.map(slotted, items))


def run_key(run_id: str, *parts: str) -> str:
    """Key of an artifact of one run: `runs/<run_id>/<parts...>`."""
    return check_key("/".join((RUNS, run_id, *parts)))


def suite_key(run_id: str, name: str) -> str:
    """Artifact key of a suite's result in a run."""
    return run_key(run_id, SUITES_FOLDER, f"{name}.json")


def suite_rankings_key(run_id: str, name: str, dataset: str) -> str:
    """Artifact key of one dataset's per-question rankings (Parquet) beside suite `name`'s result."""
    return run_key(run_id, SUITES_FOLDER, f"{name}-{dataset}-rankings.parquet")


def check_key(key: str) -> str:
    """Return `key` if it is a valid artifact key (a portable relative POSIX path)."""
    try:
        check_rel_path(key)
    except ValueError as error:
        raise ArtifactError(f"artifact key {key!r} is not allowed: {error}") from None
    if key.endswith("/"):
        raise ArtifactError(f"artifact key {key!r} names a folder, not an object")
    return key


class ArtifactStore(ABC):
    """Where artifacts live. Subclasses implement bytes in and out; formats are shared here."""

    uri: str

    @abstractmethod
    def put_bytes(self, key: str, data: bytes) -> None:
        """Write `data` under `key` atomically, replacing any object there. Raises ArtifactError."""

    @abstractmethod
    def get_bytes(self, key: str) -> bytes:
        """Read the object under `key`. Raises ArtifactNotFound, or ArtifactError on transport failure."""

    @abstractmethod
    def exists(self, key: str) -> bool:
        """True when a complete object is stored under `key`."""

    @abstractmethod
    def list_keys(self, prefix: str = "") -> list[str]:
        """Sorted keys of complete objects under `prefix` (a folder-like prefix)."""

    @abstractmethod
    def delete(self, key: str) -> None:
        """Remove the object under `key`; removing a missing object is not an error."""

    def put_file(self, key: str, path: Path) -> None:
        """Store a local file under `key` atomically."""
        self.put_bytes(key, path.read_bytes())

    def put_json(self, key: str, document: Document) -> None:
        """Store a contract document as deterministic JSON."""
        self.put_bytes(key, dump_document(document))

    def get_json(self, key: str, model: type[D]) -> D:
        """Read and validate a contract document; ContractError names the store URI and key."""
        source = f"{self.uri.rstrip('/')}/{key}"
        try:
            data: Any = json.loads(self.get_bytes(key))
        except ValueError as error:
            raise ArtifactError(f"{source}: not valid JSON ({error})") from None
        return parse_document(model, data, source)

    def put_table(self, key: str, table: pa.Table) -> None:
        """Store a table as Parquet."""
        import pyarrow.parquet as pq

        sink = io.BytesIO()
        pq.write_table(table, sink)
        self.put_bytes(key, sink.getvalue())

    def get_table(self, key: str) -> pa.Table:
        """Read a Parquet table with `ParquetFile.read` on this thread, no read-ahead: `pq.read_table`,
        given a corrupted buffer, raised and then aborted the interpreter at exit (SIGABRT); so a
        damaged table is an ArtifactError only."""
        import pyarrow as pa
        import pyarrow.parquet as pq

        try:
            return pq.ParquetFile(io.BytesIO(self.get_bytes(key)), pre_buffer=False).read(use_threads=False)
        except (pa.ArrowException, OSError) as error:
            raise ArtifactError(f"{self.uri.rstrip('/')}/{key}: not a readable Parquet table ({error})") from None

    def put_blob(self, data: bytes) -> str:
        """Store content-addressed bytes; return their key (`blobs/sha256/<2>/<digest>`)."""
        digest = sha256_bytes(data)
        key = f"{BLOBS}/{digest[:2]}/{digest}"
        if not self.exists(key):
            self.put_bytes(key, data)
        return key


class LocalStore(ArtifactStore):
    """An artifact root in a local folder."""

    def __init__(self, root: Path) -> None:
        self.root = root.resolve()
        self.uri = str(self.root)

    def _path(self, key: str) -> Path:
        return self.root / check_key(key)

    def put_bytes(self, key: str, data: bytes) -> None:
        write_atomically(self._path(key), data, "artifact")

    def get_bytes(self, key: str) -> bytes:
        path = self._path(key)
        try:
            return path.read_bytes()
        except FileNotFoundError:
            raise ArtifactNotFound(f"{path}: no such artifact") from None
        except OSError as error:
            raise ArtifactError(f"{path}: cannot read artifact ({error.strerror})") from None

    def exists(self, key: str) -> bool:
        return self._path(key).is_file()

    def list_keys(self, prefix: str = "") -> list[str]:
        base = self.root / prefix if prefix else self.root
        if not base.is_dir():
            return []
        keys = []
        for path in base.rglob("*"):
            if path.is_file() and TEMP_MARK not in path.name:
                keys.append(path.relative_to(self.root).as_posix())
        return sorted(keys)

    def delete(self, key: str) -> None:
        self._path(key).unlink(missing_ok=True)


@dataclass(frozen=True)
class S3Settings:
    """How to reach an S3-compatible service; unset fields fall back to boto3's own chain."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> S3Settings:
        """Read MEMTRIAL_S3_ENDPOINT_URL (else AWS_ENDPOINT_URL_S3 / AWS_ENDPOINT_URL) and the AWS variables."""
        env = dict(os.environ) if env is None else env
        endpoint = S3_ENDPOINT_URL.text(env) or env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL")
        region = env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION")
        return cls(endpoint, region, env.get("AWS_ACCESS_KEY_ID"), env.get("AWS_SECRET_ACCESS_KEY"))


class S3Store(ArtifactStore):
    """An artifact root at `s3://bucket/prefix` on any S3-compatible service."""

    def __init__(self, bucket: str, prefix: str = "", settings: S3Settings | None = None) -> None:
        import boto3
        from botocore.config import Config

        settings = settings or S3Settings.from_env()
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}".rstrip("/")
        self.client = boto3.client(
            "s3",
            endpoint_url=settings.endpoint_url,
            region_name=settings.region or "us-east-1",
            aws_access_key_id=settings.access_key_id,
            aws_secret_access_key=settings.secret_access_key,
            config=Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=60,
                          max_pool_connections=S3_POOL_CONNECTIONS),
        )

    def _key(self, key: str) -> str:
        check_key(key)
        return f"{self.prefix}/{key}" if self.prefix else key

    def _fail(self, key: str, error: Exception) -> ArtifactError:
        return ArtifactError(f"{self.uri}/{key}: S3 request failed ({error})")

    def put_bytes(self, key: str, data: bytes) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            if len(data) < MULTIPART_THRESHOLD:
                self.client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
            else:
                self.client.upload_fileobj(io.BytesIO(data), self.bucket, self._key(key))
        except (BotoCoreError, ClientError) as error:
            raise self._fail(key, error) from None

    def get_bytes(self, key: str) -> bytes:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            return self.client.get_object(Bucket=self.bucket, Key=self._key(key))["Body"].read()
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404"):
                raise ArtifactNotFound(f"{self.uri}/{key}: no such artifact") from None
            raise self._fail(key, error) from None
        except BotoCoreError as error:
            raise self._fail(key, error) from None

    def exists(self, key: str) -> bool:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.head_object(Bucket=self.bucket, Key=self._key(key))
            return True
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") in ("NoSuchKey", "404", "NotFound"):
                return False
            raise self._fail(key, error) from None
        except BotoCoreError as error:
            raise self._fail(key, error) from None

    def list_keys(self, prefix: str = "") -> list[str]:
        from botocore.exceptions import BotoCoreError, ClientError

        full = "/".join(p for p in (self.prefix, prefix.strip("/")) if p)
        full = f"{full}/" if full else ""
        keys: list[str] = []
        try:
            for page in self.client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=full):
                keys.extend(item["Key"] for item in page.get("Contents", []))
        except (BotoCoreError, ClientError) as error:
            raise self._fail(prefix or "", error) from None
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted(k[strip:] for k in keys)

    def delete(self, key: str) -> None:
        from botocore.exceptions import BotoCoreError, ClientError

        try:
            self.client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (BotoCoreError, ClientError) as error:
            raise self._fail(key, error) from None


def open_store(root: str | Path, settings: S3Settings | None = None) -> ArtifactStore:
    """The store for an artifact root: `s3://bucket/prefix` or a local folder path."""
    text = str(root)
    if text.startswith("s3://"):
        bucket, _, prefix = text[5:].partition("/")
        if not bucket:
            raise ArtifactError(f"artifact root {text!r} names no bucket; write s3://BUCKET/PREFIX")
        return S3Store(bucket, prefix, settings)
    if "://" in text:
        raise ArtifactError(f"artifact root {text!r}: only local folders and s3:// roots are supported")
    return LocalStore(Path(text))

