"""A minimal loopback TCP proxy that can blackhole traffic (fencing e2e tests).

``BlackholeProxy(port).start()`` listens on a free loopback port and forwards
every connection to ``127.0.0.1:port``. :meth:`blackhole` stops forwarding in
both directions without closing anything (bytes wait, as in a partition where
TCP keeps retransmitting); :meth:`restore` lets them through again. The
``faults`` suite has a fuller proxy (``tests/faults/proxy.py``); this one only
does what the self-fencing test needs.
"""

from __future__ import annotations

import contextlib
import socket
import threading

from celery_dgs.embedded import free_port


class BlackholeProxy:
    def __init__(self, target_port: int, host: str = "127.0.0.1") -> None:
        self.host = host
        self.target_port = target_port
        self.port = free_port(host)
        self._open = threading.Event()
        self._open.set()
        self._stop = threading.Event()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None

    @property
    def url(self) -> str:
        return f"redis://{self.host}:{self.port}/0"

    def start(self) -> BlackholeProxy:
        listener = socket.create_server((self.host, self.port))
        listener.settimeout(0.2)
        self._listener = listener
        threading.Thread(target=self._accept, daemon=True, name="blackhole-accept").start()
        return self

    def blackhole(self) -> None:
        self._open.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._stop.set()
        self._open.set()
        for sock in [*self._sockets, *([self._listener] if self._listener else [])]:
            with contextlib.suppress(OSError):
                sock.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            upstream = socket.create_connection((self.host, self.target_port))
            self._sockets += [client, upstream]
            for src, dst in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(src, dst), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while not self._stop.is_set():
                data = src.recv(65536)
                if not data:
                    break
                self._open.wait()  # blackholed: hold the bytes, close nothing
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
