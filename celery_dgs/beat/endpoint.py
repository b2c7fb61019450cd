"""Beat's HTTP endpoint when ``dgs_metrics_port`` is set: ``/metrics`` (the
collector of :mod:`celery_dgs.metrics`), ``/healthz`` (200 ``ok`` while
beat's loop completed a tick within :func:`tick_limit` seconds: three times
the longest sleep a tick asks for, at least 30 s; 503 otherwise, with a short
text body saying why) and 404 on any other path."""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from socketserver import ThreadingMixIn
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, make_wsgi_app

from ..core.clock import Clock
from ..metrics import metrics_registry
from ..store.base import ScheduleStore
from .engine import BeatEngine

logger = logging.getLogger("celery_dgs.metrics")


#: ``/healthz`` answers 503 once beat's loop has not completed a tick for this
#: many of its longest sleeps ...
HEALTHZ_TICK_INTERVALS = 3
#: ... or for this many seconds, whichever is longer (a tick applying many
#: store changes takes a while by itself).
HEALTHZ_MIN_LIMIT_S = 30.0


def tick_limit(engine: BeatEngine) -> float:
    """Seconds beat's loop may go without completing a tick and still be
    healthy: :data:`HEALTHZ_TICK_INTERVALS` times the longest sleep a tick asks
    for (as :meth:`~celery_dgs.beat.engine.BeatEngine.tick` caps it: its
    ``max_interval``, 5 x ``store_poll_interval``, the leader's renewal
    interval), at least :data:`HEALTHZ_MIN_LIMIT_S`."""
    longest = min(float(engine.max_interval), float(engine.settings.store_poll_interval) * 5)
    leadership = engine.leadership
    if leadership is not None:
        longest = min(longest, float(leadership.renew_interval))
    return max(HEALTHZ_TICK_INTERVALS * longest, HEALTHZ_MIN_LIMIT_S)


@dataclass(frozen=True)
class Health:
    healthy: bool
    text: str


def beat_health(engine: BeatEngine) -> Health:
    """Whether beat's loop is alive: its last completed tick (``engine.last_tick``,
    on the engine's monotonic clock) is at most :func:`tick_limit` seconds old.
    A tick that raised does not count."""
    limit = tick_limit(engine)
    last = engine.last_tick
    if last is None:
        return Health(False, f"unhealthy: beat has not completed a tick yet (limit {limit:g}s)")
    age = max(0.0, engine.monotonic() - last)
    leadership = engine.leadership
    role = "" if leadership is None else (" (leader)" if leadership.leading else " (standby)")
    if age > limit:
        return Health(
            False,
            f"unhealthy: beat's last tick was {age:.1f}s ago, over the {limit:g}s limit{role}",
        )
    return Health(True, f"ok: beat's last tick was {age:.1f}s ago{role}")


WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def endpoint_app(registry: CollectorRegistry, engine: BeatEngine) -> WsgiApp:
    """The WSGI app: ``/metrics``, ``/healthz``, 404 elsewhere."""
    metrics = make_wsgi_app(registry)

    def text(start: Callable[..., Any], status: str, body: str) -> list[bytes]:
        data = (body + "\n").encode()
        start(
            status,
            [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(data)))],
        )
        return [data]

    def app(environ: dict[str, Any], start: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO") or "/"
        if path == "/metrics":
            return metrics(environ, start)  # type: ignore[no-any-return]
        if path == "/healthz":
            health = beat_health(engine)
            status = "200 OK" if health.healthy else "503 Service Unavailable"
            return text(start, status, health.text)
        return text(start, "404 Not Found", f"not found: {path} (try /metrics or /healthz)")

    return app


class _Server(ThreadingMixIn, WSGIServer):
    daemon_threads = True
    allow_reuse_address = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Scrapes are not logged (one every few seconds)."""


@dataclass
class MetricsServer:
    """The running endpoint (a daemon thread); ``port`` is the bound port."""

    server: WSGIServer
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_port)

    def shutdown(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5)


def serve_metrics(
    engine: BeatEngine, store: ScheduleStore, clock: Clock, port: int, addr: str = "0.0.0.0"
) -> MetricsServer:
    """Start the HTTP endpoint (a daemon thread) and hook dispatch lateness.
    Called on beat's thread, it publishes the snapshot the first scrapes serve
    (until beat's next round after a scrape publishes a newer one)."""
    engine.snapshot()
    app = endpoint_app(metrics_registry(engine, store, clock), engine)
    family = socket.getaddrinfo(addr, port, type=socket.SOCK_STREAM)[0][0]

    class Server(_Server):
        address_family = family  # IPv6 too (dgs_metrics_addr "::")

    server = make_server(addr, port, app, Server, _QuietHandler)
    thread = threading.Thread(target=server.serve_forever, name="dgs-metrics", daemon=True)
    thread.start()
    logger.info("celery-dgs: metrics on http://%s:%d/metrics (health: /healthz)", addr, port)
    return MetricsServer(server, thread)
