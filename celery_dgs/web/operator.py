"""The status page's operator routes: sign in (with a per-client backoff on
wrong tokens, :mod:`.throttle`) and out with the token, and the actions
(pause, resume, run now, cancel a run or a deferred check), each guarded by
:class:`~.auth.Guard` and logged, through :mod:`celery_dgs.ops.actions`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from urllib.parse import parse_qs, urlencode

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ..core.spec_values import MAX_PRIORITY, MIN_PRIORITY
from ..ops.actions import ActionResult, cancel_run, request_run, set_paused
from ..ops.checks import cancel_check_named
from ..ops.env import Env
from ..ops.errors import ActionRefused, OperationError, UnknownTarget
from .auth import COOKIE, Guard, same_origin
from .cache import SnapshotCache
from .pages import Pages
from .scrub import scrub
from .snapshot import Snapshot
from .templating import HEADERS, Renderer
from .throttle import LoginThrottle

log = logging.getLogger("celery_dgs.web")

#: The operator actions: form value -> the operation.
ACTIONS: dict[str, Callable[[Env, str, dict[str, str]], ActionResult]] = {
    "pause": lambda env, name, _f: set_paused(env, name, True),
    "resume": lambda env, name, _f: set_paused(env, name, False),
    "run": lambda env, name, form: request_run(env, name, priority_of(name, form)),
    "cancel": lambda env, name, form: cancel_run(env, name, token=token_of(name, form)),
    "cancel_check": lambda env, name, _f: cancel_check_named(env, name),
}


def priority_of(name: str, form: dict[str, str]) -> int | None:
    """The run-now form's priority class (empty: ``None``, class 0); an
    :class:`~celery_dgs.ops.errors.ActionRefused` naming the schedule unless
    0 to 99."""
    text = form.get("priority", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or not MIN_PRIORITY <= int(text) <= MAX_PRIORITY:
        raise ActionRefused(
            f"{name}: the run's priority must be a whole number from {MIN_PRIORITY} (first) "
            f"to {MAX_PRIORITY} (last), got {text[:20]!r}; nothing changed"
        )
    return int(text)


def token_of(name: str, form: dict[str, str]) -> int | None:
    """The cancel form's run token (empty: ``None``, the live run); anything
    but a whole number is a 400 naming the schedule."""
    text = form.get("token", "").strip()
    if not text:
        return None
    if not (text.isascii() and text.isdigit()) or len(text) > 20:
        raise HTTPException(
            400, f"{name}: a run's token is a whole number, got {text[:20]!r}; nothing changed"
        )
    return int(text)


async def form_of(request: Request) -> dict[str, str]:
    body = (await request.body()).decode("utf-8", "replace")
    return {k: v[0] for k, v in parse_qs(body, keep_blank_values=True).items()}


def client_of(request: Request) -> str:
    client = request.client
    return f"{client.host}:{client.port}" if client is not None else "unknown client"


def address_of(request: Request) -> str:
    """The client's address without its port: whom the sign-in backoff counts."""
    return request.client.host if request.client is not None else "unknown"


