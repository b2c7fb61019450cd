"""A real Redis Sentinel deployment on loopback: a primary, two replicas and three
sentinels, all processes of the suite's server binary (a sentinel is the same
binary started with ``--sentinel`` on a config file of its own).

The sentinels monitor the primary as :data:`MASTER_NAME` with quorum 2,
``down-after-milliseconds`` 1000 and ``failover-timeout`` 3000, so a primary
killed with SIGKILL is replaced within a few seconds.

``via_proxy=True`` puts a loopback :class:`~tests.faults.proxy.TcpProxy` in
front of the first primary: the sentinels, the replicas and every client reach
it only through the proxy, so blackholing the proxy partitions the old
primary from everyone.

``start()`` returns once every sentinel knows the primary, both replicas and the
other two sentinels; ``stop()`` ends every process by its PID.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
import time
from pathlib import Path

import redis

from celery_dgs.embedded import RedisServerProcess, find_server_binary, free_port
from celery_dgs.errors import EmbeddedServerError

MASTER_NAME = "dgsprimary"
DOWN_AFTER_MS = 1000
FAILOVER_TIMEOUT_MS = 3000
READY_TIMEOUT_S = 30.0
#: Server options of both data servers (either may become the primary): a full
#: sync starts at once (no diskless delay) and replicas are pinged every second;
#: a primary with no replica acknowledging within MAX_LAG seconds refuses
#: writes (docs/guarantees.md: what a Sentinel deployment must configure).
MAX_LAG = 1
#: Two replicas: after a fail-over the new primary still has one, so it takes
#: writes under ``min-replicas-to-write 1`` before the old primary is back.
REPLICAS = 2
DATA_ARGS = (
    "--repl-diskless-sync-delay",
    "0",
    "--repl-ping-replica-period",
    "1",
    "--min-replicas-to-write",
    "1",
    "--min-replicas-max-lag",
    str(MAX_LAG),
)


class SentinelModeUnsupported(EmbeddedServerError):
    """The server binary does not run as a sentinel."""


class SentinelProcess:
    """One sentinel: the server binary with ``--sentinel`` on a config file that
    it rewrites as it learns (a sentinel needs a writable config)."""

    def __init__(
        self,
        data_dir: Path,
        binary: Path,
        monitor: tuple[str, int],
        host: str = "127.0.0.1",
        *,
        primary_password: str | None = None,
        password: str | None = None,
    ) -> None:
        self.host, self.port = host, free_port(host)
        self.password = password
        auth = [f"sentinel auth-pass {MASTER_NAME} {primary_password}"] if primary_password else []
        if password:  # its own, and the one it gives the other sentinels
            auth += [f"requirepass {password}", f"sentinel sentinel-pass {password}"]
        self.binary, self.data_dir = binary, data_dir
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.config = data_dir / "sentinel.conf"
        self.config.write_text(
            "\n".join(
                [
                    f"port {self.port}",
                    f"bind {host}",
                    "protected-mode no",
                    f"dir {data_dir}",
                    f"logfile {data_dir / 'sentinel.log'}",
                    f"sentinel monitor {MASTER_NAME} {monitor[0]} {monitor[1]} 2",
                    f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
                    f"sentinel failover-timeout {MASTER_NAME} {FAILOVER_TIMEOUT_MS}",
                    f"sentinel parallel-syncs {MASTER_NAME} 1",
                    *auth,
                    "",
                ]
            )
        )
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self, timeout: float = 15.0, attempts: int = 3) -> SentinelProcess:
        """Start it; a port that another process took since it was picked
        (``bind: Address already in use``) is replaced by a new free one."""
        for attempt in range(attempts):
            try:
                return self._start_once(timeout)
            except EmbeddedServerError as exc:
                self.stop()  # the exited process's pipe
                if "Address already in use" not in str(exc) or attempt == attempts - 1:
                    raise
                old_port, self.port = self.port, free_port(self.host)
                text = self.config.read_text()
                self.config.write_text(text.replace(f"port {old_port}\n", f"port {self.port}\n", 1))
        raise AssertionError("unreachable")

    def _start_once(self, timeout: float) -> SentinelProcess:
        self._proc = subprocess.Popen(
            [str(self.binary), str(self.config), "--sentinel"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        deadline = time.monotonic() + timeout
        client = redis.Redis(self.host, self.port, socket_timeout=0.5, password=self.password)
        try:
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    stderr = self._proc.stderr
                    err = stderr.read().decode(errors="replace") if stderr else ""
                    log = self.data_dir / "sentinel.log"
                    text = err + (log.read_text(errors="replace")[-2000:] if log.exists() else "")
                    if "sentinel" in text.lower() and (
                        "unknown" in text.lower() or "bad directive" in text.lower()
                    ):
                        raise SentinelModeUnsupported(
                            f"{self.binary} does not run as a sentinel: {text.strip()}"
                        )
                    raise EmbeddedServerError(
                        f"sentinel on port {self.port} exited with {self._proc.returncode}: {text}"
                    )
                with contextlib.suppress(redis.RedisError):
                    if client.ping():
                        return self
                time.sleep(0.05)
        finally:
            client.close()
        self.stop()
        raise EmbeddedServerError(f"sentinel on port {self.port} did not answer within {timeout}s")

    def stop(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)
        if proc.stderr:
            proc.stderr.close()


class RedisSentinelProcesses:
    """A primary, two replicas of it, and three sentinels monitoring the primary.

    ``password``: the data servers' (``requirepass``, and ``masterauth`` for the
    replicas); ``sentinel_password``: the sentinels' own."""

    def __init__(
        self,
        data_dir: Path,
        *,
        via_proxy: bool = False,
        password: str | None = None,
        sentinel_password: str | None = None,
    ) -> None:
        from tests.faults.proxy import TcpProxy

        self.binary = find_server_binary()
        self.password, self.sentinel_password = password, sentinel_password
        auth = ("--masterauth", password) if password else ()
        self.data_args = (*DATA_ARGS, *auth)
        self.primary = RedisServerProcess(
            data_dir=data_dir / "primary",
            binary=self.binary,
            extra_args=self.data_args,
            password=password,
        )
        self.proxy = TcpProxy(self.primary.host, self.primary.port) if via_proxy else None
        #: Where everyone reaches the first primary (the proxy, with ``via_proxy``).
        self.primary_address = (
            ("127.0.0.1", self.proxy.port) if self.proxy else (self.primary.host, self.primary.port)
        )
        self.replicas = [
            RedisServerProcess(
                data_dir=data_dir / f"replica{i}",
                binary=self.binary,
                password=password,
                extra_args=(*self.data_args, "--replicaof", *map(str, self.primary_address)),
            )
            for i in range(REPLICAS)
        ]
        self.servers = [self.primary, *self.replicas]
        for server in self.servers:
            server.data_dir.mkdir(parents=True, exist_ok=True)
        self.sentinels = [
            SentinelProcess(
                data_dir / f"sentinel{i}",
                self.binary,
                self.primary_address,
                primary_password=password,
                password=sentinel_password,
            )
            for i in range(3)
        ]

    @property
    def url(self) -> str:
        """The ``sentinel://`` URL of the three sentinels (database 0; the data
        servers' password in the first part)."""
        auth = f":{self.password}@" if self.password else ""
        return ";".join(
            f"sentinel://{auth if i == 0 else ''}{s.host}:{s.port}/0"
            for i, s in enumerate(self.sentinels)
        )

    def start(self, timeout: float = READY_TIMEOUT_S) -> RedisSentinelProcesses:
        try:
            for server in self.servers:
                server.start()
            for sentinel in self.sentinels:
                sentinel.start()
            self.wait_ready(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def sentinel_client(self, i: int = 0) -> redis.Redis:
        s = self.sentinels[i]
        return redis.Redis(
            s.host,
            s.port,
            socket_timeout=1.0,
            decode_responses=True,
            password=self.sentinel_password,
        )

    def primary_addr(self) -> tuple[str, int]:
        """The primary's address as the first sentinel that answers has it."""
        for i in range(len(self.sentinels)):
            client = self.sentinel_client(i)
            try:
                host, port = client.execute_command(
                    "SENTINEL", "GET-MASTER-ADDR-BY-NAME", MASTER_NAME
                )
                return str(host), int(port)
            except redis.RedisError:
                continue
            finally:
                client.close()
        raise EmbeddedServerError("no sentinel answered")

    def server_at(self, address: tuple[str, int]) -> RedisServerProcess:
        """The data server at ``address`` (the proxy's address is the first primary)."""
        if self.proxy is not None and address[1] == self.proxy.port:
            return self.primary
        return next(s for s in self.servers if s.port == address[1])

    def wait_ready(self, timeout: float = READY_TIMEOUT_S) -> None:
        """Every sentinel sees an up primary with two live, synced replicas and
        two other sentinels."""
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            try:
                if all(self._sentinel_ready(i) for i in range(len(self.sentinels))):
                    return
            except redis.RedisError as exc:
                last = str(exc)
            time.sleep(0.1)
        raise EmbeddedServerError(f"sentinels not ready within {timeout}s {last}")

    def _sentinel_ready(self, i: int) -> bool:
        client = self.sentinel_client(i)
        try:
            master = client.execute_command("SENTINEL", "MASTER", MASTER_NAME)
            info = (
                dict(zip(master[::2], master[1::2], strict=True))
                if isinstance(master, list)
                else master
            )
            if (
                "s_down" in info["flags"]
                or "o_down" in info["flags"]
                or int(info["num-other-sentinels"]) < 2
                or int(info["num-slaves"]) < REPLICAS
            ):
                return False
            replicas = client.execute_command("SENTINEL", "REPLICAS", MASTER_NAME)
            synced = 0
            for entry in replicas:
                r = (
                    dict(zip(entry[::2], entry[1::2], strict=True))
                    if isinstance(entry, list)
                    else entry
                )
                if "s_down" not in r["flags"] and r.get("master-link-status") == "ok":
                    synced += 1
            return synced >= REPLICAS
        finally:
            client.close()

    def failover(self) -> None:
        """``SENTINEL FAILOVER``: a sentinel promotes a replica now, without
        asking the others (the old primary becomes a replica)."""
        client = self.sentinel_client(0)
        try:
            client.execute_command("SENTINEL", "FAILOVER", MASTER_NAME)
        finally:
            client.close()

    def wait_primary_change(self, old: tuple[str, int], timeout: float = 20.0) -> tuple[str, int]:
        """The new primary's address once the sentinels name one other than ``old``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(EmbeddedServerError):
                now = self.primary_addr()
                if now != old:
                    return now
            time.sleep(0.05)
        raise EmbeddedServerError(f"no fail-over from {old} within {timeout}s")

    def stop(self) -> None:
        for sentinel in self.sentinels:
            sentinel.stop()
        for server in self.servers:
            server.stop(kill=True)
        if self.proxy is not None:
            self.proxy.close()


def restart_as_replica(deployment: RedisSentinelProcesses, server: RedisServerProcess) -> None:
    """Start a killed data server again, empty, as a replica of the current
    primary (as an operator brings a failed primary back), without waiting for
    the sentinels to demote it."""
    host, port = deployment.primary_addr()
    server.extra_args = (*deployment.data_args, "--replicaof", host, str(port))
    server.start()
