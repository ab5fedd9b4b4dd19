"""A private docker daemon for tests and benchmarks: its own socket, data and exec roots.

Never the machine's default socket. The daemon runs with `--bridge=none --iptables=false`, so
containers can only ever get network `none`; it is stopped by its own PID.

    with PrivateDockerd() as daemon:
        sandbox = DockerSandbox(base_url=daemon.base_url, image=ensure_image(daemon.base_url))
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from tasks_lib.sandbox.errors import DockerdError

STARTUP_SECONDS = 60.0
STOP_SECONDS = 20.0
LOG_TAIL_CHARS = 2000


class PrivateDockerd:
    """Start and stop one dockerd on a Unix socket under a fresh temporary directory."""

    def __init__(self, dockerd: str | None = None, root: Path | None = None) -> None:
        self.dockerd = dockerd or shutil.which("dockerd")
        self._own_root = root is None
        self.root = root or Path(tempfile.mkdtemp(prefix="memtrial-dockerd-", dir="/tmp"))
        self.socket = self.root / "docker.sock"
        self.log_path = self.root / "dockerd.log"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def base_url(self) -> str:
        """The docker API address (unix://...)."""
        return f"unix://{self.socket}"

    @property
    def pid(self) -> int | None:
        """PID of the daemon while it runs."""
        return self.process.pid if self.process is not None else None

    def _log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-LOG_TAIL_CHARS:]
        except OSError:
            return "(no log)"

    def start(self) -> str:
        """Start the daemon and wait until it answers; returns `base_url`.

        Raises:
            DockerdError: dockerd is missing, exits, or does not answer within STARTUP_SECONDS
                (the message quotes the end of its log).
        """
        if self.dockerd is None:
            raise DockerdError("dockerd not found on PATH; install docker.io (scripts/install_test_deps.sh)")
        if len(str(self.socket)) > 100:
            raise DockerdError(f"socket path {self.socket} is too long for a Unix socket; use a shorter root")
        argv = [
            self.dockerd, "--bridge=none", "--iptables=false", "--ip6tables=false",
            "--host", self.base_url, "--data-root", str(self.root / "data"), "--exec-root", str(self.root / "exec"),
            "--pidfile", str(self.root / "docker.pid"),
        ]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + STARTUP_SECONDS
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                code = self.process.returncode
                self.process = None
                raise DockerdError(f"dockerd exited with {code} while starting; its log ends:\n{self._log_tail()}")
            if self.socket.exists() and self._ping():
                return self.base_url
            time.sleep(0.2)
        self.stop()
        raise DockerdError(f"dockerd did not answer on {self.socket} within {STARTUP_SECONDS:.0f}s; log:\n{self._log_tail()}")

    def _ping(self) -> bool:
        import docker  # noqa: PLC0415 - the SDK is only needed where a daemon is used
        from docker.errors import DockerException  # noqa: PLC0415
        from requests.exceptions import RequestException  # noqa: PLC0415

        try:
            client = docker.DockerClient(base_url=self.base_url, timeout=5)
            try:
                return bool(client.ping())
            finally:
                client.close()
        except (DockerException, RequestException, OSError):
            return False

    def stop(self) -> None:
        """Stop the daemon by its PID (SIGTERM, then SIGKILL) and remove its root when we made it.

        Raises:
            DockerdError: the daemon is still running after SIGKILL.
        """
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(STOP_SECONDS)
            except subprocess.TimeoutExpired:
                process.kill()
                try:
                    process.wait(STOP_SECONDS)
                except subprocess.TimeoutExpired as error:
                    raise DockerdError(f"dockerd (pid {process.pid}) survived SIGKILL") from error
        if self._own_root:
            self._remove_root()

    def _remove_root(self) -> None:
        # Overlay mounts of removed containers are gone once the daemon stopped; unmount any leftover.
        with open("/proc/self/mounts") as mounts:
            leftovers = [line.split()[1] for line in mounts if line.split()[1].startswith(str(self.root) + "/")]
        for mount_point in sorted(leftovers, reverse=True):
            subprocess.run(["umount", "-l", mount_point], check=False, capture_output=True)
        shutil.rmtree(self.root, ignore_errors=True)  # temporary; a leftover only costs disk

    def __enter__(self) -> PrivateDockerd:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def dockerd_problem() -> str | None:
    """Why a private dockerd cannot be started here (None when the binaries are present)."""
    missing = [name for name in ("dockerd", "containerd", "runc") if shutil.which(name) is None]
    if missing:
        return f"{', '.join(missing)} not found on PATH; install docker.io (scripts/install_test_deps.sh)"
    if os.geteuid() != 0:
        return "a private dockerd needs root"
    return None
