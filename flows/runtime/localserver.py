"""The Prefect API of a `memtrial` command: `PREFECT_API_URL`, else a running `memtrial server`, else a
server this process starts and owns.

Prefect's own temporary server (the client starts it when no API URL is set) outlived a flow process
killed with `kill -9`. memtrial starts that server itself instead: the child watches the PID of the
process that started it and stops within `WATCH_SECONDS` of its death, whatever the signal; a normal
exit stops it at once. `memtrial server` keeps one server running for many commands (no ~6 s start
each): it records its URL in `$PREFECT_HOME/memtrial-server.json`, and a command that finds a live
server there uses it. Once a command has its API, temporary servers are switched off for it and every
process it starts (`PREFECT_SERVER_EPHEMERAL_ENABLED=false`): a process without the URL fails, it does
not start a server of its own.

Everything here runs before `import prefect` (Prefect reads its settings at import); the child
imports Prefect's server, the parent only speaks HTTP.
"""

from __future__ import annotations

import argparse
import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from flows.runtime.interrupt import spare
from tasks_lib.errors import MemtrialError

SERVER_FILE = "memtrial-server.json"
"""In $PREFECT_HOME: the URL and PID of a running `memtrial server`."""
SERVER_LOG = "memtrial-server.log"
"""In $PREFECT_HOME: what the servers memtrial started wrote to stdout and stderr."""
WATCH_SECONDS = 0.2
"""How often an owned server checks that the process that started it is alive."""
STOP_GRACE_SECONDS = 5.0
"""How long a server gets to shut down cleanly before it is killed."""


class LocalServerError(MemtrialError):
    """A local Prefect server could not be started or found."""


@dataclass(frozen=True)
class Api:
    """Where a command's Prefect API is and who provides it."""

    url: str
    """The API's base URL (ends in /api)."""
    source: str
    """'environment' (PREFECT_API_URL), 'memtrial server' (a running one reused), 'owned' (started for this
    process) or 'prefect' (Prefect was imported first: its settings, maybe its temporary server)."""


def prefect_home() -> Path:
    """$PREFECT_HOME (`configure_prefect()` sets it)."""
    return Path(os.environ["PREFECT_HOME"])


def healthy(url: str, timeout: float = 2.0) -> bool:
    """Whether the Prefect API at `url` answers its health check."""
    try:
        with urllib.request.urlopen(f"{url.rstrip('/')}/health", timeout=timeout) as response:
            return response.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


