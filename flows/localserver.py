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

from tasks_lib.errors import MemtrialError

SERVER_FILE = "memtrial-server.json"
"""In $PREFECT_HOME: the URL and PID of a running `memtrial server`."""
SERVER_LOG = "memtrial-server.log"
"""In $PREFECT_HOME: what the servers memtrial started wrote to stdout and stderr."""
WATCH_SECONDS = 0.2
"""How often an owned server checks that the process that started it is alive."""
STOP_GRACE_SECONDS = 5.0
"""How long a server gets to shut down cleanly before it is killed."""
PORT_ATTEMPTS = 3
"""Fresh ports tried when the server's port was taken between choosing it and binding it."""


class LocalServerError(MemtrialError):
    """A local Prefect server could not be started or found."""


@dataclass(frozen=True)
class Api:
    """Where a command's Prefect API is and who provides it."""

    url: str
    """The API's base URL (ends in /api)."""
    source: str
    """'environment' (PREFECT_API_URL), 'memtrial server' (a running one reused) or 'owned' (started for this process)."""


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


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def running_server(home: Path) -> str | None:
    """The URL of the live `memtrial server` recorded in `home`, or None (no file, a dead PID, no answer)."""
    try:
        recorded = json.loads((home / SERVER_FILE).read_text(encoding="utf-8"))
        url, pid = str(recorded["url"]), int(recorded["pid"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return url if _alive(pid) and healthy(url) else None


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


def _spawn(port: int) -> subprocess.Popen[bytes]:
    """The owned server's process: this module's `main`, watching this process."""
    log = open(prefect_home() / SERVER_LOG, "ab")  # noqa: SIM115 - the child holds it; ours closes below
    try:
        return subprocess.Popen([sys.executable, "-m", "flows.localserver", "--port", str(port), "--parent", str(os.getpid())],
                                env=_server_env(ephemeral=True), stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    finally:
        log.close()


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


def start_owned(timeout: float) -> tuple[str, subprocess.Popen[bytes]]:
    """Start a server owned by this process; return its URL once healthy. It stops when this process
    exits (atexit) or dies (its watchdog)."""
    for _ in range(PORT_ATTEMPTS):
        port = free_port()
        process = _spawn(port)
        atexit.register(stop, process)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if healthy(api_url(port), timeout=1.0):
                return api_url(port), process
            if process.poll() is not None:
                break
            time.sleep(0.1)
        else:
            stop(process)
            raise LocalServerError(f"the local Prefect server did not answer within {timeout:g} s (log: {prefect_home() / SERVER_LOG}); "
                                   "raise PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS or start one with 'memtrial server'")
        if _port_taken(port):
            continue
        raise LocalServerError(f"the local Prefect server exited with status {process.returncode} before answering "
                               f"(log: {prefect_home() / SERVER_LOG})")
    raise LocalServerError(f"no free port for a local Prefect server after {PORT_ATTEMPTS} tries")


def _port_taken(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def ensure_api() -> Api:
    """The Prefect API this command uses, set in PREFECT_API_URL, with temporary servers switched off.
    Call after `configure_prefect()` and before `import prefect`."""
    if "prefect" in sys.modules:
        raise RuntimeError("ensure_api() must run before prefect is imported (Prefect reads PREFECT_API_URL at import)")
    url = os.environ.get("PREFECT_API_URL")
    if url:
        api = Api(url, "environment")
    elif found := running_server(prefect_home()):
        api = Api(found, "memtrial server")
    else:
        timeout = float(os.environ.get("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS") or 180)
        api = Api(start_owned(timeout)[0], "owned")
    os.environ["PREFECT_API_URL"] = api.url
    os.environ["PREFECT_SERVER_EPHEMERAL_ENABLED"] = "false"
    return api


def describe(api: Api) -> str:
    """One line for the user: which Prefect API this command uses."""
    if api.source == "owned":
        return (f"memtrial: started a local Prefect server at {api.url} for this command (stops with it); "
                "'memtrial server' keeps one running and saves that start")
    if api.source == "memtrial server":
        return f"memtrial: using the running memtrial server at {api.url}"
    return f"memtrial: using the Prefect API at {api.url} (PREFECT_API_URL)"


def serve(port: int) -> None:
    """Run Prefect's API server on 127.0.0.1:`port` in this process until SIGTERM or SIGINT."""
    import uvicorn

    uvicorn.run("prefect.server.api.server:create_app", factory=True, host="127.0.0.1", port=port,
                log_level="error", lifespan="on")


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
    if _port_taken(port):
        raise LocalServerError(f"--port {port}: 127.0.0.1:{port} is in use; pick another port")
    os.environ.update(_server_env(ephemeral=False))
    os.environ.pop("PREFECT_API_URL", None)
    record = home / SERVER_FILE
    record.write_text(json.dumps({"url": api_url(port), "pid": os.getpid()}) + "\n", encoding="utf-8")
    try:
        serve(port)
    finally:
        record.unlink(missing_ok=True)


def main(argv: list[str] | None = None) -> None:
    """The owned server's process: `python -m flows.localserver --port P --parent PID`."""
    parser = argparse.ArgumentParser(prog="python -m flows.localserver", description=__doc__.split("\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parent", type=int, required=True, help="stop when this process dies")
    args = parser.parse_args(argv)
    watch_parent(args.parent)
    serve(args.port)


if __name__ == "__main__":
    main()
