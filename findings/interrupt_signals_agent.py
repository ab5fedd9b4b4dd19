# Attack on #29 interrupts (held): the `command` agent signals everything it can reach (kill(-1, SIGINT),
# its process group, its parent with SIGTERM, pid 1) and exits 130. Run through `memtrial run --config`
# (pagekit-last-page, off and on): the CLI exits 0, the run's status.json says state "complete", and both
# attempts are stored as graded `fail` records (not ungradable, not cut short): the runner is out of reach
# (bwrap --new-session --unshare-pid, another uid), and no code reads a child's 130 as an interrupt.
import os, signal, sys
got = []
for name, hit in (("kill -1", lambda: os.kill(-1, signal.SIGINT)), ("killpg 0", lambda: os.killpg(0, signal.SIGINT)),
                  ("parent", lambda: os.kill(os.getppid(), signal.SIGTERM)), ("pid 1", lambda: os.kill(1, signal.SIGINT))):
    try:
        hit(); got.append(name + ": sent")
    except OSError as e:
        got.append(f"{name}: {e.strerror}")
sys.stderr.write("SIGNALS " + "; ".join(got) + "\n")
os._exit(130)
