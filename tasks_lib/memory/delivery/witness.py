"""The delivery witness: the one memory server an attempt's agent can reach, run inside the runner.

Delivery used to be read off the agent's transcript, which an agent can forge (a Claude Code agent
can write a hook line into its own CLI's stdout). The witness makes delivery a runner-side fact.
For every arm with memory, the runner starts a `DeliveryWitness` in its own process (a thread, on
a Unix socket in the attempt's runner-owned scratch root) in front of the arm's memory: the
reference store's replica, or whatever a provisioner restored (its replica file or its socket,
relayed). The agent and its hooks get only the witness's socket; the store itself is never
mounted. The witness:

- answers `recall` for the trial's realm only (another realm is refused, and the refusal noted);
- drops the lanes the condition ablates from every recall, whatever the request asks, so a
  served system with no replica to strip can run a lane ablation too; its ping shows the system's
  full lanes and only the trial's realm, the same in every arm with memory;
- refuses `remember` and `forget`;
- serves every hit blind (`blind_hit`): its text, the speaker, timestamp and session it was stored
  with, and nothing the memory system or the planting knows about it: the id is an HMAC of the
  system's id under a key drawn per witness (a reference id hashes the kind, so it could be searched
  back), the kind is always `fact` (`superseded` is planting metadata the runner keeps; no arm serves
  it), the lanes are empty and the score is the rank's (1, 1/2, 1/3, ...), so `on`, `placebo` and
  every `harm:*` arm serve memories of one form, whatever their planted state;
- is bounded against flooding: at most MAX_CONNECTIONS connections at once (a further one is closed
  at once and counted), MAX_REQUESTS_PER_SECOND requests a second with a burst of REQUEST_BURST (a
  request over the rate is answered with an error, counted and its connection closed), at most
  MAX_RECALLS recalls answered per attempt, and refusals counted, only the first MAX_REFUSED_NOTED
  kept as lines; so the runner's threads and the receipt's size stay bounded whatever the agent does,
  and the receipt says `flooded` when any bound turned something away (the attempt stays gradable:
  a flood only denies the attempt's own agent its memory);
- notes every recall it answered (realm, lanes searched, ids and SHA-256 of each served text) in
  memory, never in a file the agent could reach, and `close` returns them as a `DeliveryReceipt`
  stamped with a nonce the runner drew and no agent-visible name carries.

An arm without memory has no witness, hence no receipt: a delivery its transcript claims is a
leak or a forgery, never a delivery (`tasks_lib.arm.injection`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import shutil
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar, Final

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document, NonEmptyText, Sha256
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery import protocol
from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.server import SOCKET_NAME, MemoryServer
from tasks_lib.memory.errors import MemoryServerError
from tasks_lib.sockets import MAX_SOCKET_PATH_BYTES, SocketPathError, socket_folder

WITNESS_DIR = "memory"
"""Folder of the witness's socket inside the attempt's scratch root (the only part mounted for the agent)."""
SERVED_LABEL = "memory"
"""What the witness's ping says it serves: the same neutral word for every system and arm."""
NONCE_PATTERN = r"^[0-9a-f]{32}$"
SHUTDOWN_POLL_SECONDS = 0.005
"""How often the serving loop checks for `close`: `close` waits up to this long (every attempt with memory pays it)."""
BLIND_KIND: Final = "fact"
"""The kind of every memory the witness serves, whatever the memory system or the planting says."""
MAX_CONNECTIONS = 4
"""Most connections the witness serves at once (each is a runner thread); a further one is closed and counted."""
MAX_REQUESTS_PER_SECOND = 20.0
"""Sustained request rate the witness answers (a hook asks once per prompt)."""
REQUEST_BURST = 40
"""Requests the witness answers back to back before the rate applies."""
MAX_RECALLS = 500
"""Most recalls the witness answers in one attempt; a further one is refused and counted."""
MAX_REFUSED_NOTED = 20
"""Refusals kept as lines in the receipt; the rest are only counted."""


