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
- notes every recall it answered (realm, lanes searched, ids and SHA-256 of each served text) in
  memory, never in a file the agent could reach, and `close` returns them as a `DeliveryReceipt`
  stamped with a nonce the runner drew and no agent-visible name carries.

An arm without memory has no witness, hence no receipt: a delivery its transcript claims is a
leak or a forgery, never a delivery (`tasks_lib.arm.injection`).
"""

from __future__ import annotations

import hashlib
import os
import secrets
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from tasks_lib.contracts import ContractModel, Document, NonEmptyText, Sha256
from tasks_lib.memory.adapter import MemoryHit
from tasks_lib.memory.delivery import protocol
from tasks_lib.memory.delivery.client import MemoryClient
from tasks_lib.memory.delivery.server import SOCKET_NAME, MemoryServer
from tasks_lib.memory.errors import MemoryServerError

WITNESS_DIR = "memory"
"""Folder of the witness's socket inside the attempt's scratch root (the only part mounted for the agent)."""
SERVED_LABEL = "memory"
"""What the witness's ping says it serves: the same neutral word for every system and arm."""
NONCE_PATTERN = r"^[0-9a-f]{32}$"
SHUTDOWN_POLL_SECONDS = 0.005
"""How often the serving loop checks for `close`: `close` waits up to this long (every attempt with memory pays it)."""


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
    """Ids the runner planted for this attempt (empty when a provisioner assigns its own)."""
    planted_text_sha256: tuple[Sha256, ...] = ()
    """SHA-256 of the texts of the task's memories, for matching a system that assigns its own ids."""
    recalls: tuple[ServedRecall, ...] = ()
    """Every recall answered, in order."""
    refused: tuple[str, ...] = ()
    """Requests refused (another realm, a write), one line each."""

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
    """The protocol with the witness's rules: one realm, ablated lanes dropped, read-only, recalls noted."""

    def __init__(self, socket_path: Path, store: Any, realm: str, ablated: frozenset[str]) -> None:
        super().__init__(socket_path, store, None, True, SERVED_LABEL)
        self.realm = realm
        self.ablated = ablated
        self.recalls: list[ServedRecall] = []
        self.refused: list[str] = []

    def dispatch(self, request: protocol.Request, audit: dict[str, Any]) -> protocol.Message:
        """Answer under the witness's rules (see the module doc)."""
        lanes = tuple(self.store.LANES)
        if isinstance(request, protocol.PingRequest):
            return protocol.PingResponse(pid=os.getpid(), store=SERVED_LABEL, lanes=lanes, realms=(self.realm,), read_only=True)
        if not isinstance(request, protocol.RecallRequest):
            self.refused.append(f"{request.op}: this memory is read-only")
            raise MemoryServerError(f"{request.op}: this memory is read-only")
        if request.realm != self.realm:
            self.refused.append(f"recall: realm {request.realm!r} is not served here")
            raise MemoryServerError(f"realm: {request.realm!r} is not served here")
        asked = lanes if request.lanes is None else tuple(request.lanes)
        searched = tuple(lane for lane in asked if lane not in self.ablated)
        hits = tuple(self.store.recall(request.realm, request.query, request.k, lanes=list(searched))) if searched else ()
        self.recalls.append(ServedRecall(realm=request.realm, lanes=searched, ids=tuple(h.id for h in hits),
                                         text_sha256=tuple(text_digest(h.text) for h in hits), at=round(time.time(), 3)))
        return protocol.RecallResponse(hits=hits)


class DeliveryWitness:
    """One attempt's witness: serving from `start` until `close`, which returns the receipt."""

    def __init__(self, store: Any, realm: str, root: Path, *, served_by: str, ablated_lanes: Sequence[str] = (),
                 planted_ids: Sequence[str] = (), planted_texts: Sequence[str] = ()) -> None:
        """Serve `store` (anything with LANES and recall, e.g. `SqliteMemoryStore` or `ServedSystem`) for
        `realm` on a socket in `root/WITNESS_DIR`; `planted_*` say what counts as this task's memory."""
        self.store = store
        self.realm = realm
        self.folder = root / WITNESS_DIR
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
        alone (0700), so no one else on the host reaches them.
        Raises MemoryServerError when the socket cannot be bound.
        """
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
        if self._server is not None:
            if self._thread is not None and self._thread.is_alive():
                self._server.shutdown()  # waits for serve_forever: only a running loop may be asked
            self._server.server_close()
            with self._server.lock:
                recalls, refused = tuple(self._server.recalls), tuple(self._server.refused)
        if self._thread is not None:
            self._thread.join(timeout=5)
        self.socket_path.unlink(missing_ok=True)
        self.store.close()
        self._receipt = DeliveryReceipt(
            nonce=self.nonce, realm=self.realm, served_by=self.served_by, ablated_lanes=tuple(sorted(self.ablated)),
            planted_ids=self.planted_ids, planted_text_sha256=self.planted_text_sha256, recalls=recalls, refused=refused,
        )
        return self._receipt