def running_server(home: Path) -> str | None:
    """The URL of the live `memtrial server` recorded in `home`, or None (no file, a dead PID, no answer)."""
    try:
        recorded = json.loads((home / SERVER_FILE).read_text(encoding="utf-8"))
        url, pid = str(recorded["url"]), int(recorded["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    from tasks_lib.sandbox.procs import is_running

    return url if is_running(pid) and healthy(url) else None


def free_port() -> int:
    """A port on 127.0.0.1 that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def api_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/api"


def _server_env(ephemeral: bool) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PREFECT_API_URL")}
    if ephemeral:  # what Prefect's temporary server sets: no UI, only the services a short-lived server needs
        env.update({"PREFECT_UI_ENABLED": "0", "PREFECT__SERVER_EPHEMERAL": "1", "PREFECT__SERVER_FINAL": "1"})
    return env


def _spawn() -> tuple[int, subprocess.Popen[bytes]]:
    """The owned server's process (this module's `main`, watching this process) and the port it bound:
    the child binds a free port before anything else and prints it, so no other process can take it."""
    log = open(prefect_home() / SERVER_LOG, "ab")  # noqa: SIM115 - the child holds it; ours closes below
    try:
        process = subprocess.Popen([sys.executable, "-m", "flows.runtime.localserver", "--parent", str(os.getpid())],
                                   env=_server_env(ephemeral=True), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=log,
                                   start_new_session=True)
    finally:
        log.close()
    assert process.stdout is not None
    line = process.stdout.readline()
    process.stdout.close()
    if not line.strip().isdigit():
        stop(process)
        raise LocalServerError(f"the local Prefect server did not report its port (exit status {process.returncode}; "
                               f"log: {prefect_home() / SERVER_LOG})")
    return int(line), process


def stop(process: subprocess.Popen[bytes]) -> None:
    """Stop a server this process started: SIGTERM, then SIGKILL after STOP_GRACE_SECONDS."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(STOP_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def start_owned() -> tuple[str, subprocess.Popen[bytes]]:
    """Start a server owned by this process, without waiting for it (`ready()` waits); it stops when this
    process exits (atexit) or dies (its watchdog). It runs in a session of its own, so a Ctrl-C at the
terminal reaches the command, not its server: the interrupted command still reports to it, and stops it last."""
    port, process = _spawn()
    spare(process.pid)
    atexit.register(stop, process)
    return api_url(port), process


def wait_healthy(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    """Return once the owned server at `url` answers; LocalServerError if it exits or stays silent."""
    deadline = time.monotonic() + timeout
    while not healthy(url, timeout=1.0):
        if process.poll() is not None:
            raise LocalServerError(f"the local Prefect server exited with status {process.returncode} before answering "
                                   f"(log: {prefect_home() / SERVER_LOG}); rerun, or start one with 'memtrial server'")
        if time.monotonic() > deadline:
            stop(process)
            raise LocalServerError(f"the local Prefect server did not answer within {timeout:g} s (log: {prefect_home() / SERVER_LOG}); "
                                   "raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS or start one with 'memtrial server'")
        time.sleep(0.1)


_chosen: Api | None = None
_owned: subprocess.Popen[bytes] | None = None


def ensure_api() -> Api:
    """The Prefect API this process uses, set in PREFECT_API_URL, with temporary servers switched off;
    an owned server is started here and waited for in `ready()` (it starts while the command checks
    its input). Call after `configure_prefect()` and before `import prefect`. In a process that imported
    Prefect already (a library caller, a test), Prefect's own settings decide and nothing is started."""
    global _chosen, _owned
    if _chosen is not None:
        return _chosen
    if "prefect" in sys.modules:
        from prefect.settings import PREFECT_API_URL

        current = PREFECT_API_URL.value()
        _chosen = Api(current or "", "prefect")
        return _chosen
    url = os.environ.get("PREFECT_API_URL")
    if url:
        _chosen = Api(url, "environment")
    elif found := running_server(prefect_home()):
        _chosen = Api(found, "memtrial server")
    else:
        owned_url, _owned = start_owned()
        _chosen = Api(owned_url, "owned")
    os.environ["PREFECT_API_URL"] = _chosen.url
    os.environ["PREFECT_SERVER_EPHEMERAL_ENABLED"] = "false"
    return _chosen


def ready() -> str | None:
    """Wait for the API `ensure_api()` chose to answer (an owned server's start); return the line that
    tells the user which API it is (None when Prefect's own settings decide)."""
    api = ensure_api()
    if api.source == "owned" and _owned is not None:
        wait_healthy(api.url, _owned, float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 180))
    return describe(api)


def describe(api: Api) -> str | None:
    """One line for the user: which Prefect API this command uses (None when Prefect's settings decide)."""
    if api.source == "prefect":
        return None
    if api.source == "owned":
        return (f"memtrial: started a local Prefect server at {api.url} for this command (stops with it); "
                "'memtrial server' keeps one running and saves that start")
    if api.source == "memtrial server":
        return f"memtrial: using the running memtrial server at {api.url}"
    return f"memtrial: using the Prefect API at {api.url} (PREFECT_API_URL)"


def bind(port: int) -> socket.socket:
    """A listening socket on 127.0.0.1:`port` (0: a free port)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(2048)
    return sock


def serve(sock: socket.socket) -> None:
    """Run Prefect's API server on `sock` in this process until SIGTERM or SIGINT."""
    import uvicorn

    config = uvicorn.Config("prefect.server.api.server:create_app", factory=True, log_level="error", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def watch_parent(parent: int) -> None:
    """Stop this process (SIGTERM, then exit) once `parent` is no longer its parent: it died."""
    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(WATCH_SECONDS)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(STOP_GRACE_SECONDS)
        os._exit(1)

    threading.Thread(target=watch, name="memtrial-parent-watch", daemon=True).start()


def run_standing(port: int) -> None:
    """`memtrial server`: serve on 127.0.0.1:`port`, recorded in $PREFECT_HOME for other commands to reuse."""
    home = prefect_home()
    found = running_server(home)
    if found:
        raise LocalServerError(f"a memtrial server already runs at {found} ({home / SERVER_FILE}); use it: export PREFECT_API_URL={found}")
    try:
        sock = bind(port)
    except OSError as error:
        raise LocalServerError(f"--port {port}: cannot listen on 127.0.0.1:{port} ({error.strerror}); pick another port") from None
    os.environ.update(_server_env(ephemeral=False))
    os.environ.pop("PREFECT_API_URL", None)
    record = home / SERVER_FILE
    record.write_text(json.dumps({"url": api_url(port), "pid": os.getpid()}) + "\n", encoding="utf-8")
    try:
        serve(sock)
    finally:
        record.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    """The owned server's process: `python -m flows.runtime.localserver --parent PID` binds a free port, prints
    it on stdout (then stdout joins stderr, the log), and serves until PID dies."""
    parser = argparse.ArgumentParser(prog="python -m flows.runtime.localserver", description=__doc__.split("\n")[0])
    parser.add_argument("--parent", type=int, required=True, help="stop when this process dies")
    args = parser.parse_args(argv)
    watch_parent(args.parent)
    sock = bind(0)
    print(sock.getsockname()[1], flush=True)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    serve(sock)


if __name__ == "__main__":
    main()
