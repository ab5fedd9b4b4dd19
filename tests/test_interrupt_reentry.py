"""A second SIGINT whose Python handler runs inside the first one's: Ctrl-C reaches the whole process
group and the interrupt's watcher forwards one more to the main thread, so the handler can re-enter
itself while it holds the interrupt state's lock. With a plain lock the main thread waited on itself
and the run hung until the hard stop (the flaky Ctrl-C test of two CI runs)."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap

PROGRAM = textwrap.dedent("""
    import signal
    from flows.runtime import interrupt
    with interrupt._state.lock:  # as the first handler holds it when the second one runs
        try:
            interrupt._on_signal(signal.SIGINT, None)
        except KeyboardInterrupt:
            print("unwound", interrupt._state.signal)
""")


def test_a_second_sigint_inside_the_first_ones_handler_unwinds_instead_of_deadlocking() -> None:
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["unwound", str(int(signal.SIGINT))]
