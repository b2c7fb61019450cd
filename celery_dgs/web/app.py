"""The status page's ASGI application (Starlette, Jinja2 templates with
autoescape, htmx for live refresh).

Every page is rendered on the server from the store's kept state and Redis,
read as ``celery dgs status`` reads them (:mod:`celery_dgs.ops`): the
overview from one :class:`~.snapshot.Snapshot`, the schedules table a page
at a time, each re-read in the background at most every ``max_age`` seconds
however many browsers poll.
The routes are the methods of :class:`~.pages.Pages` (reading) and
:class:`~.operator.Operator` (signing in, actions through
:mod:`celery_dgs.ops.actions`, guarded by :class:`~.auth.Guard`), given
their parts here. Errors reading Redis or the store give a 503 page that
names the failing service only (the server and the cause go to the log, with
the passwords of the configured URLs scrubbed).
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable
from typing import Any

import redis
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..errors import DgsError
from ..ops.env import Env
from .auth import Guard
from .cache import SnapshotCache
from .hosts import HostCheck, HostPolicy
from .limits import BodyLimit
from .operator import Operator
from .pages import Pages
from .proxies import TrustedProxies
from .scrub import Scrubber, scrub, secrets_of
from .sessions import Sessions
from .snapshot import OVERVIEW_LONGEST_S, FleetReads, Snapshot, take_snapshot
from .templating import HEADERS, HERE, Renderer
from .throttle import LoginThrottle

log = logging.getLogger("celery_dgs.web")


def favicon(request: Request) -> Response:
    """Browsers that ask for ``/favicon.ico`` before reading the page's icon link."""
    return RedirectResponse("/static/favicon.svg", status_code=301)


def create_app(
    env: Env,
    *,
    refresh: float = 2.0,
    max_age: float = 1.0,
    read: Callable[[], Snapshot] | None = None,
) -> Starlette:
    """The status page of ``env``'s app. ``refresh``: seconds between the live
    parts' updates in the browser; ``max_age``: how old a snapshot may be;
    ``read``: how a snapshot is read (default: :func:`~.snapshot.take_snapshot`).
    Around the routes, outermost first: the forwarded client of a trusted
    proxy (:mod:`.proxies`), the ``Host`` check (:mod:`.hosts`, 421) and the
    body limit (:mod:`.limits`, 413)."""
    settings = env.settings
    guard = Guard(settings.web_token, Sessions(settings.web_session_lifetime))
    fleet = FleetReads(env, max_age)
    cache = SnapshotCache(
        read or (lambda: take_snapshot(env, fleet)), max_age, longest=OVERVIEW_LONGEST_S
    )
    hidden = secrets_of(env)
    renderer = Renderer(guard, refresh, Scrubber(hidden))
    pages = Pages(env, cache, renderer)
    operator = Operator(env, guard, cache, renderer, pages, hidden, LoginThrottle())
    routes = [
        Route("/", pages.overview),
        Route("/api/overview", pages.overview_json),
        Route("/schedules", pages.schedules),
        Route("/schedule", pages.schedule),
        Route("/schedules/{name:path}", schedule_address),
        Route("/leases", pages.leases),
        Route("/login", operator.login, methods=["GET", "POST"]),
        Route("/logout", operator.logout, methods=["POST"]),
        Route("/action", operator.action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        Route("/favicon.ico", favicon),
    ]
    unavailable = unavailable_page(renderer, hidden)
    handlers: dict[Any, Callable[[Request, Exception], Response]] = {
        redis.RedisError: unavailable,
        SQLAlchemyError: unavailable,
        DgsError: unavailable,
        HTTPException: plain_error,
    }
    app = Starlette(routes=routes, exception_handlers=handlers)
    app.state.cache = cache
    app.add_middleware(BodyLimit)
    app.add_middleware(HostCheck, policy=HostPolicy(settings.web_allowed_hosts))
    if settings.web_trusted_proxies:
        app.add_middleware(TrustedProxies, proxies=settings.web_trusted_proxies)
    return app


def schedule_address(request: Request) -> Response:
    """``/schedules/NAME``, the address one guesses for a schedule: its page,
    ``/schedule?name=NAME`` (a permanent redirect)."""
    query = urllib.parse.urlencode({"name": request.path_params["name"]})
    return RedirectResponse(f"/schedule?{query}", status_code=301, headers=HEADERS)


def plain_error(request: Request, exc: Exception) -> Response:
    """An HTTP error raised by a route (400: a bad parameter) as one line of text."""
    assert isinstance(exc, HTTPException)
    return PlainTextResponse(f"{exc.detail}\n", status_code=exc.status_code, headers=HEADERS)


def unavailable_page(
    renderer: Renderer, hidden: list[str]
) -> Callable[[Request, Exception], Response]:
    """The handler of an error reading the state: a 503 page saying which
    service failed (Redis, the database) and the error's kind (``/api/...``:
    as JSON, ``{"error": ...}``); the error itself, which names the server,
    is logged (scrubbed of ``hidden``)."""

    def unavailable(request: Request, exc: Exception) -> Response:
        text = scrub(f"{type(exc).__name__}: {exc}", hidden)
        log.warning("status page: cannot read the state: %s", text)
        shown = unavailable_text(exc)
        if request.url.path.startswith("/api/"):  # a client that asked for JSON gets JSON
            return JSONResponse({"error": shown}, status_code=503, headers=HEADERS)
        return renderer.render("unavailable.html", request, status=503, error=shown)

    return unavailable


def unavailable_text(exc: Exception) -> str:
    """What the 503 page says of ``exc``: which service failed and the error's
    kind, never where the service runs."""
    seen: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not s for s in seen):
        seen.append(current)
        current = current.__cause__ or current.__context__
    for err in seen:
        if isinstance(err, redis.AuthenticationError):
            return "Redis refused the credentials; the page's log names the server"
        if isinstance(err, redis.RedisError):
            return f"Redis could not be read ({type(err).__name__}); the page's log says why"
        if isinstance(err, SQLAlchemyError):
            return (
                f"The schedule store could not be read ({type(err).__name__}); "
                "the page's log says why"
            )
    return f"Redis or the schedule store could not be read ({type(exc).__name__})"
