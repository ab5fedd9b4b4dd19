"""Stop actions: what an interrupt must do for things a run started that are not its processes.

A container started through a Docker engine is the engine's child, not this process's, so killing
this process's descendants on Ctrl-C leaves it running. Whatever starts such a thing registers how to
stop it (`register`) and forgets it once it ended on its own (`forget`); the interrupt (`flows.runtime.interrupt`)
runs every registered action once (`run_all`). A caller that comes while the actions run waits until
they end, so the process never exits in the middle of a removal. After `run_all(latch=True)` (the whole
process is stopping) an action registered later runs at once, in the registering thread.
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable

_registry_lock = threading.Lock()
_running = threading.Lock()
_actions: dict[int, tuple[str, Callable[[], None]]] = {}
_handles = itertools.count(1)
_latched = False


def register(what: str, action: Callable[[], None]) -> int:
    """Have `action` (stopping `what`) run on an interrupt; return its handle for `forget`. When the process
    is already stopping, run it now."""
    with _registry_lock:
        if not _latched:
            handle = next(_handles)
            _actions[handle] = (what, action)
            return handle
    _run_one(what, action)
    return 0


def forget(handle: int) -> None:
    """`what` of `handle` ended on its own: no interrupt needs to stop it."""
    with _registry_lock:
        _actions.pop(handle, None)


def pending() -> list[str]:
    """What the registered actions stop (for messages and tests)."""
    with _registry_lock:
        return [what for what, _ in _actions.values()]


def run_all(*, latch: bool) -> int:
    """Run every registered action once (each is forgotten as it is taken) and return how many ran; a
    concurrent caller waits until they ended. `latch`: the process is stopping, so later registrations
    run at once."""
    global _latched
    with _running:
        with _registry_lock:
            _latched = _latched or latch
            taken = list(_actions.values())
            _actions.clear()
        for what, action in taken:
            _run_one(what, action)
        return len(taken)


def reset() -> None:
    """Forget the latch (a new interruptible run in the same process)."""
    global _latched
    with _registry_lock:
        _latched = False


def _run_one(what: str, action: Callable[[], None]) -> None:
    """Run `action`; a failure is one line on stderr (the others still run)."""
    try:
        action()
    except Exception as error:  # noqa: BLE001 - one stop failing must not keep the others from running
        os.write(2, f"memtrial: could not stop {what} on the interrupt: {type(error).__name__}: {error}\n".encode())
