"""The status page's ASGI application (Starlette, Jinja2 templates with
autoescape, htmx for live refresh).

Every page is rendered on the server from one :class:`~.snapshot.Snapshot`
of the state, read as ``celery dgs status`` reads it (:mod:`celery_dgs.ops`)
and re-read at most every ``max_age`` seconds however many browsers poll.
The routes are the methods of :class:`~.pages.Pages` (reading) and
:class:`~.operator.Operator` (signing in, actions through
:mod:`celery_dgs.ops.actions`, guarded by :class:`~.auth.Guard`), given
their parts here. Errors reading Redis or the store give a 503 page whose
text never contains a password of a configured URL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import redis
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import DgsError
from ..ops.env import Env, utcnow
from ..status import CachedCheckSummary
from .auth import Guard, host_allowed
from .cache import SnapshotCache
from .operator import Operator
from .pages import Pages
from .scrub import scrub, secrets_of
from .snapshot import Snapshot, take_snapshot
from .templating import HERE, Renderer

log = logging.getLogger("celery_dgs.web")

#: The deferred-check summary is read again once its last reading is this many
#: times as old as that reading took (a million checks: every ~10 s; a few: always).
CHECK_SUMMARY_COST_FACTOR = 10.0


def create_app(
    env: Env,
    *,
    refresh: float = 2.0,
    max_age: float = 1.0,
    read: Callable[[], Snapshot] | None = None,
    loopback_only: bool = True,
) -> Starlette:
    """The status page of ``env``'s app. ``refresh``: seconds between the live
    parts' updates in the browser; ``max_age``: how old a snapshot may be;
    ``read``: how a snapshot is read (default: :func:`~.snapshot.take_snapshot`);
    ``loopback_only`` (bound to a loopback address): requests whose ``Host``
    names another machine are refused with 421 (DNS rebinding)."""
    guard = Guard(env.settings.web_token)
    checks_cache = CachedCheckSummary(
        lambda: env.runtime.store.check_summary(utcnow()), cost_factor=CHECK_SUMMARY_COST_FACTOR
    )
    cache = SnapshotCache(read or (lambda: take_snapshot(env, checks_cache)), max_age)
    hidden = secrets_of(env)
    renderer = Renderer(guard, refresh)
    pages = Pages(env, cache, renderer)
    operator = Operator(env, guard, cache, renderer, pages, hidden)
    routes = [
        Route("/", pages.overview),
        Route("/api/overview", pages.overview_json),
        Route("/schedules", pages.schedules),
        Route("/schedule", pages.schedule),
        Route("/leases", pages.leases),
        Route("/login", operator.login, methods=["GET", "POST"]),
        Route("/logout", operator.logout, methods=["POST"]),
        Route("/action", operator.action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    unavailable = unavailable_page(renderer, hidden)
    handlers: dict[Any, Callable[[Request, Exception], Response]] = {
        redis.RedisError: unavailable,
        SQLAlchemyError: unavailable,
        DgsError: unavailable,
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.cache = cache
    if loopback_only:
        app.add_middleware(LoopbackHostOnly)
    return app


def unavailable_page(
    renderer: Renderer, hidden: list[str]
) -> Callable[[Request, Exception], Response]:
    """The handler of an error reading the state: a 503 page naming it, with
    each of ``hidden`` scrubbed from its text."""

    def unavailable(request: Request, exc: Exception) -> Response:
        text = scrub(f"{type(exc).__name__}: {exc}", hidden)
        log.warning("status page: cannot read the state: %s", text)
        return renderer.render("unavailable.html", request, status=503, error=text)

    return unavailable


class LoopbackHostOnly:
    """ASGI middleware: a request whose ``Host`` is not this machine's gets 421."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if not host_allowed(host):
                log.warning(
                    "celery-dgs web: refused a request for host %r (the page is "
                    "bound to this machine only)",
                    host,
                )
                response = Response(
                    "misdirected request: this page answers to localhost names only\n",
                    status_code=421,
                    media_type="text/plain",
                )
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)
