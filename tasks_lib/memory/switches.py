"""The kill switch and lane ablation, read from the environment by the code that would recall.

`MEMORY_OFF_ENV=1` (see `env`) turns memory delivery off: recall returns nothing without searching
(its arguments are still checked), and the hook prints nothing. `ABLATE_LANES_ENV` is a comma list
of lane names, or `all`; those lanes are skipped before any call is made. Both are read at call
time, in the process that would have made the call. They are adapter-level switches (the
conformance and retrieval suites, a hand-run hook): the arm runner never sets them on an agent,
whose environment would then name its arm; it withholds the store (`off`, `ablate:all`) or strips
the lane from the replica instead (`tasks_lib.memory.reference.replica.strip_lanes`). A malformed
value is an error, never ignored: a typo would otherwise make an ablation silently equal to `on`.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping

from tasks_lib.memory.env import ABLATE_LANES_ENV, MEMORY_OFF_ENV
from tasks_lib.memory.errors import SwitchError, UnknownLaneError


def memory_off(env: Mapping[str, str] | None = None) -> bool:
    """True when the kill switch is set. Raises SwitchError for a value other than '', '0' or '1'."""
    value = (os.environ if env is None else env).get(MEMORY_OFF_ENV, "").strip()
    if value not in ("", "0", "1"):
        raise SwitchError(f"{MEMORY_OFF_ENV}={value!r} is not understood; set it to 1 (memory off) or 0/unset (on)")
    return value == "1"


def ablated_lanes(known: Iterable[str], env: Mapping[str, str] | None = None) -> frozenset[str]:
    """The lanes named by ABLATE_LANES_ENV (`all` = every known lane).

    Raises UnknownLaneError naming the known lanes when a name is not one of `known`.
    """
    known_set = frozenset(known)
    raw = (os.environ if env is None else env).get(ABLATE_LANES_ENV, "").strip()
    if not raw:
        return frozenset()
    names = [n.strip() for n in raw.split(",") if n.strip()]
    if names == ["all"]:
        return known_set
    unknown = sorted(set(names) - known_set)
    if unknown:
        raise UnknownLaneError(
            f"{ABLATE_LANES_ENV}: unknown lane(s) {', '.join(unknown)}; known lanes are "
            f"{', '.join(sorted(known_set))} (or 'all')"
        )
    return frozenset(names)


def active_lanes(
    known: Iterable[str], requested: Iterable[str] | None = None, env: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Lanes a recall may use: `requested` (default all `known`) minus the ablated ones, in `known` order.

    Returns () when the kill switch is set. Raises UnknownLaneError for a requested lane not in
    `known`, and SwitchError/UnknownLaneError for malformed switches.
    """
    known_t = tuple(known)
    if requested is None:
        wanted = set(known_t)
    else:
        wanted = set(requested)
        unknown = sorted(wanted - set(known_t))
        if unknown:
            raise UnknownLaneError(f"lanes: unknown lane(s) {', '.join(unknown)}; known lanes are {', '.join(known_t)}")
    off = memory_off(env)
    skipped = ablated_lanes(known_t, env)
    if off:
        return ()
    return tuple(lane for lane in known_t if lane in wanted and lane not in skipped)
