"""The pages' HTML: Jinja2 templates (autoescape) rendered with what every
page needs (the refresh interval, the operator's session and CSRF value), and
the security headers of every response."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse

from ..core.condition import Level
from ..ops.timetext import duration, iso, late_text, relative, short_time
from . import views
from .auth import COOKIE, Guard
from .scrub import Scrubber

HERE = Path(__file__).resolve().parent

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


def templates(scrubber: Scrubber) -> jinja2.Environment:
    """The templates, with the helpers they call; ``scrubber`` keeps secrets
    out of free text (``|scrub``) and arguments (``arguments(spec, full)``)."""
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
        max_paged=views.MAX_PAGED_ROWS,
        arguments=lambda spec, full: scrubber.arguments(spec.args, spec.kwargs, full),
    )
    env.filters.update(
        dur=duration,
        short=short_time,
        iso=iso,
        pct=lambda p: "-" if p is None else f"{p * 100:.0f}%",
        scrub=scrubber.text,
        json=as_json,
    )
    return env


def as_json(value: object) -> str:
    """``value`` as JSON, as the API and ``celery dgs add`` take it (keys
    sorted; autoescape escapes it for the page)."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def is_fragment(request: Request) -> bool:
    """Whether htmx asks for the live part of a page only."""
    return request.headers.get("HX-Request") == "true"


class Renderer:
    """Renders a template into a response, with the context every page shares."""

    def __init__(self, guard: Guard, refresh: float, scrubber: Scrubber) -> None:
        self.guard = guard
        self.refresh = refresh
        self.templates = templates(scrubber)

    def render(
        self,
        template: str,
        request: Request,
        status: int = 200,
        headers: dict[str, str] | None = None,
        **context: Any,
    ) -> HTMLResponse:
        guard = self.guard
        nonce = guard.session(request.cookies.get(COOKIE))
        context.update(
            refresh=self.refresh,
            Level=Level,
            can_act=guard.enabled and nonce is not None,
            actions_enabled=guard.enabled,
            csrf=guard.csrf(nonce) if nonce is not None else "",
            path=request.url.path,
        )
        html = self.templates.get_template(template).render(**context)
        return HTMLResponse(html, status_code=status, headers={**HEADERS, **(headers or {})})
