"""The status page's ASGI application (Starlette, Jinja2 templates with
autoescape, htmx for live refresh).

Every page is rendered on the server from one :class:`~.views.Snapshot` of
the state, read through the CLI's own read and re-read at most every
``max_age`` seconds however many browsers poll. Actions call the CLI's
functions (:mod:`celery_dgs.cli.control`) and are guarded by
:class:`~.auth.Guard`. Errors reading Redis or the store give a 503 page
whose text never contains a password of a configured URL.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, parse_qsl, unquote, urlencode, urlsplit

import click
import jinja2
import redis
from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..cli.checks import cancel_check_named, check_name, read_check
from ..cli.checks_render import late_text, summary_json
from ..cli.context import Env, utcnow
from ..cli.control import ActionResult, cancel_run, request_run, set_paused
from ..cli.output import duration, iso, relative, short_time
from ..core.condition import Level
from ..core.spec import CheckSpec
from ..core.spec_values import MAX_PRIORITY, MIN_PRIORITY
from ..errors import DgsError
from ..status import CachedCheckSummary, is_check_name
from . import views
from .auth import COOKIE, Guard, host_allowed, same_origin

log = logging.getLogger("celery_dgs.web")

HERE = Path(__file__).resolve().parent
#: The deferred-check summary is read again once its last reading is this many
#: times as old as that reading took (a million checks: every ~10 s; a few: always).
CHECK_SUMMARY_COST_FACTOR = 10.0

#: Security headers of every page: scripts only from this server (htmx), no framing.
HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    # same-origin, not no-referrer: under no-referrer a browser posts its forms
    # with "Origin: null", which the CSRF check refuses.
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}

#: The operator actions: form value -> the CLI's function.
ACTIONS: dict[str, Callable[[Env, str, dict[str, str]], ActionResult]] = {
    "pause": lambda env, name, _f: set_paused(env, name, True),
    "resume": lambda env, name, _f: set_paused(env, name, False),
    "run": lambda env, name, form: request_run(env, name, priority_of(name, form)),
    "cancel": lambda env, name, form: cancel_run(
        env, name, token=int(form["token"]) if form.get("token", "").isdigit() else None
    ),
    "cancel_check": lambda env, name, _f: cancel_check_named(env, name),
}


def priority_of(name: str, form: dict[str, str]) -> int | None:
    """The run-now form's priority class (empty: ``None``, class 0); a
    :class:`click.ClickException` naming the schedule unless 0 to 99."""
    text = form.get("priority", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not MIN_PRIORITY <= int(text) <= MAX_PRIORITY:
        raise click.ClickException(
            f"{name}: the run's priority must be a whole number from {MIN_PRIORITY} (first) "
            f"to {MAX_PRIORITY} (last), got {text[:20]!r}; nothing changed"
        )
    return int(text)


class SnapshotCache:
    """The last :class:`~.views.Snapshot`, read again once it is stale: older
    than ``max_age`` seconds, or than four times its own read time (a large
    fleet's read takes seconds; the page then spends at most a fifth of its
    time reading). While one request reads a new snapshot the others get the
    current one at once; only the first read, and :meth:`refresh`, wait."""

    def __init__(self, read: Callable[[], views.Snapshot], max_age: float) -> None:
        self._read = read
        self.max_age = max_age
        self._lock = threading.Lock()
        self._snap: views.Snapshot | None = None
        self._at = 0.0
        self._took = 0.0

    def _stale(self) -> bool:
        return time.monotonic() - self._at > max(self.max_age, 4 * self._took)

    def _reread(self) -> views.Snapshot:
        started = time.monotonic()
        snap = self._read()
        self._snap, self._at, self._took = snap, time.monotonic(), time.monotonic() - started
        return snap

    def get(self) -> views.Snapshot:
        snap = self._snap
        if snap is None:
            return self.refresh()
        if self._stale() and self._lock.acquire(blocking=False):
            try:
                if self._stale():
                    return self._reread()
            finally:
                self._lock.release()
        return self._snap or snap

    def refresh(self) -> views.Snapshot:
        """Read a new snapshot now (after an action, so its page shows the change)."""
        with self._lock:
            return self._reread()


def secrets_of(env: Env) -> list[str]:
    """The passwords of the configured connections, longest first: in each
    ``;``-separated part of the URLs (Redis, broker, database), as their user
    part or a ``password=`` query parameter, and in the sentinels' options
    (``dgs_redis_sentinel_kwargs``, the broker's ``sentinel_kwargs``)."""
    settings, conf = env.settings, env.app.conf
    found: set[str] = set()
    for url in (settings.database_url, settings.redis_url, conf.broker_url):
        if isinstance(url, str):
            found.update(url_passwords(url))
    transport = conf.broker_transport_options or {}
    for options in (settings.redis_sentinel_kwargs, transport.get("sentinel_kwargs")):
        if isinstance(options, Mapping):
            found.update(str(v) for k, v in options.items() if "password" in str(k).lower() and v)
    return sorted(found, key=lambda s: (-len(s), s))


def url_passwords(url: str) -> list[str]:
    """Every password of ``url``'s ``;``-separated parts (raw and %-decoded)."""
    found = []
    for part in url.split(";"):
        try:
            parts = urlsplit(part.strip())
        except ValueError:
            continue
        userinfo = parts.netloc.rpartition("@")[0]
        if ":" in userinfo:
            found.append(userinfo.partition(":")[2])
        found += [
            v for k, v in parse_qsl(parts.query, keep_blank_values=True) if k.lower() == "password"
        ]
    decoded = [unquote(p) for p in found]
    return [p for p in dict.fromkeys(found + decoded) if p]


def scrub(text: str, secrets: list[str]) -> str:
    """``text`` with each of ``secrets`` (longest first) replaced by ``***``."""
    for secret in sorted(secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def _templates() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(HERE / "templates"),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
    )
    env.globals.update(
        urlencode=urlencode,
        rel=relative,
        ladder=views.ladder_words,
        prio=views.priority_words,
        tags=views.tags_of,
        late=late_text,
    )
    env.filters.update(
        dur=duration,
        short=short_time,
        iso=iso,
        pct=lambda p: "-" if p is None else f"{p * 100:.0f}%",
    )
    return env


def create_app(
    env: Env,
    *,
    refresh: float = 2.0,
    max_age: float = 1.0,
    read: Callable[[], views.Snapshot] | None = None,
    loopback_only: bool = True,
) -> Starlette:
    """The status page of ``env``'s app. ``refresh``: seconds between the live
    parts' updates in the browser; ``max_age``: how old a snapshot may be;
    ``loopback_only`` (bound to a loopback address): requests whose ``Host``
    names another machine are refused with 421 (DNS rebinding)."""
    templates = _templates()
    guard = Guard(env.settings.web_token)
    checks_cache = CachedCheckSummary(
        lambda: env.runtime.store.check_summary(utcnow()), cost_factor=CHECK_SUMMARY_COST_FACTOR
    )
    cache = SnapshotCache(read or (lambda: views.take_snapshot(env, checks_cache)), max_age)
    hidden = secrets_of(env)
    settings = env.settings

    def render(template: str, request: Request, status: int = 200, **context: Any) -> HTMLResponse:
        nonce = guard.session(request.cookies.get(COOKIE))
        context.update(
            refresh=refresh,
            Level=Level,
            can_act=guard.enabled and nonce is not None,
            actions_enabled=guard.enabled,
            csrf=guard.csrf(nonce) if nonce is not None else "",
            path=request.url.path,
        )
        html = templates.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def is_fragment(request: Request) -> bool:
        return request.headers.get("HX-Request") == "true"

    def overview(request: Request) -> Response:
        snap = cache.get()
        data = snap.overview
        bars = views.histogram_bars(data["histogram"])
        page = "overview_live.html" if is_fragment(request) else "overview.html"
        return render(
            page, request, snap=snap, o=data, bars=bars, hist=(views.HIST_W, views.HIST_H)
        )

    def overview_json(request: Request) -> Response:
        snap = cache.get()
        data = snap.overview
        return JSONResponse(
            {
                "now": iso(snap.now),
                "counts": data["counts"],
                "reasons": {k: dict(v) for k, v in data["reasons"].items()},
                "beat_leader": data["leader"],
                "workers": [
                    {"name": w.name, "slots": w.slots, "busy": w.busy, "free": w.free}
                    for w in data["workers"]
                ],
                "pending_dispatches": data["pending_dispatches"],
                "histogram": dict(data["histogram"]),
                "checks": summary_json(snap.checks, snap.now),
            },
            headers=HEADERS,
        )

    def schedules(request: Request) -> Response:
        snap = cache.get()
        p = request.query_params
        page_no = p.get("page", "1")
        query = views.Query(
            q=p.get("q", ""),
            condition=p.get("condition", ""),
            pool=p.get("pool", ""),
            task=p.get("task", ""),
            page=int(page_no) if page_no.isdigit() else 1,
        )
        page = views.page_of(snap, query)
        name = "schedules_table.html" if is_fragment(request) else "schedules.html"
        return render(
            name,
            request,
            snap=snap,
            page=page,
            pools=views.pools_of(snap),
            levels=[lv.name for lv in sorted(Level, reverse=True)],
        )

    def schedule_page(
        request: Request,
        notice: ActionResult | None = None,
        problem: str | None = None,
        status: int = 200,
    ) -> Response:
        snap = cache.get()
        name = request.query_params.get("name", "")
        row = snap.by_name.get(name)
        if row is None and is_check_name(name):
            return check_page(request, name, notice, problem, status)
        if row is None:
            return render("missing.html", request, status=404, name=name)
        stored = snap.stored[name]
        runs = env.runtime.store.runs(name, limit=30)
        lease = None
        if row.running is not None:
            lease = views.lease_view(
                row.running,
                snap.now,
                ping_timeout=settings.ping_timeout,
                steal_delay=settings.steal_delay,
            )
        avg, dev = views.average_of(stored)
        page = "schedule_live.html" if is_fragment(request) else "schedule.html"
        return render(
            page,
            request,
            status=status,
            snap=snap,
            row=row,
            stored=stored,
            runs=runs,
            words=views.spec_words(stored.spec) if stored.spec is not None else "",
            tl=views.timeline(runs, row, snap.now),
            lease=lease,
            avg=avg,
            dev=dev,
            notice=notice,
            problem=problem,
        )

    def check_page(
        request: Request,
        name: str,
        notice: ActionResult | None = None,
        problem: str | None = None,
        status: int = 200,
    ) -> Response:
        """A deferred check's page: pending (next check, counts) or ended
        (its history), and its runs; with a notice after an action."""
        try:
            check_name_, task, key = check_name(name, None)
            detail = read_check(env, check_name_, task, key)
        except click.BadParameter:
            return render("missing.html", request, status=404, name=name)
        row = detail.row
        page = "check_live.html" if is_fragment(request) else "check.html"
        return render(
            page,
            request,
            status=status,
            notice=notice,
            problem=problem,
            snap=cache.get(),
            c=detail,
            row=row,
            pending=row is not None and row.active,
            spec=row.spec if row is not None and isinstance(row.spec, CheckSpec) else None,
        )

    def leases_page(request: Request) -> Response:
        snap = cache.get()
        leases = [
            views.lease_view(
                lease,
                snap.now,
                ping_timeout=settings.ping_timeout,
                steal_delay=settings.steal_delay,
            )
            for lease in sorted(snap.state.leases.values(), key=lambda x: x.started_at)
        ]
        page = "leases_live.html" if is_fragment(request) else "leases.html"
        return render(page, request, snap=snap, leases=leases, failures=failures_of(snap))

    #: The recent failures of the snapshot last shown: read once per snapshot,
    #: not on every viewer's poll.
    failures_memo: list[Any] = [None, []]

    def failures_of(snap: views.Snapshot) -> list[tuple[Any, Any]]:
        """The 20 failing schedules most recently ended, with their last run."""
        if failures_memo[0] is snap:
            return list(failures_memo[1])
        failing = sorted(
            (r for r in snap.ordered if r.failure_count),
            key=lambda r: (
                r.last_end_at is None,
                -(r.last_end_at.timestamp() if r.last_end_at else 0.0),
            ),
        )[:20]
        failures = []
        for row in failing:
            last = env.runtime.store.runs(row.name, limit=1)
            failures.append((row, last[0] if last else None))
        failures_memo[:] = [snap, failures]
        return failures

    async def form_of(request: Request) -> dict[str, str]:
        body = (await request.body()).decode("utf-8", "replace")
        return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}

    async def login(request: Request) -> Response:
        if request.method == "GET":
            return render("login.html", request, failed=False)
        form = await form_of(request)
        cookie = guard.sign_in(form.get("token", ""))
        if cookie is None or not same_origin(request.headers.get("origin"), request.url.netloc):
            log.warning("status page: refused sign-in from %s", _client(request))
            return render("login.html", request, status=403, failed=True)
        log.info("status page: operator signed in from %s", _client(request))
        response = RedirectResponse("/", status_code=303, headers=HEADERS)
        response.set_cookie(COOKIE, cookie, httponly=True, samesite="strict", path="/")
        return response

    async def logout(request: Request) -> Response:
        response = RedirectResponse("/", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def action(request: Request) -> Response:
        form = await form_of(request)
        op, name = form.get("op", ""), form.get("name", "")
        who = _client(request)
        allowed = guard.allows(
            request.cookies.get(COOKIE),
            form.get("csrf"),
            request.headers.get("origin"),
            request.url.netloc,
        )
        if not allowed or op not in ACTIONS:
            why = (
                "the page is read-only (dgs_web_token is not set)"
                if not guard.enabled
                else "unknown action"
                if op not in ACTIONS
                else "not signed in with the token, or the CSRF check failed"
            )
            log.warning("status page: refused %s of %r from %s: %s", op, name, who, why)
            return render("refused.html", request, status=403, why=why)
        try:
            result = await run_in_threadpool(ACTIONS[op], env, name, form)
            await run_in_threadpool(cache.refresh)
        except click.ClickException as exc:
            message = scrub(exc.message, hidden)
            log.warning("status page: %s of %r from %s failed: %s", op, name, who, message)
            request.scope["query_string"] = urlencode({"name": name}).encode()
            status = 404 if isinstance(exc, click.BadParameter) else 409
            if status == 404:
                return render("missing.html", request, status=404, name=name)
            return await run_in_threadpool(
                schedule_page, Request(request.scope), None, message, status
            )
        log.info("status page: %s of %r from %s: %s", op, name, who, " / ".join(result.lines))
        request.scope["query_string"] = urlencode({"name": name}).encode()
        return await run_in_threadpool(schedule_page, Request(request.scope), result)

    def unavailable(request: Request, exc: Exception) -> Response:
        text = scrub(f"{type(exc).__name__}: {exc}", hidden)
        log.warning("status page: cannot read the state: %s", text)
        return render("unavailable.html", request, status=503, error=text)

    routes = [
        Route("/", overview),
        Route("/api/overview", overview_json),
        Route("/schedules", schedules),
        Route("/schedule", schedule_page),
        Route("/leases", leases_page),
        Route("/login", login, methods=["GET", "POST"]),
        Route("/logout", logout, methods=["POST"]),
        Route("/action", action, methods=["POST"]),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
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


def _client(request: Request) -> str:
    client = request.client
    return f"{client.host}:{client.port}" if client is not None else "unknown client"