class Operator:
    """Sign-in, sign-out and the actions on ``env``'s schedules. After an
    action the snapshot is read again and the schedule's page shown with what
    changed; a refused one shows why (404: no such schedule, 409: refused).
    ``hidden``: the passwords scrubbed from every message; ``throttle``: the
    backoff on wrong tokens."""

    def __init__(
        self,
        env: Env,
        guard: Guard,
        cache: SnapshotCache[Snapshot],
        renderer: Renderer,
        pages: Pages,
        hidden: list[str],
        throttle: LoginThrottle,
    ) -> None:
        self.env = env
        self.guard = guard
        self.cache = cache
        self.renderer = renderer
        self.pages = pages
        self.hidden = hidden
        self.throttle = throttle

    async def login(self, request: Request) -> Response:
        if request.method == "GET":
            return self.renderer.render("login.html", request, failed=False, wait=0)
        who, address = client_of(request), address_of(request)
        wait = self.throttle.wait(address)
        if wait > 0:
            log.warning(
                "status page: refused sign-in from %s: wrong tokens, %.0f s to wait", who, wait
            )
            return self.too_soon(request, wait)
        form = await form_of(request)
        if not same_origin(request.headers.get("origin"), request.url.netloc):
            log.warning("status page: refused sign-in from %s: from another origin", who)
            return self.renderer.render("login.html", request, status=403, failed=True, wait=0)
        cookie = self.guard.sign_in(form.get("token", ""))
        if cookie is None:
            wait = self.throttle.failed(address) if self.guard.enabled else 0
            log.warning("status page: refused sign-in from %s: wrong token", who)
            return self.renderer.render("login.html", request, status=403, failed=True, wait=wait)
        self.throttle.succeeded(address)
        log.info("status page: operator signed in from %s", who)
        response = RedirectResponse("/", status_code=303, headers=HEADERS)
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(self.env.settings.web_session_lifetime),
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )
        return response

    def too_soon(self, request: Request, wait: float) -> Response:
        """429: the client must wait ``wait`` seconds before its next token."""
        seconds = max(1, round(wait))
        return self.renderer.render(
            "login.html",
            request,
            status=429,
            headers={"Retry-After": str(seconds)},
            failed=False,
            wait=seconds,
        )

    async def logout(self, request: Request) -> Response:
        """Sign out: the session ends on the server, and its cookie is deleted.
        Needs the session's CSRF value, as an action does."""
        form = await form_of(request)
        nonce = self.guard.authorized(
            request.cookies.get(COOKIE),
            form.get("csrf"),
            request.headers.get("origin"),
            request.url.netloc,
        )
        if nonce is None:
            log.warning("status page: refused sign-out from %s", client_of(request))
            why = "not signed in with the token, or the CSRF check failed"
            return self.renderer.render("refused.html", request, status=403, why=why)
        self.guard.sign_out(nonce)
        log.info("status page: operator signed out from %s", client_of(request))
        response = RedirectResponse("/", status_code=303, headers=HEADERS)
        response.delete_cookie(COOKIE, path="/")
        return response

    async def action(self, request: Request) -> Response:
        form = await form_of(request)
        op, name = form.get("op", ""), form.get("name", "")
        who = client_of(request)
        allowed = self.guard.allows(
            request.cookies.get(COOKIE),
            form.get("csrf"),
            request.headers.get("origin"),
            request.url.netloc,
        )
        if not allowed or op not in ACTIONS:
            why = (
                "the page is read-only (dgs_web_token is not set)"
                if not self.guard.enabled
                else "unknown action"
                if op not in ACTIONS
                else "not signed in with the token, or the CSRF check failed"
            )
            log.warning("status page: refused %s of %r from %s: %s", op, name, who, why)
            # a signed-in operator's unknown action is a bad request, not a refusal
            status = 400 if allowed and self.guard.enabled else 403
            return self.renderer.render("refused.html", request, status=status, why=why)
        request.scope["query_string"] = urlencode({"name": name}).encode()
        try:
            result = await run_in_threadpool(ACTIONS[op], self.env, name, form)
            await run_in_threadpool(self.cache.refresh)
            self.pages.tables.forget()
        except OperationError as exc:
            message = scrub(exc.message, self.hidden)
            log.warning("status page: %s of %r from %s failed: %s", op, name, who, message)
            if isinstance(exc, UnknownTarget):
                return self.renderer.render("missing.html", request, status=404, name=name)
            return await run_in_threadpool(
                self.pages.schedule, Request(request.scope), None, message, 409
            )
        log.info("status page: %s of %r from %s: %s", op, name, who, " / ".join(result.lines))
        return await run_in_threadpool(self.pages.schedule, Request(request.scope), result)