def served_id(key: bytes, memory_id: str) -> str:
    """The id the witness serves for the memory system's `memory_id`: 16 hex of an HMAC-SHA256 under `key`."""
    return hmac.new(key, memory_id.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()[:16]


def blind_hit(hit: MemoryHit, rank: int, key: bytes) -> MemoryHit:
    """`hit` as the witness serves it at 0-based `rank`: the same form in every arm (see the module doc)."""
    return MemoryHit(id=served_id(key, hit.id), text=hit.text, score=round(1.0 / (rank + 1), 6), lanes=(), kind=BLIND_KIND,
                     speaker=hit.speaker, timestamp=hit.timestamp, session=hit.session)


def text_digest(text: str) -> str:
    """SHA-256 of a memory's text as served (UTF-8, surrogates passed through), for matching by exact text."""
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class ServedRecall(ContractModel):
    """One recall the witness answered."""

    realm: str
    """The realm recalled from (always the trial's: others are refused)."""
    lanes: tuple[str, ...]
    """Lanes searched, after the condition's ablated lanes were dropped."""
    ids: tuple[str, ...]
    """Ids of the memories served, best first."""
    text_sha256: tuple[Sha256, ...]
    """SHA-256 of each served memory's text, in the order of `ids`."""
    at: float = Field(ge=0)
    """Unix time the answer was sent."""


class DeliveryReceipt(Document):
    """What the runner's delivery witness served in one attempt (`attempts/.../delivery.json`)."""

    KIND: ClassVar[str] = "delivery receipt"

    nonce: str = Field(pattern=NONCE_PATTERN)
    """Drawn by the runner for this attempt; the attempt's record carries the same value."""
    realm: str
    """The trial's realm, the only one the witness answered."""
    served_by: NonEmptyText
    """What stood behind the witness (the reference replica, or the provisioner's socket or file)."""
    ablated_lanes: tuple[str, ...] = ()
    """Lanes dropped from every recall."""
    planted_ids: tuple[str, ...] = ()
    """Ids the runner planted for this attempt, as the witness serves them (empty when a provisioner assigns its own)."""
    planted_text_sha256: tuple[Sha256, ...] = ()
    """SHA-256 of the texts of the task's memories, for matching a system that assigns its own ids."""
    recalls: tuple[ServedRecall, ...] = ()
    """Every recall answered, in order (the witness answers at most MAX_RECALLS)."""
    refused: tuple[str, ...] = ()
    """The first MAX_REFUSED_NOTED requests refused (another realm, a write, over a bound), one line each
    (receipts written before the bound hold every refusal)."""
    refused_count: int = Field(default=0, ge=0)
    """Every request refused, noted or not."""
    connections_refused: int = Field(default=0, ge=0)
    """Connections closed unserved because MAX_CONNECTIONS were open."""
    rate_limited: int = Field(default=0, ge=0)
    """Requests refused for coming faster than MAX_REQUESTS_PER_SECOND (after a burst of REQUEST_BURST)."""
    recalls_over_budget: int = Field(default=0, ge=0)
    """Recalls refused because MAX_RECALLS had been answered."""
    flooded: bool = False
    """Whether any bound turned a connection or request away; the attempt stays gradable, its agent only
    denied itself memory (the record's `witness_flooded` and the report's delivery table say so)."""

    def served_ids(self) -> tuple[str, ...]:
        """Every id served, first-seen order."""
        return tuple(dict.fromkeys(i for r in self.recalls for i in r.ids))

    def planted_served(self) -> tuple[str, ...]:
        """Ids served that are planted memories of this task (by id, or by exact text), first-seen order."""
        planted, texts = set(self.planted_ids), set(self.planted_text_sha256)
        return tuple(dict.fromkeys(i for r in self.recalls for i, d in zip(r.ids, r.text_sha256, strict=True)
                                   if i in planted or d in texts))


class ServedSystem:
    """A memory system a provisioner serves on its own socket, relayed by the witness (runner side only)."""

    def __init__(self, socket_path: str) -> None:
        """Connect to the provisioner's server at `socket_path` and learn its lanes.

        Raises MemoryServerError when it does not answer.
        """
        self.client = MemoryClient(socket_path)
        self.LANES = tuple(self.client.ping().lanes)

    def recall(self, realm: str, query: str, k: int, lanes: Sequence[str] | None = None) -> tuple[MemoryHit, ...]:
        """The provisioner's own recall."""
        return self.client.recall(realm, query, k, lanes=lanes)

    def close(self) -> None:
        """Nothing to release: every call is its own connection."""


class _WitnessServer(MemoryServer):
    """The protocol with the witness's rules: one realm, ablated lanes dropped, read-only, hits blind,
    bounded, recalls noted."""

    def __init__(self, socket_path: Path, store: Any, realm: str, ablated: frozenset[str]) -> None:
        super().__init__(socket_path, store, None, True, SERVED_LABEL)
        self.realm = realm
        self.ablated = ablated
        self.id_key = secrets.token_bytes(32)
        self.recalls: list[ServedRecall] = []
        self.refused: list[str] = []
        self.refused_count = self.connections_refused = self.rate_limited = self.recalls_over_budget = 0
        self.open_connections = 0
        self.tokens = float(REQUEST_BURST)
        self.refilled = time.monotonic()
        self.counters = threading.Lock()

    def refuse(self, line: str) -> None:
        """Count one refused request; keep its line while fewer than MAX_REFUSED_NOTED are kept (under `counters`)."""
        self.refused_count += 1
        if len(self.refused) < MAX_REFUSED_NOTED:
            self.refused.append(line)

    def process_request(self, request: Any, client_address: Any) -> None:
        """Serve the connection on a thread of its own when fewer than MAX_CONNECTIONS are open, else close it."""
        with self.counters:
            if self.open_connections >= MAX_CONNECTIONS:
                self.connections_refused += 1
                admitted = False
            else:
                self.open_connections += 1
                admitted = True
        if not admitted:
            self.shutdown_request(request)
            return
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._release()
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        """Serve one admitted connection, then free its place."""
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._release()

    def _release(self) -> None:
        with self.counters:
            self.open_connections -= 1

    def _within_rate(self) -> bool:
        """Take one request token (refilled at MAX_REQUESTS_PER_SECOND up to REQUEST_BURST); False when none is left."""
        with self.counters:
            now = time.monotonic()
            self.tokens = min(float(REQUEST_BURST), self.tokens + (now - self.refilled) * MAX_REQUESTS_PER_SECOND)
            self.refilled = now
            if self.tokens < 1.0:
                self.rate_limited += 1
                self.refuse(f"request: more than {MAX_REQUESTS_PER_SECOND:g} a second")
                return False
            self.tokens -= 1.0
            return True

    def answer(self, line: bytes) -> tuple[protocol.Message, bool]:
        """Answer one request line within the rate; a request over it gets an error and its connection is closed."""
        if not self._within_rate():
            return protocol.ErrorResponse(error=MemoryServerError.__name__,
                                          message=f"request: more than {MAX_REQUESTS_PER_SECOND:g} requests a second; slow down"), False
        return super().answer(line)

    def dispatch(self, request: protocol.Request, audit: dict[str, Any]) -> protocol.Message:
        """Answer under the witness's rules (see the module doc)."""
        lanes = tuple(self.store.LANES)
        if isinstance(request, protocol.PingRequest):
            return protocol.PingResponse(pid=os.getpid(), store=SERVED_LABEL, lanes=lanes, realms=(self.realm,), read_only=True)
        if not isinstance(request, protocol.RecallRequest):
            with self.counters:
                self.refuse(f"{request.op}: this memory is read-only")
            raise MemoryServerError(f"{request.op}: this memory is read-only")
        if request.realm != self.realm:
            with self.counters:
                self.refuse(f"recall: realm {request.realm[:100]!r} is not served here")
            raise MemoryServerError(f"realm: {request.realm[:100]!r} is not served here")
        if len(self.recalls) >= MAX_RECALLS:
            with self.counters:
                self.recalls_over_budget += 1
                self.refuse(f"recall: more than {MAX_RECALLS} in one attempt")
            raise MemoryServerError(f"recall: this memory answers at most {MAX_RECALLS} recalls; none is left")
        asked = lanes if request.lanes is None else tuple(request.lanes)
        searched = tuple(lane for lane in asked if lane not in self.ablated)
        found = tuple(self.store.recall(request.realm, request.query, request.k, lanes=list(searched))) if searched else ()
        hits = tuple(blind_hit(hit, rank, self.id_key) for rank, hit in enumerate(found))
        self.recalls.append(ServedRecall(realm=request.realm, lanes=searched, ids=tuple(h.id for h in hits),
                                         text_sha256=tuple(text_digest(h.text) for h in hits), at=round(time.time(), 3)))
        return protocol.RecallResponse(hits=hits)


class DeliveryWitness:
    """One attempt's witness: serving from `start` until `close`, which returns the receipt."""

    def __init__(self, store: Any, realm: str, root: Path, *, served_by: str, ablated_lanes: Sequence[str] = (),
                 planted_ids: Sequence[str] = (), planted_texts: Sequence[str] = ()) -> None:
        """Serve `store` (anything with LANES and recall, e.g. `SqliteMemoryStore` or `ServedSystem`) for
        `realm` on a socket in `root/WITNESS_DIR` (in a short private folder of `tasks_lib.sockets` when that
        path is too long for a Unix socket); `planted_*` say what counts as this task's memory."""
        self.store = store
        self.realm = realm
        self.folder = root / WITNESS_DIR
        self._short: Path | None = None
        """A short private folder holding `folder` when `root` is too long for a Unix socket (`tasks_lib.sockets`)."""
        self.served_by = served_by
        self.ablated = frozenset(ablated_lanes)
        self.planted_ids = tuple(planted_ids)
        self.planted_text_sha256 = tuple(dict.fromkeys(text_digest(t) for t in planted_texts))
        self.nonce = secrets.token_hex(16)
        self._server: _WitnessServer | None = None
        self._thread: threading.Thread | None = None
        self._receipt: DeliveryReceipt | None = None

    @property
    def socket_path(self) -> Path:
        """The socket the agent and its hooks connect to."""
        return self.folder / SOCKET_NAME

    def start(self) -> DeliveryWitness:
        """Bind the socket and serve on a daemon thread.

        The folder is 0755 (it holds only the socket) and the socket 0666, so the agent's unprivileged
        uid can find and connect to it through the mount; the scratch root above them is the runner's
        alone (0700), so no one else on the host reaches them (or, when its path is too long for a
        socket, a fresh 0700 folder of `tasks_lib.sockets.socket_folder`).
        Raises MemoryServerError when the socket cannot be bound.
        """
        if len(os.fsencode(self.socket_path)) > MAX_SOCKET_PATH_BYTES:
            try:
                self._short = socket_folder()
            except SocketPathError as error:
                raise MemoryServerError(f"delivery witness: {error}") from None
            self.folder = self._short / WITNESS_DIR
        self.folder.mkdir(mode=0o755)
        self.folder.chmod(0o755)
        old_umask = os.umask(0)
        try:
            self._server = _WitnessServer(self.socket_path, self.store, self.realm, self.ablated)
        except OSError as error:
            raise MemoryServerError(f"delivery witness: cannot listen on {self.socket_path} ({error})") from None
        finally:
            os.umask(old_umask)
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": SHUTDOWN_POLL_SECONDS},
                                        name="delivery-witness", daemon=True)
        self._thread.start()
        return self

    def close(self) -> DeliveryReceipt:
        """Stop serving (a request in flight finishes first), remove the socket, close the store, and
        return the receipt; calling it again returns the same receipt."""
        if self._receipt is not None:
            return self._receipt
        recalls: tuple[ServedRecall, ...] = ()
        refused: tuple[str, ...] = ()
        counts = {"refused_count": 0, "connections_refused": 0, "rate_limited": 0, "recalls_over_budget": 0}
        planted_ids = self.planted_ids
        if self._server is not None:
            server = self._server
            if self._thread is not None and self._thread.is_alive():
                server.shutdown()  # waits for serve_forever: only a running loop may be asked
            server.server_close()
            with server.lock, server.counters:
                recalls, refused = tuple(server.recalls), tuple(server.refused)
                counts = {name: getattr(server, name) for name in counts}
            planted_ids = tuple(served_id(server.id_key, i) for i in self.planted_ids)
        flooded = any(counts[name] for name in ("connections_refused", "rate_limited", "recalls_over_budget"))
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.socket_path.unlink(missing_ok=True)
        if self._short is not None:
            shutil.rmtree(self._short, ignore_errors=True)
        self.store.close()
        self._receipt = DeliveryReceipt(
            nonce=self.nonce, realm=self.realm, served_by=self.served_by, ablated_lanes=tuple(sorted(self.ablated)),
            planted_ids=planted_ids, planted_text_sha256=self.planted_text_sha256, recalls=recalls, refused=refused,
            flooded=flooded, refused_count=counts["refused_count"], connections_refused=counts["connections_refused"],
            rate_limited=counts["rate_limited"], recalls_over_budget=counts["recalls_over_budget"],
        )
        return self._receipt
