"""A small TCP proxy on loopback that can pass, blackhole or delay traffic.

One worker talks to Redis through it, so a fault hits that worker only:

- ``pass``: bytes flow as they come;
- ``blackhole``: bytes are held in both directions (connections stay open and
  new ones are accepted, as across a partition where packets are dropped and
  retransmitted later); on ``heal`` everything held is delivered in order;
- ``delay(seconds)``: every chunk is delivered that much later, in order.

``cut()`` closes every open connection (the peer sees a reset).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections import deque


class _Pipe:
    """One direction of one connection: a reader thread queues chunks with their
    due time; a writer thread delivers them when due and not blackholed."""

    def __init__(self, proxy: TcpProxy, src: socket.socket, dst: socket.socket) -> None:
        self.proxy, self.src, self.dst = proxy, src, dst
        self.queue: deque[tuple[float, bytes]] = deque()
        self.cond = threading.Condition()
        self.closed = False
        for target in (self._read, self._write):
            threading.Thread(target=target, daemon=True, name="faults-proxy").start()

    def close(self) -> None:
        with self.cond:
            self.closed = True
            self.cond.notify_all()
        for s in (self.src, self.dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                s.close()

    def _read(self) -> None:
        try:
            while not self.closed:
                data = self.src.recv(65536)
                if not data:
                    break
                with self.cond:
                    self.queue.append((time.monotonic() + self.proxy.delay, data))
                    self.cond.notify_all()
        except OSError:
            pass
        self.close()

    def _write(self) -> None:
        try:
            while True:
                with self.cond:
                    while not self.closed and (not self.queue or self.proxy.blackholed):
                        self.cond.wait(0.05)
                    if self.closed:
                        return
                    due, data = self.queue[0]
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(min(wait, 0.05))
                    continue
                with self.cond:
                    self.queue.popleft()
                self.dst.sendall(data)
        except OSError:
            self.close()


class TcpProxy:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.delay = 0.0
        self.blackholed = False
        self._pipes: list[_Pipe] = []
        self._lock = threading.Lock()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._stopped = False
        threading.Thread(target=self._accept, daemon=True, name="faults-proxy-accept").start()

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    # -- modes ------------------------------------------------------------------------
    def blackhole(self) -> None:
        self.blackholed = True

    def set_delay(self, seconds: float) -> None:
        self.delay = seconds

    def heal(self) -> None:
        self.blackholed = False
        self.delay = 0.0

    def cut(self) -> None:
        with self._lock:
            pipes, self._pipes = self._pipes, []
        for pipe in pipes:
            pipe.close()

    def close(self) -> None:
        self._stopped = True
        with contextlib.suppress(OSError):
            self._listener.close()
        self.cut()

    def _accept(self) -> None:
        while not self._stopped:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(self.target, timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            for s in (client, upstream):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                self._pipes += [_Pipe(self, client, upstream), _Pipe(self, upstream, client)]
